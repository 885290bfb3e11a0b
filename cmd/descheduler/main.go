// Command descheduler is the stock descheduler with budgetguard's
// BudgetAwareEvictor registered and its policy file decoded strictly.
// --validate-only checks a policy file without a cluster; --version and
// the version command print budgetguard's version line.
package main

import (
	"os"

	"k8s.io/component-base/cli"

	"github.com/budgetguard/budgetguard/cmd/descheduler/app"
)

func main() {
	cmd := app.NewDeschedulerCommand(os.Stdout)
	cmd.AddCommand(app.NewVersionCommand())
	os.Exit(cli.Run(cmd))
}
