// Command sandbox runs a scenario on an in-process Kubernetes control plane
// (embedded etcd, kube-apiserver, controllers, a simulated kubelet) with
// kube-scheduler and the descheduler, and reports which pods were disrupted
// and which disruption budgets broke, as an independent auditor saw it.
// With --compare it runs the scenario twice, with upstream DefaultPreemption
// and DefaultEvictor and then with budgetguard, and shows both side by side.
// `sandbox validate` checks a scenario and the files it names without
// running it.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/budgetguard/budgetguard/internal/report"
	"github.com/budgetguard/budgetguard/internal/runner"
	"github.com/budgetguard/budgetguard/internal/scenario"
	"github.com/budgetguard/budgetguard/internal/version"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // the scenario or a run failed
	exitUsage = 2 // bad arguments or flags
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// usageError marks an error in the command line.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// execute runs the command line args and returns the exit code.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := newRootCommand(stdout, stderr)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "sandbox: %v\n", err)
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintln(stderr, "Run 'sandbox --help' or 'sandbox <command> --help' for usage.")
		return exitUsage
	}
	return exitError
}

func newRootCommand(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "sandbox",
		Short: "Run disruption scenarios on an in-process control plane, with upstream plugins or budgetguard",
		Long: `sandbox runs a scenario on a small but real Kubernetes control plane inside
this process: embedded etcd, kube-apiserver, the disruption, ReplicaSet and
Deployment controllers, a simulated kubelet, kube-scheduler, and, when the
scenario asks, the descheduler. No cluster, container runtime or network is
needed.

It reports which pods the scheduler and the descheduler disrupted, what the
API server refused, what budgetguard's plugins refused and why, and every
PodDisruptionBudget or PodUnavailableBudget that fell below its desired healthy
count, as an independent auditor (kube-apiserver's audit log plus its own
watches) saw it.`,
		Example: `  # The showcase: upstream preemption breaks a PDB, budgetguard does not.
  sandbox run --compare examples/scenarios/preemption-under-pdb.yaml

  # Only budgetguard, as JSON for a program.
  sandbox run --output json examples/scenarios/pub-protected.yaml

  # Check a scenario and the configuration files it names; run nothing.
  sandbox validate examples/scenarios/pub-protected.yaml`,
		SilenceUsage:      true,
		SilenceErrors:     true,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	// Cobra adds pflag's global flag set to the root's persistent flags,
	// and an imported Kubernetes package (component-base's verflag)
	// registers a --version there that prints Kubernetes' version. The
	// root's own --version, defined first, takes its place on the root;
	// the global one is merged now and hidden from the subcommands.
	var showVersion bool
	root.Flags().BoolVar(&showVersion, "version", false, "print the version of sandbox and of the Kubernetes and descheduler it embeds, and exit")
	_ = root.InheritedFlags()
	if root.PersistentFlags().Lookup("version") != nil {
		_ = root.PersistentFlags().MarkHidden("version")
	}
	// Without a subcommand, show the help; anything else is a mistake.
	root.Args = cobra.ArbitraryArgs
	root.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return usageError{fmt.Errorf("unknown command %q", args[0])}
		}
		if showVersion {
			return printVersion(stdout)
		}
		return cmd.Help()
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newRunCommand(stdout, stderr), newValidateCommand(stdout, stderr), newVersionCommand(stdout), newUpCommand(stdout, stderr), newWaitCommand(stdout), newRunChartCommand(stdout, stderr))
	return root
}

// printVersion writes the line --version and `sandbox version` print.
func printVersion(w io.Writer) error {
	_, err := fmt.Fprintln(w, version.Get().String())
	return err
}

func newVersionCommand(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of sandbox and of the Kubernetes and descheduler it embeds",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 0 {
				return usageError{fmt.Errorf("version takes no arguments; got %d", len(args))}
			}
			return nil
		},
		RunE: func(*cobra.Command, []string) error { return printVersion(stdout) },
	}
}

