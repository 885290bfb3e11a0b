package main

import (
	"fmt"
	"math"
	"strings"
)

// The rules every table is judged by. They were written on 2026-11-29
// (issue 48) before any run made with alternating order or the bind clock,
// and docs/performance.md prints them from these constants (the "rules"
// section), so that the page and the code cannot say different things.
const (
	// rulesDate is when the rules were fixed.
	rulesDate = "2026-11-29"

	// A stall is a repetition whose measured phase lasted at least
	// stallFactor times the median of the other repetitions of the same
	// workload under the same plugin in the same table, and at least
	// stallMinExcess seconds longer.
	stallFactor    = 3.0
	stallMinExcess = 60.0

	// pollInterval is scheduler_perf's poll that ends SchedulingDuration: a
	// phase measured as d seconds lasted between d - pollInterval and d.
	pollInterval = 1.0

	// The goal: over at least the repetitions a goalConfidence interval
	// needs, the median per-repetition ratio loses at most goalMedianLoss
	// and the interval's worse end at most goalBoundLoss.
	goalConfidence = 0.95
	goalMedianLoss = 0.05
	goalBoundLoss  = 0.10

	// histogramTop is the upper bound of the last finite bucket of
	// scheduler_framework_extension_point_duration_seconds, in ms: a
	// percentile there means "at least".
	histogramTop = 204.8
)

// isStall applies the stall rule to d, one repetition's duration, against
// others, those of the other repetitions of its workload and plugin in the
// table. ok is false when there are no others to compare with.
func isStall(d float64, others []float64) (stall, ok bool) {
	if len(others) == 0 {
		return false, false
	}
	ref := median(others)
	return d >= stallFactor*ref && d-ref >= stallMinExcess, true
}

type verdict int

const (
	undecided verdict = iota
	met
	missed
)

// gainBounds is what one repetition says of BudgetAware's gain over
// Default: B/D for a figure where more is better (throughput), D/B where
// less is better (a latency), so that 0.95 is a loss of 5 % either way. An
// exact figure gives Lo == Hi; one the measurement does not resolve gives
// the bounds it allows: a duration that ends on the 1-second poll, a
// percentile in the histogram's last bucket (Hi is +Inf when nothing bounds
// it above).
type gainBounds struct {
	Lo, Hi float64
	Poll   bool // the bounds come from the poll
	Top    bool // from the histogram's top
}

// metricJudgement is the goal rule applied to one metric of one row.
type metricJudgement struct {
	Name    string
	N       int
	Verdict verdict
	Reason  string
}

// judgeMetric: met when, over at least the repetitions an interval needs,
// the median of the gains' lower bounds is at least 1 - goalMedianLoss and
// the lower end of their interval at least 1 - goalBoundLoss; missed when
// the upper end of the interval of the upper bounds is below 1 -
// goalMedianLoss (a loss established whatever the resolution hides).
// Medians and order statistics are monotone, so bounds per repetition bound
// them.
func judgeMetric(name string, gains []gainBounds) metricJudgement {
	j := metricJudgement{Name: name, N: len(gains)}
	if len(gains) == 0 {
		j.Reason = "no repetition with both plugins"
		return j
	}
	var los, his []float64
	poll, top := false, false
	for _, g := range gains {
		los = append(los, g.Lo)
		his = append(his, g.Hi)
		poll = poll || g.Poll
		top = top || g.Top
	}
	loLo, _, ok := medianInterval(los, goalConfidence)
	_, hiHi, _ := medianInterval(his, goalConfidence)
	mLo := median(los)
	minN := minSamplesForInterval(goalConfidence)
	why := ""
	switch {
	case poll:
		why = " (1-s poll)"
	case top:
		why = " (histogram's top)"
	}
	switch {
	case !ok:
		j.Reason = fmt.Sprintf("n=%d < %d", j.N, minN)
	case hiHi < 1-goalMedianLoss:
		j.Verdict = missed
		j.Reason = fmt.Sprintf("%s: the whole interval loses over %.0f %%%s", name, 100*goalMedianLoss, why)
	case mLo >= 1-goalMedianLoss && loLo >= 1-goalBoundLoss:
		j.Verdict = met
	case mLo < 1-goalMedianLoss:
		j.Reason = fmt.Sprintf("%s: median loss may exceed %.0f %%%s", name, 100*goalMedianLoss, why)
	default:
		j.Reason = fmt.Sprintf("%s: the interval reaches a loss over %.0f %%%s", name, 100*goalBoundLoss, why)
	}
	return j
}

// exactGain is a repetition's gain from two exact figures.
func exactGain(d, b float64, higherBetter bool) gainBounds {
	g := d / b
	if higherBetter {
		g = b / d
	}
	return gainBounds{Lo: g, Hi: g}
}

// pollGain is the throughput gain of a repetition whose two phases, of the
// same number of pods, were measured as dD and dB seconds on the poll: the
// true lengths lie in (d - pollInterval, d], so B/D = dD/dB lies between
// (dD - 1)/dB and dD/(dB - 1).
func pollGain(dD, dB float64) gainBounds {
	lo := math.Max(dD-pollInterval, 0) / dB
	hi := math.Inf(1)
	if dB > pollInterval {
		hi = dD / (dB - pollInterval)
	}
	return gainBounds{Lo: lo, Hi: hi, Poll: true}
}

