package report

import (
	"bytes"
	"cmp"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"time"

	"github.com/budgetguard/budgetguard/internal/audit"
)

// The page's parts, embedded in the binary and written inline: the page
// loads nothing (no network, no other file).
var (
	//go:embed timeline.html
	timelineHTML string
	//go:embed timeline.css
	timelineCSS string
	//go:embed timeline.js
	timelineJS string

	timelinePage = template.Must(template.New("timeline").Parse(timelineHTML))
)

// WriteHTML writes r as one self-contained HTML page (inline CSS, inline
// script drawing inline SVG; nothing loaded from anywhere): for each budget,
// its healthy count over each run against its desired count, the runs side
// by side on one time axis (seconds since the scenario's first step), each
// disruption marked by its component and action, each refusal (by
// budgetguard's plugins or by the API server) marked, the violations
// highlighted; then the table WriteTable writes. The page's script draws
// the charts from a JSON block of the page; docs/report.md describes the
// page and the attributes its elements carry for programs.
func WriteHTML(w io.Writer, r *Report) error {
	if r == nil {
		return errors.New("report: nil report")
	}
	var table bytes.Buffer
	if err := WriteTable(&table, r); err != nil {
		return err
	}
	data, err := json.Marshal(pageOf(r))
	if err != nil {
		return fmt.Errorf("report: the timeline's data: %w", err)
	}
	names := runNames(r.Runs)
	type verdictLine struct {
		Mode, Name, Text string
		Broken           bool
	}
	var verdicts []verdictLine
	for i, run := range r.Runs {
		verdicts = append(verdicts, verdictLine{Mode: string(run.Mode), Name: names[i], Text: verdict(run), Broken: len(run.Audit.Violations) > 0})
	}
	var b bytes.Buffer
	// encoding/json escapes <, > and & in strings, so the data cannot end
	// its script element.
	err = timelinePage.Execute(&b, map[string]any{
		"Scenario": r.Scenario,
		"Path":     r.Path,
		"Verdicts": verdicts,
		"Table":    table.String(),
		// Our own embedded files, and JSON whose <, > and & are escaped:
		// written as they are.
		"CSS":  template.CSS(timelineCSS),
		"JS":   template.JS(timelineJS),
		"Data": template.JS(data),
	})
	if err != nil {
		return fmt.Errorf("report: render the timeline: %w", err)
	}
	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("report: write the timeline: %w", err)
	}
	return nil
}

// The page's data: every time in seconds since its run's origin (the
// scenario's first step), to the millisecond.
type page struct {
	Scenario string       `json:"scenario"`
	Path     string       `json:"path"`
	Span     float64      `json:"span"`
	Budgets  []pageBudget `json:"budgets"`
	Runs     []pageRun    `json:"runs"`
}

type pageBudget struct {
	Key   string `json:"key"`
	Label string `json:"label"`
}

type pageRun struct {
	Mode        string           `json:"mode"`
	Name        string           `json:"name"`
	Verdict     string           `json:"verdict"`
	End         float64          `json:"end"`
	Steps       []pageStep       `json:"steps"`
	Budgets     []pageSeries     `json:"budgets"`
	Disruptions []pageDisruption `json:"disruptions"`
	Refusals    []pageRefusal    `json:"refusals"`
	Violations  []pageCharge     `json:"violations"`
	Races       []pageCharge     `json:"races"`
}

type pageStep struct {
	Number int     `json:"number"`
	Label  string  `json:"label"`
	T      float64 `json:"t"`
	End    float64 `json:"end"`
}

type pageSeries struct {
	Key     string      `json:"key"`
	Desired int32       `json:"desired"`
	Met     bool        `json:"met"`
	Lowest  int32       `json:"lowest"`
	Cell    string      `json:"cell"`
	Points  []pagePoint `json:"points"`
}

type pagePoint struct {
	T       float64 `json:"t"`
	Healthy int32   `json:"healthy"`
	Desired int32   `json:"desired"`
	Met     bool    `json:"met"`
	Gone    bool    `json:"gone,omitempty"`
}

type pageDisruption struct {
	T          float64  `json:"t"`
	Component  string   `json:"component"`
	Action     string   `json:"action"`
	Pod        string   `json:"pod"`
	Budgets    []string `json:"budgets"`
	WasHealthy bool     `json:"wasHealthy"`
}

// pageRefusal is a refusal by budgetguard's plugins (By "budgetguard",
// Component the plugin's) or by the API server (By "apiserver", Component
// the one whose request it refused).
type pageRefusal struct {
	T         float64 `json:"t"`
	By        string  `json:"by"`
	Component string  `json:"component"`
	Label     string  `json:"label"`
	Pod       string  `json:"pod"`
	Message   string  `json:"message"`
}

// pageCharge is a violation or a race.
type pageCharge struct {
	T            float64 `json:"t"`
	Budget       string  `json:"budget"`
	Pod          string  `json:"pod"`
	Component    string  `json:"component"`
	Action       string  `json:"action"`
	Healthy      int32   `json:"healthy"`
	Desired      int32   `json:"desired"`
	KnownHealthy int32   `json:"knownHealthy,omitempty"`
	KnownDesired int32   `json:"knownDesired,omitempty"`
}

// BudgetKey is how the HTML page names a budget in its data-budget
// attributes: "Kind/namespace/name".
func BudgetKey(ref audit.BudgetRef) string {
	return ref.Kind + "/" + ref.Namespace + "/" + ref.Name
}

