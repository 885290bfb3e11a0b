package main

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// The scheduler_perf units the tables read.
const (
	unitDuration    = "SchedulingDuration/Duration"
	unitMeasured    = "measured-pods"
	unitPollRate    = "pods/s" // hack/perf.sh's: measured-pods over SchedulingDuration
	unitBoundRate   = "bound-pods/s"
	unitBoundPods   = "bound-pods"
	unitP50         = "scheduler_framework_extension_point_duration_ms/Perc50"
	unitP99         = "scheduler_framework_extension_point_duration_ms/Perc99"
	unitAverage     = "scheduler_framework_extension_point_duration_ms/Average"
	unitHeap        = "heap-MiB"
	unitVictims     = "victims"
	unitOver        = "overbudget-victims"
	unitOverPDB     = "overbudget-pdb-victims"
	unitOverPUB     = "overbudget-pub-victims"
	unitCallsOK     = "postfilter-calls-Success"
	unitCallsUnsch  = "postfilter-calls-Unschedulable"
	unitCallsShort  = "postfilter-calls-under-0.1ms"
	unitMeanUnschMs = "postfilter-mean-ms-Unschedulable"
)

// A schedTable is one generated table of scheduler_perf results: the
// batches of its files, a row per batch and workload.
type schedTable struct {
	Series []*series
	Rows   []*schedRow
	// durations[workload][variant index] are the measured phases of every
	// repetition of the table, for the stall rule.
	durations map[string]*[2][]durationAt
}

type durationAt struct {
	row *schedRow
	rep int
	d   float64
}

type schedRow struct {
	Letter   string
	S        *series
	Workload string
	table    *schedTable
}

func newSchedTable(files []*rawFile) (*schedTable, error) {
	t := &schedTable{durations: map[string]*[2][]durationAt{}}
	var order []string
	seen := map[string]bool{}
	byWorkload := map[string][]*schedRow{}
	for _, f := range files {
		for _, b := range f.Batches {
			s, err := buildSeries(b, pluginComparison, byProcess)
			if err != nil {
				return nil, err
			}
			letter := letters(len(t.Series))
			t.Series = append(t.Series, s)
			for _, w := range s.Workloads {
				if !seen[w] {
					seen[w] = true
					order = append(order, w)
				}
				row := &schedRow{Letter: letter, S: s, Workload: w, table: t}
				byWorkload[w] = append(byWorkload[w], row)
			}
		}
	}
	for _, w := range order {
		t.Rows = append(t.Rows, byWorkload[w]...)
	}
	for _, row := range t.Rows {
		for _, rep := range row.S.Reps {
			cell := rep.Samples[row.Workload]
			if cell == nil {
				continue
			}
			for i, sm := range cell {
				if sm == nil || sm.Result == nil {
					continue
				}
				d, ok := sm.Result.Values[unitDuration]
				if !ok {
					return nil, fmt.Errorf("%s:%d: %s has no %s", row.S.Batch.File.Name, sm.Line, sm.Result.Name, unitDuration)
				}
				g := t.durations[row.Workload]
				if g == nil {
					g = &[2][]durationAt{}
					t.durations[row.Workload] = g
				}
				g[i] = append(g[i], durationAt{row: row, rep: rep.Index, d: d})
			}
		}
	}
	return t, nil
}

// stall applies the stall rule to one repetition of a row under a variant.
func (t *schedTable) stall(row *schedRow, rep, variant int) (d float64, stall, assessable bool) {
	var others []float64
	found := false
	for _, da := range t.durations[row.Workload][variant] {
		if da.row == row && da.rep == rep {
			d, found = da.d, true
			continue
		}
		others = append(others, da.d)
	}
	if !found {
		return 0, false, true
	}
	stall, assessable = isStall(d, others)
	return d, stall, assessable
}

// values are a unit's figures in the row: per repetition with both
// variants, the pair; and every figure of each variant.
func (row *schedRow) values(unit string) (pairs []pairValue, d, b []float64) {
	for _, rep := range row.S.Reps {
		cell := rep.Samples[row.Workload]
		if cell == nil {
			continue
		}
		var v [2]float64
		var has [2]bool
		for i, sm := range cell {
			if sm == nil || sm.Result == nil {
				continue
			}
			x, ok := sm.Result.Values[unit]
			if !ok {
				continue
			}
			v[i], has[i] = x, true
			if i == 0 {
				d = append(d, x)
			} else {
				b = append(b, x)
			}
		}
		if has[0] && has[1] {
			pairs = append(pairs, pairValue{D: v[0], B: v[1]})
		}
	}
	return pairs, d, b
}

