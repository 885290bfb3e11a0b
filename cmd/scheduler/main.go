// Command scheduler is kube-scheduler with budgetguard's BudgetAwarePreemption
// plugin registered. Enable it in a profile of the KubeSchedulerConfiguration
// in place of DefaultPreemption, at postFilter and at podGroupPostFilter; see
// manifests/scheduler.
//
// Before kube-scheduler starts, the --config file is loaded and checked by
// package schedulerconfig, so that a profile that would run without budget
// protection, or invalid plugin args, stop the binary before it needs a
// cluster; --validate-only checks the file and exits. --version prints
// budgetguard's version.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/component-base/cli"
	"k8s.io/component-base/term"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/latest"

	"github.com/budgetguard/budgetguard/internal/schedulerconfig"
	"github.com/budgetguard/budgetguard/internal/version"
	"github.com/budgetguard/budgetguard/plugins/budgetpreemption"
)

func main() {
	os.Exit(cli.Run(newCommand()))
}

// newCommand is kube-scheduler's own command
// (app.NewSchedulerCommand) with budgetguard's plugin registered, its
// version, its configuration check and --validate-only. Since Kubernetes
// 1.37 pod groups preempt at the podGroupPostFilter extension point, which
// a profile configures like any other, so nothing of kube-scheduler's run
// is replaced.
func newCommand() *cobra.Command {
	cmd := app.NewSchedulerCommand(app.WithPlugin(budgetpreemption.Name, budgetpreemption.New))
	cmd.Long = `kube-scheduler with budgetguard's BudgetAwarePreemption registered: preemption,
for pods and for pod groups, that never takes a victim beyond its PodDisruptionBudgets
and OpenKruise PodUnavailableBudgets. See kube-scheduler's documentation for the rest.`
	fs := pflag.NewFlagSet("budgetguard", pflag.ContinueOnError)
	validateOnly := fs.Bool("validate-only", false,
		"Check the --config file as the scheduler would at start-up (decoding, kube-scheduler's validation, budgetguard's checks of every profile) without a cluster, print whether it is valid, and exit.")
	cmd.Flags().AddFlagSet(fs)
	// kube-scheduler's help lists its own flag sets; budgetguard's follow.
	cols, _, _ := term.TerminalSize(cmd.OutOrStdout())
	help, usage := cmd.HelpFunc(), cmd.UsageFunc()
	section := func(w io.Writer) {
		_, _ = fmt.Fprintf(w, "\nbudgetguard flags:\n\n%s", fs.FlagUsagesWrapped(cols))
	}
	cmd.SetHelpFunc(func(c *cobra.Command, args []string) {
		help(c, args)
		section(c.OutOrStdout())
	})
	cmd.SetUsageFunc(func(c *cobra.Command) error {
		err := usage(c)
		section(c.OutOrStderr())
		return err
	})

	run := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		// Before kube-scheduler's own --version, which knows no budgetguard.
		if done, err := printVersion(c.OutOrStdout(), c.Flags().Lookup("version").Value.String()); done {
			return err
		}
		version.RegisterMetrics()
		path := c.Flags().Lookup("config").Value.String()
		if path == "" {
			if *validateOnly {
				return errors.New("--validate-only needs --config, the file to check")
			}
			// kube-scheduler runs its default configuration.
			if cfg, err := latest.Default(); err == nil {
				schedulerconfig.Report(klog.Background(), cfg)
			}
			return run(c, args)
		}
		cfg, err := schedulerconfig.Load(klog.Background(), path)
		if err == nil {
			err = schedulerconfig.Check(cfg)
		}
		if err != nil {
			return fmt.Errorf("scheduler configuration %s is invalid:\n%w", path, err)
		}
		if *validateOnly {
			_, err := fmt.Fprintf(c.OutOrStdout(), "config %s is valid\n", path)
			return err
		}
		schedulerconfig.Report(klog.Background(), cfg)
		return run(c, args)
	}
	return cmd
}

// printVersion prints budgetguard's version for --version (flag "true") or,
// as JSON, --version=raw, and reports whether it did. Other values, such as
// kube-scheduler's --version=vX.Y.Z, are left to kube-scheduler.
func printVersion(w io.Writer, flag string) (bool, error) {
	switch flag {
	case "true":
		_, err := fmt.Fprintln(w, version.Get())
		return true, err
	case "raw":
		data, err := json.MarshalIndent(version.Get(), "", "  ")
		if err != nil {
			return true, err
		}
		_, err = fmt.Fprintf(w, "%s\n", data)
		return true, err
	}
	return false, nil
}