// Origin is the time the HTML page counts a run's seconds from: the
// beginning of its first step, or, for a run without steps, its earliest
// event.
func Origin(run Run) time.Time {
	if len(run.Steps) > 0 {
		return run.Steps[0].Began
	}
	var first time.Time
	see := func(t time.Time) {
		if !t.IsZero() && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	for _, s := range run.Timeline.Budgets {
		if len(s.Points) > 0 {
			see(s.Points[0].At)
		}
	}
	for _, d := range run.Audit.Disruptions {
		see(d.Time)
	}
	for _, r := range run.Audit.Refusals {
		see(r.Time)
	}
	for _, r := range run.Timeline.Refusals {
		see(r.Time)
	}
	return first
}

// Seconds is t in seconds since origin, to the millisecond, as the page
// writes it (never below 0).
func Seconds(t, origin time.Time) float64 {
	return math.Round(max(0, t.Sub(origin).Seconds())*1000) / 1000
}

func pageOf(r *Report) page {
	p := page{Scenario: r.Scenario, Path: r.Path, Budgets: []pageBudget{}, Runs: []pageRun{}}
	var refs []audit.BudgetRef
	add := func(ref audit.BudgetRef) {
		if !slices.Contains(refs, ref) {
			refs = append(refs, ref)
		}
	}
	names := runNames(r.Runs)
	for i, run := range r.Runs {
		for _, s := range run.Audit.Budgets {
			add(s.Budget)
		}
		for _, s := range run.Timeline.Budgets {
			add(s.Budget)
		}
		pr := pageRunOf(run)
		pr.Name = names[i]
		p.Span = max(p.Span, pr.End)
		p.Runs = append(p.Runs, pr)
	}
	slices.SortFunc(refs, compareRefs)
	for _, ref := range refs {
		p.Budgets = append(p.Budgets, pageBudget{Key: BudgetKey(ref), Label: budgetLabel(ref)})
	}
	return p
}

func pageRunOf(run Run) pageRun {
	origin := Origin(run)
	sec := func(t time.Time) float64 { return Seconds(t, origin) }
	pr := pageRun{
		Mode: string(run.Mode), Verdict: verdict(run),
		Steps: []pageStep{}, Budgets: []pageSeries{}, Disruptions: []pageDisruption{},
		Refusals: []pageRefusal{}, Violations: []pageCharge{}, Races: []pageCharge{},
	}
	end := 0.0
	see := func(t float64) float64 { end = max(end, t); return t }
	for _, s := range run.Steps {
		pr.Steps = append(pr.Steps, pageStep{Number: s.Number, Label: s.Description, T: see(sec(s.Began)), End: see(sec(s.Ended))})
	}
	for _, s := range run.Timeline.Budgets {
		ps := pageSeries{Key: BudgetKey(s.Budget), Points: []pagePoint{}}
		if i := slices.IndexFunc(run.Audit.Budgets, func(b audit.BudgetSummary) bool { return b.Budget == s.Budget }); i >= 0 {
			b := run.Audit.Budgets[i]
			ps.Desired, ps.Met, ps.Lowest = b.Desired, b.Met, b.LowestHealthy
		}
		ps.Cell = budgetCell(run, s.Budget)
		for _, pt := range s.Points {
			pp := pagePoint{T: see(sec(pt.At)), Healthy: pt.Healthy, Desired: pt.Desired, Met: pt.Met, Gone: pt.Gone}
			// Points before the origin: only the last one, at 0.
			if n := len(ps.Points); n > 0 && ps.Points[n-1].T == pp.T {
				ps.Points = ps.Points[:n-1]
			}
			ps.Points = append(ps.Points, pp)
		}
		pr.Budgets = append(pr.Budgets, ps)
	}
	for _, d := range run.Audit.Disruptions {
		pd := pageDisruption{T: see(sec(d.Time)), Component: string(d.Component), Action: string(d.Action), Pod: d.Namespace + "/" + d.Pod, Budgets: []string{}, WasHealthy: d.WasHealthy}
		for _, ref := range d.Budgets {
			pd.Budgets = append(pd.Budgets, BudgetKey(ref))
		}
		pr.Disruptions = append(pr.Disruptions, pd)
	}
	for _, rf := range run.Timeline.Refusals {
		pr.Refusals = append(pr.Refusals, pageRefusal{T: see(sec(rf.Time)), By: "budgetguard", Component: string(rf.Component),
			Label: fmt.Sprintf("%s %s", rf.Component, rf.Reason), Pod: rf.Namespace + "/" + rf.Name, Message: rf.Message})
	}
	for _, rf := range run.Audit.Refusals {
		pr.Refusals = append(pr.Refusals, pageRefusal{T: see(sec(rf.Time)), By: "apiserver", Component: string(rf.Component),
			Label: apiRefusalLabel(rf), Pod: rf.Namespace + "/" + rf.Pod, Message: rf.Message})
	}
	slices.SortStableFunc(pr.Refusals, func(a, b pageRefusal) int { return cmp.Compare(a.T, b.T) })
	for _, v := range run.Audit.Violations {
		pr.Violations = append(pr.Violations, pageCharge{T: see(sec(v.Disruption.Time)), Budget: BudgetKey(v.Budget), Pod: v.Disruption.Namespace + "/" + v.Disruption.Pod,
			Component: string(v.Disruption.Component), Action: string(v.Disruption.Action), Healthy: v.Healthy, Desired: v.Desired})
	}
	for _, v := range run.Audit.Races {
		pr.Races = append(pr.Races, pageCharge{T: see(sec(v.Disruption.Time)), Budget: BudgetKey(v.Budget), Pod: v.Disruption.Namespace + "/" + v.Disruption.Pod,
			Component: string(v.Disruption.Component), Action: string(v.Disruption.Action), Healthy: v.Healthy, Desired: v.Desired,
			KnownHealthy: v.KnownHealthy, KnownDesired: v.KnownDesired})
	}
	pr.End = end
	return pr
}