// pairValue is one repetition's figure under each plugin.
type pairValue struct{ D, B float64 }

func censored(unit string, v float64) bool {
	return (unit == unitP50 || unit == unitP99) && v >= histogramTop-1e-9
}

// throughput is the row's measured rate per repetition, and each paired
// repetition's gain: bound-pods/s where every result of the row has it for
// all its measured pods (exact), else measured-pods over SchedulingDuration
// (checked against the pods/s hack/perf.sh printed), whose gain the poll
// leaves between bounds.
func (row *schedRow) throughput() (gains []gainBounds, d, b []float64, bind bool, err error) {
	bind = true
	any := false
	for _, rep := range row.S.Reps {
		for _, sm := range row.cell(rep) {
			if sm == nil || sm.Result == nil {
				continue
			}
			any = true
			v := sm.Result.Values
			if _, ok := v[unitBoundRate]; !ok || v[unitBoundPods] != v[unitMeasured] {
				bind = false
			}
		}
	}
	bind = bind && any
	for _, rep := range row.S.Reps {
		var x, dur [2]float64
		var has [2]bool
		for i, sm := range row.cell(rep) {
			if sm == nil || sm.Result == nil {
				continue
			}
			r := sm.Result
			pods, okP := r.Values[unitMeasured]
			dur[i] = r.Values[unitDuration]
			if !okP || dur[i] <= 0 {
				return nil, nil, nil, false, fmt.Errorf("%s:%d: %s has no %s and %s for a throughput", row.S.Batch.File.Name, r.Line, r.Name, unitMeasured, unitDuration)
			}
			if printed, ok := r.Values[unitPollRate]; ok && math.Abs(printed-pods/dur[i]) > 5e-4*pods/dur[i]+1e-9 {
				return nil, nil, nil, false, fmt.Errorf("%s:%d: %s: pods/s %g is not %s/%s = %.4g", row.S.Batch.File.Name, r.Line, r.Name, printed, unitMeasured, unitDuration, pods/dur[i])
			}
			x[i] = pods / dur[i]
			if bind {
				x[i] = r.Values[unitBoundRate]
			}
			has[i] = true
			if i == 0 {
				d = append(d, x[i])
			} else {
				b = append(b, x[i])
			}
		}
		if !has[0] || !has[1] {
			continue
		}
		c := row.cell(rep)
		if c[0].Result.Values[unitMeasured] != c[1].Result.Values[unitMeasured] {
			return nil, nil, nil, false, fmt.Errorf("%s:%d: %s measured %g pods under one plugin and %g under the other", row.S.Batch.File.Name, c[1].Line, row.Workload, c[0].Result.Values[unitMeasured], c[1].Result.Values[unitMeasured])
		}
		if bind {
			gains = append(gains, exactGain(x[0], x[1], true))
		} else {
			gains = append(gains, pollGain(dur[0], dur[1]))
		}
	}
	return gains, d, b, bind, nil
}

func (row *schedRow) cell(rep *repetition) [2]*sample {
	if c := rep.Samples[row.Workload]; c != nil {
		return *c
	}
	return [2]*sample{}
}

// pairedCount is the number of repetitions with a result under both.
func (row *schedRow) pairedCount() (paired, total int) {
	for _, rep := range row.S.Reps {
		c := row.cell(rep)
		if c[0] != nil && c[0].Result != nil && c[1] != nil && c[1].Result != nil {
			paired++
		}
	}
	return paired, len(row.S.Reps)
}

// overBudget lists every repetition in which a variant took victims beyond
// their budgets, with the PDB and PUB parts; "0 in all n" when none did.
func (row *schedRow) overBudget(variant int) (text string, reps []int, measured bool) {
	var parts []string
	n := 0
	for _, rep := range row.S.Reps {
		sm := row.cell(rep)[variant]
		if sm == nil || sm.Result == nil {
			continue
		}
		v, ok := sm.Result.Values[unitOver]
		if !ok {
			continue
		}
		measured = true
		n++
		if v == 0 {
			continue
		}
		reps = append(reps, rep.Index)
		var kinds []string
		if x := sm.Result.Values[unitOverPDB]; x > 0 {
			kinds = append(kinds, fmtCount(x)+" PDB")
		}
		if x := sm.Result.Values[unitOverPUB]; x > 0 {
			kinds = append(kinds, fmtCount(x)+" PUB")
		}
		p := fmt.Sprintf("**%s in rep %d**", fmtCount(v), rep.Index)
		if len(kinds) > 0 {
			p += " (" + strings.Join(kinds, ", ") + ")"
		}
		parts = append(parts, p)
	}
	if !measured {
		return "", nil, false
	}
	if len(parts) == 0 {
		if n == 1 {
			return "0", nil, true
		}
		return fmt.Sprintf("0 in all %d", n), nil, true
	}
	return strings.Join(parts, ", ") + fmt.Sprintf(" of %d", n), reps, true
}