// latencyGain is a repetition's gain D/B from two percentiles, either of
// which may be in the histogram's last bucket (at least that value).
func latencyGain(d, b float64) gainBounds {
	dTop, bTop := d >= histogramTop-1e-9, b >= histogramTop-1e-9
	g := d / b
	switch {
	case dTop && bTop:
		return gainBounds{Lo: 0, Hi: math.Inf(1), Top: true}
	case dTop:
		return gainBounds{Lo: g, Hi: math.Inf(1), Top: true}
	case bTop:
		return gainBounds{Lo: 0, Hi: g, Top: true}
	}
	return gainBounds{Lo: g, Hi: g}
}

// judgeRow combines the metrics' judgements with what happened to
// BudgetAware in the row's repetitions: any incident (over budget, stalled,
// failed) or any metric missed misses the goal; a gap (a repetition not run
// or stopped before its result) leaves it undecided; every metric met, with
// neither, meets it.
func judgeRow(metrics []metricJudgement, incidents, gaps []string) (verdict, string) {
	var reasons []string
	seen := map[string]bool{}
	add := func(r string) {
		if r != "" && !seen[r] {
			seen[r] = true
			reasons = append(reasons, r)
		}
	}
	v := met
	for _, inc := range incidents {
		v = missed
		add(inc)
	}
	for _, m := range metrics {
		if m.Verdict == missed {
			v = missed
			add(m.Reason)
		}
	}
	if v == missed {
		return v, strings.Join(reasons, "; ")
	}
	for _, g := range gaps {
		v = undecided
		add(g)
	}
	for _, m := range metrics {
		if m.Verdict != met {
			v = undecided
			add(m.Reason)
		}
	}
	return v, strings.Join(reasons, "; ")
}

func (v verdict) String() string {
	switch v {
	case met:
		return "met"
	case missed:
		return "missed"
	}
	return "undecided"
}

// rulesText is the page's statement of the rules, from the constants above.
func rulesText() string {
	minN := minSamplesForInterval(goalConfidence)
	conf := 100 * goalConfidence
	lines := []string{
		fmt.Sprintf("Fixed on %s (issue 48), before any run made with alternating order or the bind clock;", rulesDate),
		"`hack/perfreport` applies them (`hack/perfreport/rules.go`) and prints this list from its constants.",
		"",
		"- **Batches.** A batch is one raw file, or a part of one that a comment line marks as a run of its",
		"  own (another commit, another setting). Each batch is its own row, under its letter; no figure",
		"  pools the repetitions of two batches, even of one machine and the same code.",
		"- **Per-repetition ratio.** Both plugins run in every repetition (one process, or one pair of",
		"  descheduling loops); a repetition's ratio is BudgetAware's figure (B) over Default's (D) in",
		"  that repetition. A row gives each plugin's median and the median of the per-repetition ratios,",
		fmt.Sprintf("  with its distribution-free %.0f %% interval (\"CI\": the sign test's order statistics) from %d", conf, minN),
		"  repetitions on, and the lowest and highest ratio (\"range\") below that.",
		fmt.Sprintf("- **Resolution.** `SchedulingDuration` ends on scheduler_perf's %g-second poll, so a phase measured", pollInterval),
		fmt.Sprintf("  as d seconds lasted between d − %g and d, and the throughput ratio B/D of a repetition (the same", pollInterval),
		fmt.Sprintf("  pods under both) lies between (d_D − %g)/d_B and d_D/(d_B − %g). A throughput from the poll is", pollInterval, pollInterval),
		"  therefore shown with the medians of those bounds (\"between … and …, 1-s poll\"), never as one",
		"  ratio. `bound-pods/s` (the bind clock) has no such limit and is used for a row wherever each of",
		fmt.Sprintf("  its repetitions has it. A PostFilter percentile of %g ms is the histogram's last finite", histogramTop),
		"  bucket, \"at least\" (shown ≥): a ratio with one is bounded on one side only.",
		fmt.Sprintf("- **Goal met**, for a row: at least %d repetitions; for throughput, PostFilter p50 and PostFilter", minN),
		fmt.Sprintf("  p99 each, the median per-repetition gain at least %.2f and the lower end of its %.0f %% interval at", 1-goalMedianLoss, conf),
		fmt.Sprintf("  least %.2f (gain: B/D for throughput, D/B for a latency, so that %.2f is a loss of %.0f %% either", 1-goalBoundLoss, 1-goalMedianLoss, 100*goalMedianLoss),
		"  way; where the resolution leaves a gain between two bounds, the lower one); and in no",
		"  repetition did BudgetAwarePreemption take a victim beyond its budget, stall or fail.",
		fmt.Sprintf("  **Missed**: any of those incidents, or a metric whose interval lies wholly below %.2f (upper", 1-goalMedianLoss),
		"  bounds). **Undecided**: everything else, with the reason (too few repetitions, a ratio the",
		"  resolution leaves open, an interval too wide, a repetition not run). The heap is shown, not",
		"  judged. The same rule judges the descheduling loop (loop-s, a latency) and the unit benchmarks'",
		"  time per operation.",
		fmt.Sprintf("- **Stall.** A repetition whose measured phase lasted at least %g times the median of the other", stallFactor),
		"  repetitions of the same workload under the same plugin in the same table (of any batch), and at",
		fmt.Sprintf("  least %g s longer. The stalls seen so far are the scheduling queue's 5-minute flush added to", stallMinExcess),
		"  phases of 1 to 45 s; a slow but steady workload is not one. With nothing to compare with, a",
		"  table says \"not assessable\".",
		"- **Over budget.** Every repetition's `overbudget-victims` of each plugin, named by repetition,",
		"  with its PDB and PUB parts; \"0 in all n\" only when each of the n repetitions reported 0.",
	}
	return strings.Join(lines, "\n") + "\n"
}