func newValidateCommand(stdout, stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "validate SCENARIO",
		Short: "Check a scenario file and the configuration files it names, without running it",
		Long: `validate checks the scenario file SCENARIO as run does before it starts
anything, and starts nothing: the scenario itself (header, steps and
manifests), the KubeSchedulerConfiguration as written and as each mode
rewrites it (upstream and budgetguard), and the DeschedulerPolicy, whether or
not a step deschedules. Without scheduler.config or descheduler.policy in the
header, the shipped files are checked.

Exit status: 0 when the scenario is valid (it prints "SCENARIO is valid");
1 when it is not, with every problem on stderr; 2 for bad arguments or
flags.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{fmt.Errorf("validate takes exactly one argument, the scenario file; got %d", len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := quietLogging(cmd.Context(), stderr)
			if _, err := loadScenario(ctx, args[0]); err != nil {
				return err
			}
			_, err := fmt.Fprintf(stdout, "%s is valid\n", args[0])
			return err
		},
	}
}

// runFlags are the flags of `sandbox run`.
type runFlags struct {
	compare bool
	output  string
	verbose bool
	// html is --html: where to write the HTML timeline ("": nowhere).
	html string
}

func newRunCommand(stdout, stderr io.Writer) *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run SCENARIO",
		Short: "Run a scenario file and print the report",
		Long: `run executes the scenario file SCENARIO and prints a report.

A scenario is a YAML file: a header document (apiVersion
sandbox.budgetguard.io/v1alpha1, kind Scenario) with ordered steps, followed
by standard manifests (Namespaces, Nodes, PriorityClasses, Deployments,
ReplicaSets, StatefulSets, Pods, PodDisruptionBudgets, PodUnavailableBudgets).
The steps are apply (create the manifests of a phase), wait (podsReady,
podScheduled or budgetsObserved, with a timeout and optionally
continueOnTimeout), setReadiness, deschedule (one descheduler loop), settle,
delete, patch (a JSON merge patch) and staysPending. An optional expect
block says what each mode's run must show. Examples are in
examples/scenarios; docs/scenarios.md describes the format.

Before the first run starts, the scenario and the files it names are checked
for both modes, with or without --compare, as 'sandbox validate' does.

The scheduler uses the scenario's scheduler.config, or budgetguard's shipped
KubeSchedulerConfiguration (manifests/scheduler/scheduler-config.yaml,
embedded in this binary); a default-scheduler profile is added if the file has
none. The descheduler uses the scenario's descheduler.policy, or the shipped
manifests/descheduler/policy.yaml.

Without --compare, the scenario runs once, with budgetguard's plugins. With
--compare it runs twice, each time on a fresh control plane: first with the
same files rewritten to upstream DefaultPreemption and DefaultEvictor
(BudgetAwarePreemption and BudgetAwareEvictor removed), then with budgetguard;
the report shows both side by side.

Progress (the control plane coming up, then each step) goes to stderr; the
report goes to stdout.

With --html PATH, run also writes one self-contained HTML page to PATH
(creating its directory; no network, nothing else to load): each budget's
healthy count over the run against its desired count, the runs side by
side on one time axis, each disruption marked by its component and action,
each refusal marked, the violations highlighted, and the report's tables
below; then it prints the page's path on stderr. The page is written
whenever the report is, also when a run differs from the expect block.

Exit status: 0 when every run completed as the scenario's expect block says
(without one, whether or not budgets broke: the report says so); 1 when the
scenario is invalid, a run failed (a step that timed out without
continueOnTimeout, an object the API server rejected), or a run differs from
the expect block (the report is still printed, and each difference goes to
stderr); 2 for bad arguments or flags.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{fmt.Errorf("run takes exactly one argument, the scenario file; got %d", len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runScenario(cmd.Context(), args[0], f, stdout, stderr)
		},
	}
	cmd.Flags().BoolVar(&f.compare, "compare", false, "run the scenario with upstream DefaultPreemption and DefaultEvictor first, then with budgetguard, and show both")
	cmd.Flags().StringVarP(&f.output, "output", "o", "table", "report format: table (for people) or json (for programs)")
	cmd.Flags().BoolVarP(&f.verbose, "verbose", "v", false, "show the logs of etcd, kube-apiserver, the controllers, the scheduler and the descheduler on stderr (without it, only errors are logged)")
	cmd.Flags().StringVar(&f.html, "html", "", "also write the runs' timeline as a self-contained HTML page to this file (its directory is created), and print its path on stderr")
	cmd.PreRunE = func(cmd *cobra.Command, _ []string) error {
		if cmd.Flags().Changed("html") && f.html == "" {
			return usageError{errors.New(`invalid value "" for --html: want the path of the HTML page to write`)}
		}
		return nil
	}
	return cmd
}