// incidents lists, for a variant, its stalls, failures, benchmarks not run
// and runs stopped before their result. assessable is false when some
// repetition had nothing to compare its duration with.
func (row *schedRow) incidents(variant int) (list []string, assessable bool) {
	assessable = true
	for _, rep := range row.S.Reps {
		sm := row.cell(rep)[variant]
		switch {
		case sm == nil:
			list = append(list, fmt.Sprintf("rep %d: not run", rep.Index))
		case sm.Failure != nil:
			msg := "failed"
			if sm.Failure.Message != "" {
				msg += ": " + sm.Failure.Message
			}
			list = append(list, fmt.Sprintf("**rep %d %s**", rep.Index, msg))
		case sm.Incomplete != nil:
			list = append(list, fmt.Sprintf("rep %d: stopped before its result", rep.Index))
		default:
			d, stall, ok := row.table.stall(row, rep.Index, variant)
			if !ok {
				assessable = false
			}
			if stall {
				list = append(list, fmt.Sprintf("**rep %d stalled: %s s**", rep.Index, fmtNum(d)))
			}
		}
	}
	return list, assessable
}

func (row *schedRow) incidentCell() string {
	var parts []string
	assessable := true
	for i, who := range []string{"D", "B"} {
		list, ok := row.incidents(i)
		assessable = assessable && ok
		if len(list) > 0 {
			parts = append(parts, who+": "+strings.Join(list, "; "))
		}
	}
	s := strings.Join(parts, "; ")
	if s == "" {
		s = "none"
	}
	if !assessable {
		s += " (stalls not assessable: nothing to compare with)"
	}
	return s
}

// otherIncidents are BudgetAware's incidents that miss the goal (over
// budget, stalled, failed), and its gaps, which leave it undecided (not
// run, stopped before its result).
func (row *schedRow) otherIncidents() (incidents, gaps []string) {
	if _, reps, _ := row.overBudget(1); len(reps) > 0 {
		incidents = append(incidents, "B over budget in rep "+fmtReps(reps))
	}
	list, _ := row.incidents(1)
	for _, inc := range list {
		if strings.HasPrefix(inc, "**") {
			incidents = append(incidents, "B "+strings.Trim(inc, "*"))
		} else {
			gaps = append(gaps, "B "+inc)
		}
	}
	return incidents, gaps
}

func (row *schedRow) goal() (string, error) {
	tp, _, _, _, err := row.throughput()
	if err != nil {
		return "", err
	}
	latency := func(name, unit string) metricJudgement {
		pairs, d, b := row.values(unit)
		if len(d) == 0 && len(b) == 0 {
			return metricJudgement{Name: name, Reason: name + " not reported"}
		}
		var gs []gainBounds
		for _, p := range pairs {
			gs = append(gs, latencyGain(p.D, p.B))
		}
		return judgeMetric(name, gs)
	}
	ms := []metricJudgement{
		judgeMetric("throughput", tp),
		latency("p50", unitP50),
		latency("p99", unitP99),
	}
	incidents, gaps := row.otherIncidents()
	v, why := judgeRow(ms, incidents, gaps)
	if v == met {
		return "**met**", nil
	}
	if v == missed {
		return "**missed**: " + why, nil
	}
	return "undecided: " + why, nil
}

