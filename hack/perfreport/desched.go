package main

import (
	"fmt"
	"strings"
)

// The units of BenchmarkDeschedulingLoop.
const (
	unitLoop     = "loop-s"
	unitRun      = "run-s"
	unitEvicted  = "evictions"
	unitRefused  = "refused-429"
	unitClusterS = "cluster-build-s"
)

// A desched table has a row per batch (a raw file): its pairs of loops,
// one with each evictor, are its repetitions.
func renderDesched(files []*rawFile) (string, error) {
	var all []*series
	for _, f := range files {
		for _, b := range f.Batches {
			s, err := buildSeries(b, evictorComparison, byPair)
			if err != nil {
				return "", err
			}
			if len(s.Workloads) != 1 {
				return "", fmt.Errorf("%s: want one descheduling benchmark, found %v", f.Name, s.Workloads)
			}
			all = append(all, s)
		}
	}
	var b strings.Builder
	for i, s := range all {
		b.WriteString(legend(letters(i), s, "pair") + "\n")
	}
	b.WriteString("\nD: DefaultEvictor alone; B: DefaultEvictor and BudgetAwareEvictor. Medians over the batch's pairs; the ratio is B/D of the same pair.\n\n")
	head := []string{"batch", "pairs", "loop-s D → B (ratio, spread)", "run-s D → B", "evictions (201) D → B", "refused (429) D → B", "cluster build s", "stopped, failed, different work", "goal"}
	writeRow(&b, head)
	writeRow(&b, dashes(len(head)))
	for i, s := range all {
		row := &schedRow{Letter: letters(i), S: s, Workload: s.Workloads[0]}
		lp, ld, lb := row.values(unitLoop)
		rp, rd, rb := row.values(unitRun)
		_, ed, eb := row.values(unitEvicted)
		_, fd, fb := row.values(unitRefused)
		_, cd, cb := row.values(unitClusterS)
		paired, total := row.pairedCount()
		n := fmt.Sprint(paired)
		if paired != total {
			n = fmt.Sprintf("%d of %d", paired, total)
		}
		notes, bIncidents, bGaps := deschedIncidents(row)
		var gains []gainBounds
		for _, p := range lp {
			gains = append(gains, exactGain(p.D, p.B, false))
		}
		judge := judgeMetric("loop-s", gains)
		v, why := judgeRow([]metricJudgement{judge}, bIncidents, bGaps)
		goal := "undecided: " + why
		switch v {
		case met:
			goal = "**met**"
		case missed:
			goal = "**missed**: " + why
		}
		// Both loops of a process share its one cluster build.
		build := "—"
		if all := append(cd, cb...); len(all) > 0 {
			build = fmtNum(median(all))
		}
		cells := []string{row.Letter, n, metricCell(lp, ld, lb, unitLoop, 1, true), metricCell(rp, rd, rb, unitRun, 1, true),
			countCell(ed, eb), countCell(fd, fb), build, orNone(strings.Join(notes, "; ")), goal}
		writeRow(&b, cells)
	}
	return b.String(), nil
}

// deschedIncidents lists what keeps a pair from being a comparison: an
// evictor not run, stopped or failed, or the two evicting different pods
// counts. BudgetAware's failures and different work miss the goal
// (incidents); its loops not run or stopped leave it undecided (gaps).
func deschedIncidents(row *schedRow) (notes, incidents, gaps []string) {
	for _, rep := range row.S.Reps {
		c := row.cell(rep)
		for i, who := range []string{"D", "B"} {
			sm := c[i]
			var inc string
			failed := false
			switch {
			case sm == nil:
				inc = fmt.Sprintf("%s not run in pair %d", who, rep.Index)
			case sm.Failure != nil:
				inc, failed = fmt.Sprintf("%s failed in pair %d", who, rep.Index), true
			case sm.Incomplete != nil:
				inc = fmt.Sprintf("%s stopped before its result in pair %d", who, rep.Index)
			}
			if inc == "" {
				continue
			}
			notes = append(notes, inc)
			switch {
			case i == 1 && failed:
				incidents = append(incidents, inc)
			case i == 1:
				gaps = append(gaps, inc)
			}
		}
		if c[0] != nil && c[0].Result != nil && c[1] != nil && c[1].Result != nil {
			ed, eb := c[0].Result.Values[unitEvicted], c[1].Result.Values[unitEvicted]
			if ed != eb {
				inc := fmt.Sprintf("**pair %d: B evicted %s, D %s: not the same work**", rep.Index, fmtCount(eb), fmtCount(ed))
				notes = append(notes, inc)
				incidents = append(incidents, strings.Trim(inc, "*"))
			}
		}
	}
	return notes, incidents, gaps
}