// runScenario loads the scenario, runs it in the modes f asks for and writes
// the report.
func runScenario(ctx context.Context, path string, f runFlags, stdout, stderr io.Writer) error {
	var write func(io.Writer, *report.Report) error
	switch f.output {
	case "table":
		write = report.WriteTable
	case "json":
		write = report.WriteJSON
	default:
		return usageError{fmt.Errorf("invalid value %q for --output: want table or json", f.output)}
	}
	var page *pageFile
	if f.html != "" {
		var err error
		if page, err = openPage(f.html); err != nil {
			return err
		}
		defer page.discard()
	}
	if !f.verbose {
		// kube-scheduler, the descheduler and client-go log through klog;
		// the sandbox silences it only while a control plane runs.
		ctx = quietLogging(ctx, stderr)
	}

	sc, err := loadScenario(ctx, path)
	if err != nil {
		return err
	}
	modes := []report.Mode{report.ModeBudgetguard}
	if f.compare {
		modes = []report.Mode{report.ModeUpstream, report.ModeBudgetguard}
	}
	fmt.Fprintf(stderr, "scenario %s (%s): %s\n", sc.Name, sc.Path, modeList(modes))
	var runs []report.Run
	for _, mode := range modes {
		r, err := runner.Run(ctx, sc, mode, runner.Options{Progress: stderr, Verbose: f.verbose})
		if err != nil {
			return fmt.Errorf("%s run: %w", mode, err)
		}
		runs = append(runs, r)
	}
	rep := report.New(sc.Name, sc.Path, runs...)
	if err := write(stdout, rep); err != nil {
		return err
	}
	if page != nil {
		if err := page.write(rep); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "sandbox: wrote the timeline page %s (%s)\n", page.path, page.url())
	}
	var unmet []string
	for _, r := range runs {
		unmet = append(unmet, runner.Unmet(sc, r)...)
	}
	if len(unmet) > 0 {
		return fmt.Errorf("%s: the run differs from the scenario's expect block:\n  %s", sc.Path, strings.Join(unmet, "\n  "))
	}
	return nil
}

func modeList(modes []report.Mode) string {
	if len(modes) == 1 {
		return string(modes[0]) + " only"
	}
	return fmt.Sprintf("%s first, then %s", modes[0], modes[1])
}

// loadScenario parses the scenario at path and validates the files it names,
// for both modes, before anything starts.
func loadScenario(ctx context.Context, path string) (*scenario.Scenario, error) {
	sc, err := scenario.Load(path)
	var problems scenario.ErrorList
	if errors.As(err, &problems) {
		return nil, fmt.Errorf("invalid scenario, %d problem(s):\n%w", len(problems), err)
	}
	if err != nil {
		return nil, err
	}
	if err := runner.Validate(ctx, sc); err != nil {
		return nil, fmt.Errorf("invalid scenario %s:\n%w", path, err)
	}
	return sc, nil
}