func renderSched(files []*rawFile) (string, error) {
	t, err := newSchedTable(files)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	multi := len(t.Series) > 1
	for i, s := range t.Series {
		b.WriteString(legend(letters(i), s, "repetition") + "\n")
	}
	sources := map[bool][]string{}
	for _, row := range t.Rows {
		_, _, _, bind, err := row.throughput()
		if err != nil {
			return "", err
		}
		sources[bind] = append(sources[bind], row.Letter)
	}
	b.WriteString("\n" + throughputNote(sources) + "\n\n")
	head := []string{"workload", "n", "throughput pods/s D → B (ratio, spread)", "PostFilter p50 ms D → B", "PostFilter p99 ms D → B", "heap MiB D → B", "victims D → B", "over budget D; B", "stalls, failures", "goal"}
	if multi {
		head = append([]string{head[0], "batch"}, head[1:]...)
	}
	writeRow(&b, head)
	writeRow(&b, dashes(len(head)))
	for _, row := range t.Rows {
		tp, td, tb, bind, err := row.throughput()
		if err != nil {
			return "", err
		}
		tpCell := throughputCell(tp, td, tb, bind)
		p50, d50, b50 := row.values(unitP50)
		p99, d99, b99 := row.values(unitP99)
		hp, hd, hb := row.values(unitHeap)
		_, vd, vb := row.values(unitVictims)
		over := "—"
		dOver, _, dm := row.overBudget(0)
		bOver, _, bm := row.overBudget(1)
		if dm || bm {
			over = orNone(dOver) + "; " + orNone(bOver)
		}
		paired, total := row.pairedCount()
		n := fmt.Sprint(paired)
		if paired != total {
			n = fmt.Sprintf("%d of %d", paired, total)
		}
		goal, err := row.goal()
		if err != nil {
			return "", err
		}
		cells := []string{displayWorkload(row.Workload), n, tpCell,
			latencyCell(p50, d50, b50, unitP50, 1), latencyCell(p99, d99, b99, unitP99, 1),
			heapCell(hp, hd, hb), countCell(vd, vb), over, row.incidentCell(), goal}
		if multi {
			cells = append([]string{cells[0], row.Letter}, cells[1:]...)
		}
		writeRow(&b, cells)
	}
	return b.String(), nil
}

func throughputNote(sources map[bool][]string) string {
	poll := "`pods/s`, measured pods over `SchedulingDuration`, which ends on scheduler_perf's 1-second poll"
	bind := "`bound-pods/s`, from the bind clock (first measured pod created to last bound)"
	switch {
	case len(sources[true]) == 0:
		return "Throughput: " + poll + " (no raw file of this table has the bind clock)."
	case len(sources[false]) == 0:
		return "Throughput: " + bind + "."
	}
	return fmt.Sprintf("Throughput: %s in rows of %s; %s in rows of %s.",
		bind, strings.Join(uniq(sources[true]), ", "), poll, strings.Join(uniq(sources[false]), ", "))
}

func uniq(xs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	sort.Strings(out)
	return out
}

func orNone(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// displayWorkload shortens scheduler_perf's names for the table.
func displayWorkload(w string) string {
	w = strings.TrimPrefix(w, "PerfScheduling/")
	w = strings.Replace(w, "PreemptionPodGroupBudgets/", "PodGroupBudgets ", 1)
	w = strings.Replace(w, "PreemptionPodGroupDisruptionMode/", "PodGroupDisruptionMode ", 1)
	return w
}

func writeRow(b *strings.Builder, cells []string) {
	b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
}

func dashes(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "---"
	}
	return out
}

func renderCalls(files []*rawFile) (string, error) {
	t, err := newSchedTable(files)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	multi := len(t.Series) > 1
	for i, s := range t.Series {
		b.WriteString(legend(letters(i), s, "repetition") + "\n")
	}
	b.WriteString("\nPostFilter calls of the measured phase, by status (Success: a preemption started); medians over the repetitions, and the median per-repetition ratio B/D with its spread.\n\n")
	head := []string{"workload", "n", "successful calls D → B", "Unschedulable calls D → B", "calls under 0.1 ms D → B", "PostFilter p50 µs D → B", "PostFilter mean ms D → B", "mean Unschedulable call µs D → B", "stalls, failures"}
	if multi {
		head = append([]string{head[0], "batch"}, head[1:]...)
	}
	writeRow(&b, head)
	writeRow(&b, dashes(len(head)))
	for _, row := range t.Rows {
		_, okd, okb := row.values(unitCallsOK)
		_, ud, ub := row.values(unitCallsUnsch)
		_, sd, sb := row.values(unitCallsShort)
		p50, d50, b50 := row.values(unitP50)
		avg, da, ba := row.values(unitAverage)
		mu, dmu, bmu := row.values(unitMeanUnschMs)
		paired, total := row.pairedCount()
		n := fmt.Sprint(paired)
		if paired != total {
			n = fmt.Sprintf("%d of %d", paired, total)
		}
		cells := []string{displayWorkload(row.Workload), n, countCell(okd, okb), countCell(ud, ub), countCell(sd, sb),
			latencyCell(p50, d50, b50, unitP50, 1000), metricCell(avg, da, ba, unitAverage, 1, true),
			metricCell(mu, dmu, bmu, unitMeanUnschMs, 1000, true), row.incidentCell()}
		if multi {
			cells = append([]string{cells[0], row.Letter}, cells[1:]...)
		}
		writeRow(&b, cells)
	}
	return b.String(), nil
}
