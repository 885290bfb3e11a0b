// Command descheduler is the stock descheduler with budgetguard's
// BudgetAwareEvictor registered and its policy file decoded strictly.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	deschedulerapp "sigs.k8s.io/descheduler/cmd/descheduler/app"

	"github.com/budgetguard/budgetguard/cmd/descheduler/app"
)

func main() {
	cmd := app.NewDeschedulerCommand(os.Stdout)
	cmd.AddCommand(deschedulerapp.NewVersionCommand())
	os.Exit(cli.Run(cmd))
}
