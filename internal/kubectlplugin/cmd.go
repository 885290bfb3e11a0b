package kubectlplugin

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
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
	output  string
	all     bool
}

// Execute runs kubectl-budgetguard with args (without the program name) and
// returns the process's exit code.
func Execute(ctx context.Context, args []string, streams genericiooptions.IOStreams) int {
	root := NewCommand(streams)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	var usage usageError
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, errFindings):
		return ExitFindings
	case errors.As(err, &usage):
		fmt.Fprintf(streams.ErrOut, "error: %v\nSee '%s --help'.\n", err, root.CommandPath())
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
		Use:   "kubectl-budgetguard",
		Short: "Explain disruption budget decisions and lint budget designs",
		Long: `kubectl budgetguard answers "why can't this pod go?" from the same decision
code as budgetguard's scheduler and descheduler plugins, and finds
PodDisruptionBudget and PodUnavailableBudget designs that break the Eviction
API or block every disruption. It only reads the cluster.

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

	why := &cobra.Command{
		Use:   "why POD",
		Short: "Explain whether the pod may be evicted or preempted now, and why",
		Example: `  kubectl budgetguard why web-7d9f8-abcde -n shop
  kubectl budgetguard why web-7d9f8-abcde -n shop -o yaml`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{fmt.Errorf("why takes exactly one pod name, got %d arguments", len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error { return o.why(cmd.Context(), args[0]) },
	}
	lint := &cobra.Command{
		Use:   "lint",
		Short: "Find budget designs that break the Eviction API or block disruptions",
		Example: `  kubectl budgetguard lint -n shop
  kubectl budgetguard lint -A -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.lint(cmd.Context()) },
	}
	lint.Flags().BoolVarP(&o.all, "all-namespaces", "A", false, "lint every namespace")
	for _, c := range []*cobra.Command{why, lint} {
		c.Flags().StringVarP(&o.output, "output", "o", "", "output format: json or yaml (default: a table)")
		root.AddCommand(c)
	}
	return root
}

func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError{fmt.Errorf("unexpected argument %q for %q", args[0], cmd.CommandPath())}
	}
	return nil
}

// quiet returns a context whose logger discards: the Cache's log lines
// (PUB support off, an invalid selector) are for components; this command
// reports the same in its answer.
func quiet(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithCancel(klog.NewContext(ctx, logr.Discard()))
}

func (o *options) checkOutput() error {
	switch o.output {
	case formatTable, formatJSON, formatYAML:
		return nil
	}
	return usageError{fmt.Errorf("--output %q: must be json or yaml, or unset for a table", o.output)}
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
	if err := o.checkOutput(); err != nil {
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

// print writes v as -o asks: JSON, YAML, or the table.
func (o *options) print(v any, table func(io.Writer, painter) error) error {
	if o.output != formatTable {
		return printData(o.streams.Out, o.output, v)
	}
	return table(o.streams.Out, colourFor(o.streams.Out))
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
		return o.print(out, func(w io.Writer, p painter) error { return printWhy(w, p, out) })
	})
}

func (o *options) lint(ctx context.Context) error {
	return o.withCluster(ctx, o.all, func(_ context.Context, c *cluster, ns string) error {
		in, err := c.lintInput()
		if err != nil {
			return err
		}
		out := buildLint(ns, c.cache.Lint(in))
		if err := o.print(out, func(w io.Writer, p painter) error { return printLint(w, p, out) }); err != nil {
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
	out := LintOutput{Namespace: namespace, Findings: []FindingInfo{}}
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
