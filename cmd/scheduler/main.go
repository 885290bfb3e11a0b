// Command scheduler is kube-scheduler with budgetguard's BudgetAwarePreemption
// PostFilter plugin registered. Enable it in a profile of the
// KubeSchedulerConfiguration in place of DefaultPreemption; see
// manifests/scheduler.
package main

import (
	"os"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/budgetguard/budgetguard/plugins/budgetpreemption"
)

func main() {
	os.Exit(cli.Run(newCommand()))
}

// newCommand is kube-scheduler's command with budgetguard's plugins.
func newCommand() *cobra.Command {
	return app.NewSchedulerCommand(
		app.WithPlugin(budgetpreemption.Name, budgetpreemption.New),
	)
}
