package report

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/budgetguard/budgetguard/internal/audit"
)

// Width is the widest line WriteTable writes (names longer than their
// column allows are shortened with "...").
const Width = 100

// Column limits, chosen so that every section fits Width with two runs.
const (
	maxRunName    = 11 // "budgetguard"
	maxBudget     = 30
	maxRefusal    = 44
	maxComponent  = 20
	maxHeaderText = Width - 10
	// The violations list has five columns.
	maxViolationBudget = 24
	maxViolationPod    = 18
	maxViolationBy     = 18
)

// WriteTable writes r for people: plain ASCII, at most Width columns. One
// run gets one column of numbers; two runs (upstream, then budgetguard) are
// shown side by side. Sections: each budget's lowest healthy count against
// its desired count (BROKEN when a violation hit it), disruptions by
// component and action, refusals by reason, the violations, the run notes,
// and a one-line verdict per run.
func WriteTable(w io.Writer, r *Report) error {
	if r == nil {
		return errors.New("report: nil report")
	}
	if len(r.Runs) == 0 || len(r.Runs) > 2 {
		return fmt.Errorf("report: the table shows one run, or two side by side; the report has %d", len(r.Runs))
	}
	names := runNames(r.Runs)
	var b bytes.Buffer
	writeHeader(&b, r, names)
	writeBudgets(&b, r.Runs, names)
	writeDisruptions(&b, r.Runs, names)
	writeDisruptionsByStep(&b, r.Runs, names)
	writeRefusals(&b, r.Runs, names)
	writeRefusalSentences(&b, r.Runs, names)
	writeViolations(&b, r.Runs, names)
	writeRaces(&b, r.Runs, names)
	writeDisagreements(&b, r.Runs, names)
	writePods(&b, r.Runs, names)
	writeNotes(&b, r.Runs, names)
	writeVerdicts(&b, r.Runs, names)
	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("report: write table: %w", err)
	}
	return nil
}

// runNames names each run by its mode, or "run N" when it has none or
// shares it with the other run.
func runNames(runs []Run) []string {
	names := make([]string, len(runs))
	for i, run := range runs {
		names[i] = shorten(string(run.Mode), maxRunName)
		if run.Mode == "" || (len(runs) == 2 && runs[0].Mode == runs[1].Mode) {
			names[i] = fmt.Sprintf("run %d", i+1)
		}
	}
	return names
}

func newTab(b *bytes.Buffer) *tabwriter.Writer {
	return tabwriter.NewWriter(b, 0, 8, 2, ' ', 0)
}

// row writes one line of cells separated by tabs.
func row(tw *tabwriter.Writer, cells ...string) {
	fmt.Fprintln(tw, joinCells(cells))
}

func joinCells(cells []string) string { return strings.Join(cells, "\t") }

func section(b *bytes.Buffer, title string) {
	fmt.Fprintf(b, "\n%s\n", title)
}

func writeHeader(b *bytes.Buffer, r *Report, names []string) {
	tw := newTab(b)
	row(tw, "Scenario", shorten(r.Scenario, maxHeaderText))
	row(tw, "File", shorten(r.Path, maxHeaderText))
	var runs []string
	for i, run := range r.Runs {
		runs = append(runs, fmt.Sprintf("%s %s", names[i], run.Duration.Round(100*time.Millisecond)))
	}
	row(tw, "Runs", strings.Join(runs, ", "))
	_ = tw.Flush()
}

// budgetLabel is "pdb ns/name" or "pub ns/name".
func budgetLabel(ref audit.BudgetRef) string {
	kind := ref.Kind
	switch ref.Kind {
	case audit.KindPDB:
		kind = "pdb"
	case audit.KindPUB:
		kind = "pub"
	}
	return kind + " " + ref.Namespace + "/" + ref.Name
}

