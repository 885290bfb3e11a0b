package kubectlplugin

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"golang.org/x/term"
)

// painter colours text for a terminal, and leaves it alone elsewhere.
type painter struct{ on bool }

// colourFor colours only a terminal, and never when NO_COLOR is set
// (https://no-color.org).
func colourFor(w io.Writer) painter {
	f, ok := w.(*os.File)
	return painter{on: ok && term.IsTerminal(int(f.Fd())) && os.Getenv("NO_COLOR") == ""}
}

func (p painter) paint(code, s string) string {
	if !p.on {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

func (p painter) red(s string) string    { return p.paint("31", s) }
func (p painter) green(s string) string  { return p.paint("32", s) }
func (p painter) yellow(s string) string { return p.paint("33", s) }
func (p painter) bold(s string) string   { return p.paint("1", s) }

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// short is the kubectl abbreviation of a kind.
func short(kind string) string {
	switch kind {
	case "PodDisruptionBudget":
		return "pdb"
	case "PodUnavailableBudget":
		return "pub"
	}
	return strings.ToLower(kind)
}

// printWhy writes the answer for people; wide adds each budget's own
// sentence for a denial (MESSAGE).
func printWhy(w io.Writer, p painter, o WhyOutput, wide bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	health := "Ready"
	if !o.Pod.Ready {
		health = "not Ready"
	}
	if len(o.Pod.Waiting) > 0 {
		health += " (" + strings.Join(o.Pod.Waiting, ", ") + ")"
	}
	if o.Pod.Terminating {
		health += ", terminating"
	}
	fmt.Fprintf(tw, "%s\t%s/%s\n", p.bold("POD"), o.Pod.Namespace, o.Pod.Name)
	fmt.Fprintf(tw, "STATUS\t%s, %s\n", o.Pod.Phase, health)
	fmt.Fprintf(tw, "NODE\t%s\n", orNone(o.Pod.Node))
	fmt.Fprintf(tw, "CONTROLLER\t%s\n", orNone(o.Pod.Controller))
	fmt.Fprintf(tw, "SAFE-TO-EVICT\t%s\n", orNone(o.Autoscaler.SafeToEvict))
	switch a := o.Autoscaler; {
	case o.Pod.Node == "":
	case a.NodeUnknown != "" || a.NodeBeingRemoved == nil || a.NodeDeletionCandidate == nil:
		unknown := p.yellow("unknown: " + orNone(a.NodeUnknown))
		fmt.Fprintf(tw, "NODE TAINTS\t%s\n", unknown)
		fmt.Fprintf(tw, "NODE REMOVAL\t%s\n", unknown)
	default:
		fmt.Fprintf(tw, "NODE TAINTS\t%s\n", orNone(strings.Join(a.NodeTaints, ", ")))
		fmt.Fprintf(tw, "NODE REMOVAL\tbeing removed by cluster-autoscaler: %s; deletion candidate: %s\n",
			yesNo(*a.NodeBeingRemoved), yesNo(*a.NodeDeletionCandidate))
	}
	if o.Pod.IgnoresBudgets {
		fmt.Fprintf(tw, "NOTE\tthe pod is %s: it may go without spending any budget\n", ignoredBecause(o.Pod))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w)
	if len(o.Budgets) == 0 {
		fmt.Fprintln(w, "No PodDisruptionBudget or PodUnavailableBudget covers the pod.")
	} else {
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		header := "BUDGET\tMATCH\tHEALTHY\tDESIRED\tALLOWED\tEXPECTED\tIN-FLIGHT\tSTALE\tUNHEALTHY-POLICY\tEVICTION\tDELETE"
		if wide {
			header += "\tMESSAGE"
		}
		fmt.Fprintln(tw, header)
		for _, b := range o.Budgets {
			fmt.Fprintf(tw, "%s %s/%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s", short(b.Kind), b.Namespace, b.Name, b.Match,
				b.Healthy, b.Desired, b.Allowed, b.Expected, b.InFlight, yesNo(b.Stale), orDash(b.UnhealthyPodEvictionPolicy),
				verdictText(p, b.Eviction), verdictText(p, b.Delete))
			if wide {
				fmt.Fprintf(tw, "\t%s", budgetMessage(b))
			}
			fmt.Fprintln(tw)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}

	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, d := range o.Decisions {
		op := strings.ToUpper(d.Operation)
		switch {
		case d.Allowed:
			spends := "spends no budget"
			if len(d.Spends) > 0 {
				spends = "spends " + strings.Join(d.Spends, ", ")
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", op, p.green("ALLOWED"), spends)
		case d.Result == ResultNotCandidate:
			fmt.Fprintf(tw, "%s\t%s\t%s: %s\n", op, p.yellow("NOT A CANDIDATE"), d.Reason, d.Message)
		case d.Result == ResultUnknown:
			fmt.Fprintf(tw, "%s\t%s\t%s: %s\n", op, p.yellow("UNKNOWN"), d.Reason, d.Message)
		default:
			fmt.Fprintf(tw, "%s\t%s\t%s: %s\n", op, p.red("DENIED"), d.Reason, d.Message)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(o.Fixes) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "WHAT WOULD CHANGE THE ANSWER")
		for _, f := range o.Fixes {
			fmt.Fprintf(w, "  - %s\n", f)
		}
	}
	if o.Pending != nil {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "PENDING")
		if c := o.Pending.PodScheduled; c != nil {
			fmt.Fprintf(tw, "  PodScheduled\t%s %s: %s\n", c.Status, c.Reason, c.Message)
		} else {
			fmt.Fprintf(tw, "  PodScheduled\t(no condition yet)\n")
		}
		if r := o.Pending.LastRefusal; r != nil {
			fmt.Fprintf(tw, "  last refusal\t%s (x%d): %s\n", r.Reason, r.Count, r.Message)
		} else {
			fmt.Fprintf(tw, "  last refusal\t(none recorded)\n")
		}
		fmt.Fprintf(tw, "  budgets named\t%s\n", orNone(strings.Join(o.Pending.NamedBudgets, ", ")))
		s := o.Pending.ScaleUp
		verdict := p.yellow("no")
		if s.Considered {
			verdict = p.green("yes")
		}
		fmt.Fprintf(tw, "  autoscaler scale-up\t%s (%s): %s\n", verdict, s.Reason, s.Message)
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// budgetMessage is the budget's own sentence for its denials: the
// eviction's, and the delete's when it says something else; "-" when it
// denies neither.
func budgetMessage(b BudgetInfo) string {
	switch e, d := b.Eviction.Message, b.Delete.Message; {
	case e != "" && d != "" && d != e:
		return "eviction: " + e + "; delete: " + d
	case e != "":
		return e
	case d != "":
		return "delete: " + d
	}
	return "-"
}

func ignoredBecause(pod PodInfo) string {
	if pod.Terminating {
		return "terminating"
	}
	return pod.Phase
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func verdictText(p painter, v VerdictInfo) string {
	switch v.Result {
	case "denied":
		return p.red(v.Reason)
	case "spends":
		return p.green("spends")
	}
	return v.Result
}

// printLint writes the findings for people.
func printLint(w io.Writer, p painter, o LintOutput) error {
	where := "in all namespaces"
	if o.Namespace != "" {
		where = "in namespace " + o.Namespace
	}
	if len(o.Findings) == 0 {
		_, err := fmt.Fprintf(w, "No findings %s.\n", where)
		return err
	}
	for i, f := range o.Findings {
		if i > 0 {
			fmt.Fprintln(w)
		}
		sev := p.yellow("WARNING")
		if f.Severity == "error" {
			sev = p.red("ERROR  ")
		}
		fmt.Fprintf(w, "%s  %s  %s\n", sev, p.bold(f.Code), objectsText(f))
		fmt.Fprintf(w, "         %s\n", f.Message)
		fmt.Fprintf(w, "         fix: %s\n", f.Fix)
	}
	_, err := fmt.Fprintf(w, "\n%d %s, %d %s %s.\n", o.Errors, pluralS(o.Errors, "error"), o.Warnings, pluralS(o.Warnings, "warning"), where)
	return err
}

func objectsText(f FindingInfo) string {
	parts := make([]string, 0, len(f.Objects)+1)
	for _, o := range f.Objects {
		parts = append(parts, short(o.Kind)+" "+o.Namespace+"/"+o.Name)
	}
	if f.MoreObjects > 0 {
		parts = append(parts, fmt.Sprintf("and %d more %s", f.MoreObjects, pluralS(f.MoreObjects, "pod")))
	}
	return strings.Join(parts, ", ")
}

func pluralS(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
