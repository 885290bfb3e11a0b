package kubectlplugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/klog/v2"

	"github.com/budgetguard/budgetguard/internal/version"
	"github.com/budgetguard/budgetguard/plugins/budget"
)

// Exit codes.
const (
	// ExitOK: the command ran; lint found no error-level finding.
	ExitOK = 0
	// ExitFindings: lint found at least one error-level finding.
	ExitFindings = 1
	// ExitUsage: wrong arguments or flags.
	ExitUsage = 2
	// ExitFailed: the cluster could not be read, or the pod does not exist.
	ExitFailed = 3
)

// usageError is a mistake on the command line.
type usageError struct{ error }

// errFindings makes lint exit with ExitFindings after printing.
var errFindings = errors.New("lint found error-level findings")

type options struct {
	flags   *genericclioptions.ConfigFlags
	streams genericiooptions.IOStreams
	// printFlags are -o and the template flags of the command that runs.
	printFlags *genericclioptions.PrintFlags
	all        bool
}

// Execute runs kubectl-budgetguard with args (without the program name) and
// returns the process's exit code. klog's verbosity (-v) is set for the
// run and put back afterwards.
func Execute(ctx context.Context, args []string, streams genericiooptions.IOStreams) int {
	root := NewCommand(streams)
	root.SetArgs(args)
	defer restoreVerbosity(root)()
	cmd, err := root.ExecuteContextC(ctx)
	var usage usageError
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, errFindings):
		return ExitFindings
	case errors.As(err, &usage):
		fmt.Fprintf(streams.ErrOut, "error: %v\nSee '%s --help'.\n", err, cmd.CommandPath())
		return ExitUsage
	default:
		fmt.Fprintf(streams.ErrOut, "error: %v\n", err)
		return ExitFailed
	}
}

// NewCommand returns the root command with "why" and "lint".
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &options{flags: genericclioptions.NewConfigFlags(false), streams: streams}
	root := &cobra.Command{
		// kubectl runs the binary kubectl-budgetguard as "kubectl
		// budgetguard"; help and errors say the latter.
		Use:         "kubectl-budgetguard",
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl budgetguard"},
		Short:       "Explain disruption budget decisions and lint budget designs",
		Long: `kubectl budgetguard answers "why can't this pod go?" from the same decision
code as budgetguard's scheduler and descheduler plugins, and finds
PodDisruptionBudget and PodUnavailableBudget designs that break the Eviction
API or block every disruption. It only reads the cluster.

It needs get on nodes, list on events, and list and watch on pods,
poddisruptionbudgets, replicasets, deployments, statefulsets and (where
served) podunavailablebudgets.policy.kruise.io. The first list or watch the
API server refuses ends the command with exit code 3, naming the verb and
the resource; without get on nodes, "why" says what depends on the node is
unknown.

Exit codes: 0 done (lint: no error-level finding), 1 lint found an error,
2 wrong usage, 3 the cluster could not be read.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageError{errors.New("a command is required: why or lint")}
		},
	}
	root.Version = version.Get().String()
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	o.flags.AddFlags(root.PersistentFlags())
	addLogFlags(root.PersistentFlags())

	why := &cobra.Command{
		Use:   "why (POD | pod/POD)",
		Short: "Explain whether the pod may be evicted or preempted now, and why",
		Example: `  kubectl budgetguard why web-7d9f8-abcde -n shop
  kubectl budgetguard why pod/web-7d9f8-abcde -n shop -o yaml
  kubectl budgetguard why web-7d9f8-abcde -n shop -o jsonpath='{.decisions[?(@.operation=="eviction")].result}'
  kubectl budgetguard why web-7d9f8-abcde -n shop -o name   # the budgets that cover it`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{fmt.Errorf("why takes exactly one pod, as NAME or pod/NAME; got %d arguments", len(args))}
			}
			_, err := podName(args[0])
			return err
		},
		ValidArgsFunction: o.completePods,
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := podName(args[0])
			if err != nil {
				return err
			}
			return o.why(cmd.Context(), name)
		},
	}
	lint := &cobra.Command{
		Use:   "lint",
		Short: "Find budget designs that break the Eviction API or block disruptions",
		Example: `  kubectl budgetguard lint -n shop
  kubectl budgetguard lint -A -o json
  kubectl budgetguard lint -A -o name   # the budgets and pods of every finding`,
		Args:              noArgs,
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE:              func(cmd *cobra.Command, _ []string) error { return o.lint(cmd.Context()) },
	}
	lint.Flags().BoolVarP(&o.all, "all-namespaces", "A", false, "lint every namespace")
	for _, c := range []*cobra.Command{why, lint} {
		addPrintFlags(o, c)
		root.AddCommand(c)
	}
	// Before cobra adds its default completion command, which would say
	// nothing of "kubectl budgetguard".
	root.AddCommand(newCompletionCommand(streams.Out, streams.ErrOut))
	return root
}

