package kubectlplugin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
)

// The formats of -o that are not cli-runtime's printers: the table for
// people (no -o) and the same with more columns. Every other format (json,
// yaml, name, jsonpath=..., go-template=..., ...) is
// genericclioptions.PrintFlags'.
const (
	formatTable = ""
	formatWide  = "wide"
	formatName  = "name"
)

// OutputGroupVersion is the apiVersion of what -o json, -o yaml and the
// templates print; its kinds are WhyKind and LintKind. The plugin's output
// is not an API object: nothing serves this group.
var OutputGroupVersion = schema.GroupVersion{Group: "kubectl.budgetguard.io", Version: "v1alpha1"}

// The kinds of the plugin's output.
const (
	WhyKind  = "PodBudgetExplanation"
	LintKind = "BudgetLintReport"
)

var (
	whyTypeMeta  = metav1.TypeMeta{APIVersion: OutputGroupVersion.String(), Kind: WhyKind}
	lintTypeMeta = metav1.TypeMeta{APIVersion: OutputGroupVersion.String(), Kind: LintKind}
)

// DeepCopyObject makes WhyOutput a runtime.Object, for cli-runtime's
// printers.
func (o *WhyOutput) DeepCopyObject() runtime.Object { return deepCopy(o) }

// DeepCopyObject makes LintOutput a runtime.Object, for cli-runtime's
// printers.
func (o *LintOutput) DeepCopyObject() runtime.Object { return deepCopy(o) }

// deepCopy copies v through JSON: the output types are plain data, every
// field of which has a JSON name.
func deepCopy[T any, P interface {
	*T
	runtime.Object
}](v P) runtime.Object {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("copy %T: %v", v, err))
	}
	c := P(new(T))
	if err := json.Unmarshal(b, c); err != nil {
		panic(fmt.Sprintf("copy %T: %v", v, err))
	}
	return c
}

// addPrintFlags adds -o and cli-runtime's template flags to c, for o. Not
// --show-managed-fields, which PrintFlags.AddFlags would add: the output is
// not an API object and has no managedFields to show.
func addPrintFlags(o *options, c *cobra.Command) {
	pf := genericclioptions.NewPrintFlags("")
	pf.NamePrintFlags.AddFlags(c)
	pf.TemplatePrinterFlags.AddFlags(c)
	formats := append([]string{formatWide}, pf.AllowedFormats()...)
	c.Flags().StringVarP(pf.OutputFormat, "output", "o", *pf.OutputFormat, fmt.Sprintf("Output format. One of: (%s). Without it, a table.", strings.Join(formats, ", ")))
	pf.OutputFlagSpecified = func() bool { return c.Flag("output").Changed }
	_ = c.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return formats, cobra.ShellCompDirectiveNoFileComp
	})
	prev := c.PreRunE
	c.PreRunE = func(cmd *cobra.Command, args []string) error {
		o.printFlags = pf
		if prev != nil {
			return prev(cmd, args)
		}
		return nil
	}
}

// printer is cli-runtime's printer for -o, nil for the table (no -o, or
// wide); an unknown format or a template that does not parse is a usage
// error.
func (o *options) printer() (printers.ResourcePrinter, error) {
	switch *o.printFlags.OutputFormat {
	case formatTable, formatWide:
		return nil, nil
	}
	p, err := o.printFlags.ToPrinter()
	if genericclioptions.IsNoCompatiblePrinterError(err) {
		return nil, usageError{fmt.Errorf("--output %q: unknown format; use one of %s, or no -o for a table",
			*o.printFlags.OutputFormat, strings.Join(append([]string{formatWide}, o.printFlags.AllowedFormats()...), ", "))}
	}
	if err != nil {
		return nil, usageError{fmt.Errorf("--output %q: %w", *o.printFlags.OutputFormat, err)}
	}
	return p, nil
}

// objectKinds are the API group and version of the kinds the output names.
// PodUnavailableBudgets are read at policy.kruise.io/v1beta1 where it is
// served (OpenKruise's storage version), v1alpha1 otherwise; -o name
// prints the group alone.
var objectKinds = map[string]schema.GroupVersion{
	"Pod":                  {Version: "v1"},
	"PodDisruptionBudget":  {Group: "policy", Version: "v1"},
	"PodUnavailableBudget": {Group: "policy.kruise.io", Version: "v1beta1"},
}

// printNames prints each object once, in order, as kubectl's -o name does
// (pod/web-0, poddisruptionbudget.policy/web), followed by the namespace,
// which kubectl's leaves out: "poddisruptionbudget.policy/web -n shop".
// A line is then the arguments of a kubectl command for the object (xargs
// -L1 kubectl get), and lint -A keeps apart what each namespace found.
func printNames(p printers.ResourcePrinter, w io.Writer, objs []ObjectInfo) error {
	seen := map[ObjectInfo]bool{}
	for _, obj := range objs {
		if seen[obj] {
			continue
		}
		seen[obj] = true
		gv, ok := objectKinds[obj.Kind]
		if !ok {
			return fmt.Errorf("-o name: no API group known for kind %q of %s/%s", obj.Kind, obj.Namespace, obj.Name)
		}
		m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: obj.Namespace, Name: obj.Name}}
		m.SetGroupVersionKind(gv.WithKind(obj.Kind))
		var name bytes.Buffer
		if err := p.PrintObj(m, &name); err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "%s -n %s\n", strings.TrimSpace(name.String()), obj.Namespace); err != nil {
			return err
		}
	}
	return nil
}