func compareRefs(a, b audit.BudgetRef) int {
	return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

func writeBudgets(b *bytes.Buffer, runs []Run, names []string) {
	section(b, "BUDGETS: lowest healthy / desired, counted by the auditor once the budget was met")
	var refs []audit.BudgetRef
	for _, run := range runs {
		for _, s := range run.Audit.Budgets {
			if !slices.Contains(refs, s.Budget) {
				refs = append(refs, s.Budget)
			}
		}
	}
	if len(refs) == 0 {
		fmt.Fprintln(b, "(no budgets)")
		return
	}
	slices.SortFunc(refs, compareRefs)
	tw := newTab(b)
	row(tw, append([]string{"BUDGET"}, names...)...)
	for _, ref := range refs {
		cells := []string{shorten(budgetLabel(ref), maxBudget)}
		for _, run := range runs {
			cells = append(cells, budgetCell(run, ref))
		}
		row(tw, cells...)
	}
	_ = tw.Flush()
}

func budgetCell(run Run, ref audit.BudgetRef) string {
	i := slices.IndexFunc(run.Audit.Budgets, func(s audit.BudgetSummary) bool { return s.Budget == ref })
	if i < 0 {
		return "-"
	}
	s := run.Audit.Budgets[i]
	cell := fmt.Sprintf("%d/%d", s.LowestHealthy, s.Desired)
	if !s.Met {
		cell = fmt.Sprintf("unmet, %d desired", s.Desired)
	}
	switch {
	case slices.ContainsFunc(run.Audit.Violations, func(v audit.Violation) bool { return v.Budget == ref }):
		cell += " BROKEN"
	case slices.ContainsFunc(run.Audit.Races, func(r audit.Race) bool { return r.Budget == ref }):
		cell += " RACED"
	case s.Short:
		// Below desired with nothing charged: pods that failed, or a
		// disruption nobody could have seen coming; never "met".
		cell += " short"
	}
	return cell
}

// componentOrder puts the sandbox's components first.
func componentOrder(c audit.Component) int {
	switch c {
	case audit.ComponentScheduler:
		return 0
	case audit.ComponentDescheduler:
		return 1
	case audit.ComponentOther:
		return 3
	}
	return 2
}

func writeDisruptions(b *bytes.Buffer, runs []Run, names []string) {
	section(b, "DISRUPTIONS: evictions and deletes the API server carried out")
	type key struct {
		component audit.Component
		action    audit.Action
	}
	t := newTally[key](len(runs))
	for i, run := range runs {
		for _, d := range run.Audit.Disruptions {
			t.add(i, key{d.Component, d.Action}, 1)
		}
	}
	if len(t.keys) == 0 {
		fmt.Fprintln(b, "(none)")
		return
	}
	tw := newTab(b)
	row(tw, append([]string{"COMPONENT", "ACTION"}, names...)...)
	t.write(tw, func(a, b key) int {
		return cmp.Or(cmp.Compare(componentOrder(a.component), componentOrder(b.component)),
			cmp.Compare(a.component, b.component), cmp.Compare(a.action, b.action))
	}, func(k key) []string { return []string{shorten(string(k.component), maxComponent), string(k.action)} })
	if len(t.keys) > 1 {
		cells := []string{"total", ""}
		for _, run := range runs {
			cells = append(cells, fmt.Sprint(len(run.Audit.Disruptions)))
		}
		row(tw, cells...)
	}
	_ = tw.Flush()
}

func writeRefusals(b *bytes.Buffer, runs []Run, names []string) {
	section(b, "REFUSALS: by the plugins (once per pod per loop or cycle) and by the API server (code, to whom)")
	t := newTally[string](len(runs))
	for i, run := range runs {
		for _, p := range run.Refusals {
			t.add(i, shorten(refusalLabel(p), maxRefusal), p.Count)
		}
		for _, ref := range run.Audit.Refusals {
			t.add(i, shorten(apiRefusalLabel(ref), maxRefusal), 1)
		}
	}
	if len(t.keys) == 0 {
		fmt.Fprintln(b, "(none)")
		return
	}
	tw := newTab(b)
	row(tw, append([]string{"REFUSED BY"}, names...)...)
	t.write(tw, cmp.Compare[string], func(l string) []string { return []string{l} })
	_ = tw.Flush()
}

func writeViolations(b *bytes.Buffer, runs []Run, names []string) {
	section(b, "VIOLATIONS: disruptions a budget forbade that left it below its desired count")
	if sum(runs, func(r Run) int { return len(r.Audit.Violations) }) == 0 {
		fmt.Fprintln(b, "(none)")
		return
	}
	tw := newTab(b)
	row(tw, "RUN", "BUDGET", "POD", "BY", "HEALTHY")
	for i, run := range runs {
		for _, v := range run.Audit.Violations {
			pod := v.Disruption.Pod
			if v.Disruption.Namespace != v.Budget.Namespace {
				pod = v.Disruption.Namespace + "/" + pod
			}
			by := fmt.Sprintf("%s %s", v.Disruption.Component, v.Disruption.Action)
			row(tw, names[i], shorten(budgetLabel(v.Budget), maxViolationBudget), shortenPod(pod, maxViolationPod), shorten(by, maxViolationBy),
				fmt.Sprintf("%d/%d", v.Healthy, v.Desired))
		}
	}
	_ = tw.Flush()
}

// writeRaces lists the races: disruptions right on what their component
// could know, made short by a change inside the informers' lag. They are
// not violations, and they are never dropped.
func writeRaces(b *bytes.Buffer, runs []Run, names []string) {
	if sum(runs, func(r Run) int { return len(r.Audit.Races) }) == 0 {
		return
	}
	section(b, "RACES: disruptions made short by a change inside the informers' lag (known healthy before it)")
	tw := newTab(b)
	row(tw, "RUN", "BUDGET", "POD", "BY", "HEALTHY", "KNOWN")
	for i, run := range runs {
		for _, r := range run.Audit.Races {
			pod := r.Disruption.Pod
			if r.Disruption.Namespace != r.Budget.Namespace {
				pod = r.Disruption.Namespace + "/" + pod
			}
			by := fmt.Sprintf("%s %s", r.Disruption.Component, r.Disruption.Action)
			row(tw, names[i], shorten(budgetLabel(r.Budget), maxViolationBudget), shortenPod(pod, maxViolationPod), shorten(by, maxViolationBy),
				fmt.Sprintf("%d/%d", r.Healthy, r.Desired), fmt.Sprintf("%d/%d", r.KnownHealthy, r.KnownDesired))
		}
	}
	_ = tw.Flush()
}

// writeDisagreements lists where the auditor and a budget's own status
// disagree after a disruption by budgetguard.
func writeDisagreements(b *bytes.Buffer, runs []Run, names []string) {
	if sum(runs, func(r Run) int { return len(r.Audit.Disagreements) }) == 0 {
		return
	}
	section(b, "DISAGREEMENTS: the budget's status short after a disruption the auditor found clean")
	tw := newTab(b)
	row(tw, "RUN", "BUDGET", "POD", "BY", "AUDITOR", "STATUS")
	for i, run := range runs {
		for _, d := range run.Audit.Disagreements {
			by := fmt.Sprintf("%s %s", d.Disruption.Component, d.Disruption.Action)
			row(tw, names[i], shorten(budgetLabel(d.Budget), maxViolationBudget), shortenPod(d.Disruption.Pod, maxViolationPod), shorten(by, maxViolationBy),
				fmt.Sprintf("%d/%d", d.Healthy, d.Desired), fmt.Sprintf("%d/%d", d.StatusHealthy, d.StatusDesired))
		}
	}
	_ = tw.Flush()
}

// sum adds up n over the runs.
func sum(runs []Run, n func(Run) int) int {
	total := 0
	for _, run := range runs {
		total += n(run)
	}
	return total
}

func writeNotes(b *bytes.Buffer, runs []Run, names []string) {
	if sum(runs, func(r Run) int { return len(r.Notes) }) == 0 {
		return
	}
	section(b, "NOTES")
	for i, run := range runs {
		for _, note := range run.Notes {
			for _, line := range wrap(names[i]+": "+note, Width, "    ") {
				fmt.Fprintln(b, line)
			}
		}
	}
}

func writeVerdicts(b *bytes.Buffer, runs []Run, names []string) {
	section(b, "VERDICT")
	for i, run := range runs {
		fmt.Fprintf(b, "%s: %s\n", names[i], verdict(run))
	}
}

// verdict says how many distinct budgets a violation hit.
func verdict(run Run) string {
	var broken []audit.BudgetRef
	for _, v := range run.Audit.Violations {
		if !slices.Contains(broken, v.Budget) {
			broken = append(broken, v.Budget)
		}
	}
	var v string
	switch len(broken) {
	case 0:
		v = "no budget broken"
	case 1:
		v = "1 budget broken"
	default:
		v = fmt.Sprintf("%d budgets broken", len(broken))
	}
	if n := len(run.Audit.Races); n > 0 {
		v += fmt.Sprintf("; %d %s", n, map[bool]string{true: "race", false: "races"}[n == 1])
	}
	if n := len(run.Audit.Disagreements); n > 0 {
		v += fmt.Sprintf("; %d %s with a budget's status", n, map[bool]string{true: "disagreement", false: "disagreements"}[n == 1])
	}
	return v
}

// shorten cuts s to at most n bytes, ending in "..." when cut, after
// sanitize.
func shorten(s string, n int) string {
	s = sanitize(s)
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// shortenPod cuts a pod name to at most n bytes like shorten, but keeps its
// unique end (what follows the last two dashes, as in a ReplicaSet's
// web-7d9f8c6b5-x2k9p, or the last one) whole and cuts its beginning
// instead, so that two pods of one workload stay apart.
func shortenPod(s string, n int) string {
	s = sanitize(s)
	if len(s) <= n {
		return s
	}
	for _, dashes := range []int{2, 1} {
		cut := len(s)
		for range dashes {
			if cut = strings.LastIndex(s[:cut], "-"); cut <= 0 {
				break
			}
		}
		if cut <= 0 {
			continue
		}
		if keep := n - 3 - (len(s) - cut); keep >= 1 {
			return s[:keep] + "..." + s[cut:]
		}
	}
	return shorten(s, n)
}

// sanitize replaces what would break the table's alignment (tabs, newlines,
// anything outside printable ASCII) with '?'.
func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' || r > '~' {
			return '?'
		}
		return r
	}, s)
}

// wrap breaks text into lines of at most width bytes at spaces; lines after
// the first start with indent. A word longer than a line is cut in pieces.
func wrap(text string, width int, indent string) []string {
	room := width - len(indent)
	var words []string
	for _, w := range strings.Fields(sanitize(text)) {
		for len(w) > room {
			words = append(words, w[:room])
			w = w[room:]
		}
		words = append(words, w)
	}
	var lines []string
	line := ""
	for _, w := range words {
		switch {
		case line == "":
			line = w
		case len(line)+1+len(w) <= width:
			line += " " + w
		default:
			lines = append(lines, line)
			line = indent + w
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}