// podName is the pod's name from NAME or pod/NAME (kubectl's TYPE/NAME,
// with pod, pods or po as the type); any other type is a usage error.
func podName(arg string) (string, error) {
	kind, name, typed := strings.Cut(arg, "/")
	if !typed {
		kind, name = "pod", arg
	}
	switch {
	case kind != "pod" && kind != "pods" && kind != "po":
		return "", usageError{fmt.Errorf("why explains pods: %q names a %s; give NAME or pod/NAME", arg, kind)}
	case name == "":
		return "", usageError{fmt.Errorf("why: %q names no pod; give NAME or pod/NAME", arg)}
	case strings.Contains(name, "/"):
		return "", usageError{fmt.Errorf("why: %q is not a pod name; give NAME or pod/NAME", arg)}
	}
	return name, nil
}

func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError{fmt.Errorf("unexpected argument %q for %q", args[0], cmd.CommandPath())}
	}
	return nil
}

// quiet returns a context whose logger discards unless -v asks for logs:
// the Cache's log lines (PUB support off, an invalid selector) are for
// components; this command reports the same in its answer.
func quiet(ctx context.Context) (context.Context, context.CancelFunc) {
	if klog.V(1).Enabled() {
		return context.WithCancel(ctx)
	}
	return context.WithCancel(klog.NewContext(ctx, logr.Discard()))
}

func (o *options) namespace() (string, error) {
	ns, _, err := o.flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", fmt.Errorf("namespace from the kubeconfig: %w", err)
	}
	return ns, nil
}

func (o *options) open(ctx context.Context, namespace string) (*cluster, error) {
	cfg, err := o.flags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return openCluster(ctx, cfg, namespace)
}

// withCluster checks -o, opens the cluster for the command's namespace (all
// namespaces when all) and calls fn with it.
func (o *options) withCluster(ctx context.Context, all bool, fn func(ctx context.Context, c *cluster, ns string) error) error {
	if _, err := o.printer(); err != nil {
		return err
	}
	ns := ""
	if !all {
		var err error
		if ns, err = o.namespace(); err != nil {
			return err
		}
	}
	ctx, cancel := quiet(ctx)
	defer cancel()
	c, err := o.open(ctx, ns)
	if err != nil {
		return err
	}
	return fn(ctx, c, ns)
}

// print writes the answer as -o asks: the table (wide or not), the names of
// the objects it involves, or obj through cli-runtime's printers.
func (o *options) print(obj runtime.Object, names []ObjectInfo, table func(io.Writer, painter, bool) error) error {
	p, err := o.printer()
	if err != nil {
		return err
	}
	switch {
	case p == nil:
		return table(o.streams.Out, colourFor(o.streams.Out), *o.printFlags.OutputFormat == formatWide)
	case *o.printFlags.OutputFormat == formatName:
		return printNames(p, o.streams.Out, names)
	}
	return p.PrintObj(obj, o.streams.Out)
}

func (o *options) why(ctx context.Context, name string) error {
	return o.withCluster(ctx, false, func(ctx context.Context, c *cluster, ns string) error {
		pod, err := c.pod(ns, name)
		if err != nil {
			return err
		}
		events, err := c.events(ctx, pod)
		if err != nil {
			return err
		}
		node, nodeUnknown := c.node(ctx, pod)
		out := buildWhy(pod, node, nodeUnknown, events, c.cache.Explain(pod))
		return o.print(&out, whyNames(out), func(w io.Writer, p painter, wide bool) error { return printWhy(w, p, out, wide) })
	})
}

func (o *options) lint(ctx context.Context) error {
	return o.withCluster(ctx, o.all, func(_ context.Context, c *cluster, ns string) error {
		in, err := c.lintInput()
		if err != nil {
			return err
		}
		out := buildLint(ns, c.cache.Lint(in))
		var names []ObjectInfo
		for _, f := range out.Findings {
			names = append(names, f.Objects...)
		}
		if err := o.print(&out, names, func(w io.Writer, p painter, _ bool) error { return printLint(w, p, out) }); err != nil {
			return err
		}
		if out.Errors > 0 {
			return errFindings
		}
		return nil
	})
}

// buildLint turns the Cache's findings into the output schema.
func buildLint(namespace string, findings []budget.Finding) LintOutput {
	out := LintOutput{TypeMeta: lintTypeMeta, Namespace: namespace, Findings: []FindingInfo{}}
	for _, f := range findings {
		fi := FindingInfo{Severity: string(f.Severity), Code: string(f.Code), MoreObjects: f.More, Message: f.Message, Fix: f.Fix}
		for _, obj := range f.Objects {
			fi.Objects = append(fi.Objects, ObjectInfo{Kind: obj.Kind, Namespace: obj.Namespace, Name: obj.Name})
		}
		if f.Severity == budget.SeverityError {
			out.Errors++
		} else {
			out.Warnings++
		}
		out.Findings = append(out.Findings, fi)
	}
	return out
}
