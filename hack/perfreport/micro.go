package main

import (
	"fmt"
	"strings"
)

// A micro table compares the two variants of a unit benchmark (go test
// -bench -benchmem), a row per batch and benchmark; the k-th result of a
// benchmark under one variant is paired with the k-th under the other.
func renderMicro(files []*rawFile, c comparison, short [2]string) (string, error) {
	var all []*series
	type microRow struct {
		letter string
		row    *schedRow
	}
	var rows []microRow
	order := []string{}
	byWorkload := map[string][]microRow{}
	for _, f := range files {
		for _, b := range f.Batches {
			s, err := buildSeries(b, c, byOccurrence)
			if err != nil {
				return "", err
			}
			letter := letters(len(all))
			all = append(all, s)
			for _, w := range s.Workloads {
				if _, ok := byWorkload[w]; !ok {
					order = append(order, w)
				}
				byWorkload[w] = append(byWorkload[w], microRow{letter, &schedRow{Letter: letter, S: s, Workload: w}})
			}
		}
	}
	for _, w := range order {
		rows = append(rows, byWorkload[w]...)
	}
	var b strings.Builder
	for i, s := range all {
		b.WriteString(legend(letters(i), s, "repetition") + "\n")
	}
	d, o := short[0], short[1]
	fmt.Fprintf(&b, "\n%s: %s=%s; %s: %s=%s. Medians; the ratio is %s/%s of the k-th result of each, its median and spread.\n\n", d, c.Key, c.Base, o, c.Key, c.Other, o, d)
	goal := c.Key == pluginComparison.Key
	head := []string{"benchmark", "batch", "n", fmt.Sprintf("time/op %s → %s (ratio, spread)", d, o), fmt.Sprintf("allocs/op %s → %s", d, o), fmt.Sprintf("B/op %s → %s", d, o)}
	if goal {
		head = append(head, "goal")
	}
	writeRow(&b, head)
	writeRow(&b, dashes(len(head)))
	for _, mr := range rows {
		row := mr.row
		tp, td, tb := row.values("ns/op")
		_, ad, ab := row.values("allocs/op")
		_, bd, bb := row.values("B/op")
		n := fmt.Sprintf("%d + %d", len(td), len(tb))
		timeCell := durationCell(tp, td, tb)
		cells := []string{"`" + row.Workload + "`", mr.letter, n, timeCell, countCell(ad, ab), countCell(bd, bb)}
		if goal {
			var gains []gainBounds
			for _, p := range tp {
				gains = append(gains, exactGain(p.D, p.B, false))
			}
			j := judgeMetric("time", gains)
			v, why := judgeRow([]metricJudgement{j}, nil, nil)
			switch v {
			case met:
				cells = append(cells, "**met**")
			case missed:
				cells = append(cells, "**missed**: "+why)
			default:
				cells = append(cells, "undecided: "+why)
			}
		}
		writeRow(&b, cells)
	}
	return b.String(), nil
}

// durationCell is metricCell for ns/op, printed in a unit that fits.
func durationCell(pairs []pairValue, d, b []float64) string {
	side := func(xs []float64) string {
		if len(xs) == 0 {
			return "none"
		}
		return fmtDuration(median(xs) * 1e-9)
	}
	s := side(d) + " → " + side(b)
	if len(pairs) == 0 {
		return s
	}
	var rs []float64
	for _, p := range pairs {
		rs = append(rs, p.B/p.D)
	}
	return fmt.Sprintf("%s (%s, %s)", s, fmtRatio(median(rs)), fmtSpread(rs))
}
