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
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/apiserver/pkg/server"
	"k8s.io/component-base/cli"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/cli/globalflag"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/component-base/featuregate"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/term"
	"k8s.io/component-base/version/verflag"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/latest"

	"github.com/budgetguard/budgetguard/internal/schedulerconfig"
	"github.com/budgetguard/budgetguard/internal/version"
	"github.com/budgetguard/budgetguard/plugins/budgetpreemption"
)

func main() {
	os.Exit(cli.Run(newCommand()))
}

// newCommand is kube-scheduler's command with budgetguard's plugins, its
// version, its configuration check and --validate-only. It is built as
// kube-scheduler's own (app.NewSchedulerCommand: the same options, flags
// and run) so that budgetguard can reach the scheduler between app.Setup
// and app.Run: gangs preempt only through the plugin a profile enables
// under the name DefaultPreemption, and BudgetAwarePreemption is handed to
// its profiles there (budgetpreemption.EnablePodGroupPreemption).
func newCommand() *cobra.Command {
	opts := options.NewOptions()
	cmd := &cobra.Command{
		Use: "kube-scheduler",
		Long: `kube-scheduler with budgetguard's BudgetAwarePreemption registered: preemption,
for pods and for pod groups, that never takes a victim beyond its PodDisruptionBudgets
and OpenKruise PodUnavailableBudgets. See kube-scheduler's documentation for the rest.`,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			// Feature gates are set before RunE, as kube-scheduler's.
			return opts.ComponentGlobalsRegistry.Set()
		},
		Args: func(cmd *cobra.Command, args []string) error {
			for _, arg := range args {
				if len(arg) > 0 {
					return fmt.Errorf("%q does not take any arguments, got %q", cmd.CommandPath(), args)
				}
			}
			return nil
		},
	}
	nfs := opts.Flags
	verflag.AddFlags(nfs.FlagSet("global"))
	globalflag.AddGlobalFlags(nfs.FlagSet("global"), cmd.Name(), logs.SkipLoggingConfigurationFlags())
	fs := nfs.FlagSet("budgetguard")
	validateOnly := fs.Bool("validate-only", false,
		"Check the --config file as the scheduler would at start-up (decoding, kube-scheduler's validation, budgetguard's checks of every profile) without a cluster, print whether it is valid, and exit.")
	for _, f := range nfs.FlagSets {
		cmd.Flags().AddFlagSet(f)
	}
	cols, _, _ := term.TerminalSize(cmd.OutOrStdout())
	cliflag.SetUsageAndHelpFunc(cmd, *nfs, cols)
	if err := cmd.MarkFlagFilename("config", "yaml", "yml", "json"); err != nil {
		klog.Background().Error(err, "Failed to mark flag filename")
	}

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
			return runScheduler(c, opts)
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
		return runScheduler(c, opts)
	}
	return cmd
}

// runScheduler is kube-scheduler's run (app.NewSchedulerCommand's), with
// BudgetAwarePreemption made the PodGroup preemption plugin of the profiles
// that enable it before the scheduler starts.
func runScheduler(cmd *cobra.Command, opts *options.Options) error {
	verflag.PrintAndExitIfRequested()
	fg := opts.ComponentGlobalsRegistry.FeatureGateFor(basecompatibility.DefaultKubeComponent)
	if err := logsapi.ValidateAndApply(opts.Logs, fg); err != nil {
		return err
	}
	cliflag.PrintFlags(cmd.Flags())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-server.SetupSignalHandler()
		cancel()
	}()
	cc, sched, err := app.Setup(ctx, opts, app.WithPlugin(budgetpreemption.Name, budgetpreemption.New))
	if err != nil {
		return err
	}
	if names := budgetpreemption.EnablePodGroupPreemption(sched.Profiles); len(names) > 0 {
		klog.FromContext(ctx).Info("Pod groups preempt through "+budgetpreemption.Name, "profiles", names)
	}
	if mfg, ok := fg.(featuregate.MutableFeatureGate); ok {
		mfg.AddMetrics()
	}
	opts.ComponentGlobalsRegistry.AddMetrics()
	return app.Run(ctx, cc, sched)
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
