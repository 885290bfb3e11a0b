package main

import (
	"fmt"
	"math"
	"strings"
)

// The cells of a scheduler_perf table: how each figure is printed.

func sideCell(xs []float64, unit string, scale float64) string {
	if len(xs) == 0 {
		return "none"
	}
	m := median(xs)
	if censored(unit, m) {
		return "≥" + fmtNum(m*scale)
	}
	return fmtNum(m * scale)
}

// metricCell prints "D → B (ratio, spread)" for an exact figure: the
// medians of each plugin, the median of the per-repetition ratios B/D and
// their spread.
func metricCell(pairs []pairValue, d, b []float64, unit string, scale float64, ratio bool) string {
	if len(d) == 0 && len(b) == 0 {
		return "—"
	}
	s := sideCell(d, unit, scale) + " → " + sideCell(b, unit, scale)
	if !ratio || len(pairs) == 0 {
		return s
	}
	var rs []float64
	for _, p := range pairs {
		rs = append(rs, p.B/p.D)
	}
	return fmt.Sprintf("%s (%s, %s)", s, fmtRatio(median(rs)), fmtSpread(rs))
}

// latencyCell is metricCell for a PostFilter percentile, whose ratio is
// only bounded where a value is in the histogram's last bucket.
func latencyCell(pairs []pairValue, d, b []float64, unit string, scale float64) string {
	exact := true
	for _, p := range pairs {
		if censored(unit, p.D) || censored(unit, p.B) {
			exact = false
		}
	}
	if exact {
		return metricCell(pairs, d, b, unit, scale, true)
	}
	// B/D is 1/gain: its bounds are the gain's, inverted.
	var los, his []float64
	for _, p := range pairs {
		g := latencyGain(p.D, p.B)
		los = append(los, 1/g.Hi)
		his = append(his, 1/g.Lo)
	}
	lo, hi := median(los), median(his)
	s := sideCell(d, unit, scale) + " → " + sideCell(b, unit, scale)
	switch {
	case lo == 0 && math.IsInf(hi, 1):
		return s + " (ratio not bounded: histogram's top)"
	case lo == 0:
		return fmt.Sprintf("%s (≤%s: histogram's top)", s, fmtRatio(hi))
	case math.IsInf(hi, 1):
		return fmt.Sprintf("%s (≥%s: histogram's top)", s, fmtRatio(lo))
	}
	if fmtRatio(lo) == fmtRatio(hi) {
		return fmt.Sprintf("%s (%s, bounded: histogram's top)", s, fmtRatio(lo))
	}
	return fmt.Sprintf("%s (between %s and %s: histogram's top)", s, fmtRatio(lo), fmtRatio(hi))
}

// throughputCell prints the rates' medians and the ratio: exact from the
// bind clock, between bounds from the poll.
func throughputCell(gains []gainBounds, d, b []float64, bind bool) string {
	if len(d) == 0 && len(b) == 0 {
		return "—"
	}
	s := sideCell(d, unitBoundRate, 1) + " → " + sideCell(b, unitBoundRate, 1)
	if len(gains) == 0 {
		return s
	}
	var los, his []float64
	for _, g := range gains {
		los = append(los, g.Lo)
		his = append(his, g.Hi)
	}
	if bind {
		return fmt.Sprintf("%s (%s, %s)", s, fmtRatio(median(los)), fmtSpread(los))
	}
	hi := "∞"
	if m := median(his); !math.IsInf(m, 1) {
		hi = fmtRatio(m)
	}
	return fmt.Sprintf("%s (between %s and %s, 1-s poll)", s, fmtRatio(median(los)), hi)
}

// countCell prints "D → B" medians of a count, with each side's range where
// it varies.
func countCell(d, b []float64) string {
	if len(d) == 0 && len(b) == 0 {
		return "—"
	}
	side := func(xs []float64) (string, string) {
		if len(xs) == 0 {
			return "none", ""
		}
		lo, hi := minMax(xs)
		if lo == hi {
			return fmtCount(lo), ""
		}
		return fmtCount(median(xs)), fmtCount(lo) + "–" + fmtCount(hi)
	}
	dm, dr := side(d)
	bm, br := side(b)
	s := dm + " → " + bm
	var ranges []string
	if dr != "" {
		ranges = append(ranges, "D "+dr)
	}
	if br != "" {
		ranges = append(ranges, "B "+br)
	}
	if len(ranges) > 0 {
		s += " (" + strings.Join(ranges, ", ") + ")"
	}
	return s
}

// heapCell prints the heap medians and the median per-repetition change.
func heapCell(pairs []pairValue, d, b []float64) string {
	if len(d) == 0 && len(b) == 0 {
		return "—"
	}
	s := metricCell(nil, d, b, unitHeap, 1, false)
	if len(pairs) == 0 {
		return s
	}
	var rs []float64
	for _, p := range pairs {
		rs = append(rs, p.B/p.D)
	}
	return fmt.Sprintf("%s (%+.1f %%)", s, 100*(median(rs)-1))
}
