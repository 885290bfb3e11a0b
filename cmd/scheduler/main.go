// Command scheduler is kube-scheduler with budgetguard's BudgetAwarePreemption
// PostFilter plugin registered. Enable it in a profile of the
// KubeSchedulerConfiguration in place of DefaultPreemption; see
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
	"k8s.io/component-base/cli"
	cliflag "k8s.io/component-base/cli/flag"
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

// newCommand is kube-scheduler's command with budgetguard's plugins, its
// version, its configuration check and --validate-only.
func newCommand() *cobra.Command {
	cmd := app.NewSchedulerCommand(
		app.WithPlugin(budgetpreemption.Name, budgetpreemption.New),
	)
	var flags cliflag.NamedFlagSets
	fs := flags.FlagSet("budgetguard")
	validateOnly := fs.Bool("validate-only", false,
		"Check the --config file as the scheduler would at start-up (decoding, kube-scheduler's validation, budgetguard's checks of every profile) without a cluster, print whether it is valid, and exit.")
	cmd.Flags().AddFlagSet(fs)
	help, usage := cmd.HelpFunc(), cmd.UsageFunc()
	cmd.SetHelpFunc(func(c *cobra.Command, args []string) {
		help(c, args)
		cliflag.PrintSections(c.OutOrStdout(), flags, 0)
	})
	cmd.SetUsageFunc(func(c *cobra.Command) error {
		err := usage(c)
		cliflag.PrintSections(c.OutOrStderr(), flags, 0)
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
