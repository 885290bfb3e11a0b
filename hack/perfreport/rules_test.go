package main

import (
	"math"
	"strings"
	"testing"
)

func TestMedianInterval(t *testing.T) {
	if m := median([]float64{3, 1, 2, 10}); m != 2.5 {
		t.Errorf("median %g", m)
	}
	// 5 samples: min and max cover the median with 1 - 2/32 = 93.75 %,
	// under 95 %: no interval.
	if _, _, ok := medianInterval([]float64{1, 2, 3, 4, 5}, 0.95); ok {
		t.Error("an interval from 5 samples")
	}
	if lo, hi, ok := medianInterval([]float64{6, 1, 2, 3, 4, 5}, 0.95); !ok || lo != 1 || hi != 6 {
		t.Errorf("6 samples: %g %g %v", lo, hi, ok)
	}
	// 10: the 2nd and 9th (1 - 2*11/1024 = 97.9 %; the 3rd and 8th give 89 %).
	xs := []float64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}
	if lo, hi, ok := medianInterval(xs, 0.95); !ok || lo != 2 || hi != 9 {
		t.Errorf("10 samples: %g %g %v", lo, hi, ok)
	}
	if n := minSamplesForInterval(0.95); n != 6 {
		t.Errorf("minimum samples %d", n)
	}
	if p := binomCDF(1, 10); math.Abs(p-11.0/1024) > 1e-12 {
		t.Errorf("binomCDF %g", p)
	}
}

func TestStallRule(t *testing.T) {
	// BudgetAwarePreemption's PreemptionBasicBudgets at 100 nodes, f758601
	// (Intel): the third repetition took 320 s.
	reps := []float64{6.163, 6.090, 320.1, 6.094, 6.105}
	for i, d := range reps {
		others := append(append([]float64{}, reps[:i]...), reps[i+1:]...)
		stall, ok := isStall(d, others)
		if !ok || stall != (i == 2) {
			t.Errorf("repetition %d (%g s): stall %v ok %v", i+1, d, stall, ok)
		}
	}
	for _, c := range []struct {
		d      float64
		others []float64
		stall  bool
	}{
		{7, []float64{2, 2, 2}, false},             // 3.5 times, 5 s longer: jitter of a short phase
		{300, []float64{231, 269}, false},          // slow and steady (DefaultPreemption at 1,000 nodes)
		{348, []float64{43.4, 29.96}, true},        // a single repetition against the other batches'
		{319, []float64{3.0, 2.0, 320, 3.0}, true}, // two stalls in five
	} {
		if got, _ := isStall(c.d, c.others); got != c.stall {
			t.Errorf("%g against %v: %v", c.d, c.others, got)
		}
	}
	if _, ok := isStall(5, nil); ok {
		t.Error("a stall assessed with nothing to compare with")
	}
}

func exact(gs ...float64) []gainBounds {
	var out []gainBounds
	for _, g := range gs {
		out = append(out, gainBounds{Lo: g, Hi: g})
	}
	return out
}

func TestGoalRule(t *testing.T) {
	cases := []struct {
		name  string
		gains []gainBounds
		want  verdict
		why   string
	}{
		{"even", exact(1.0, 0.98, 1.02, 0.99, 1.01, 1.0), met, ""},
		{"five repetitions", exact(1, 1, 1, 1, 1), undecided, "n=5 < 6"},
		{"a median loss", exact(0.93, 0.94, 0.92, 0.95, 0.93, 0.94), undecided, "median loss"},
		{"an established loss", exact(0.8, 0.84, 0.83, 0.82, 0.85, 0.81), missed, "whole interval"},
		{"a wide interval", exact(1.0, 1.0, 1.0, 1.0, 1.0, 0.7), undecided, "interval reaches"},
		// PreemptionBasic at 100 nodes before the gate: D's phase ended on
		// the 4th poll, B's on the 3rd, so B is not slower; nothing more.
		{"the poll's bounds", repeat(pollGain(3.1, 2.1), 10), met, ""},
		// PreemptionAsync at 100 nodes: 1.15 s each, unresolved.
		{"an unresolved poll", repeat(pollGain(1.15, 1.17), 10), undecided, "1-s poll"},
		// p99 at the histogram's top under B only: at most 150/204.8, a loss.
		{"B at the top", repeat(latencyGain(150, histogramTop), 6), missed, "histogram's top"},
		{"both at the top", repeat(latencyGain(histogramTop, histogramTop), 6), undecided, "histogram's top"},
		{"D at the top", repeat(latencyGain(histogramTop, 190), 6), met, ""},
	}
	for _, c := range cases {
		j := judgeMetric("throughput", c.gains)
		if j.Verdict != c.want || !strings.Contains(j.Reason, c.why) {
			t.Errorf("%s: %v (%s); want %v (%s)", c.name, j.Verdict, j.Reason, c.want, c.why)
		}
	}
	g := pollGain(3.1, 2.1)
	if math.Abs(g.Lo-1) > 1e-12 || math.Abs(g.Hi-3.1/1.1) > 1e-12 { // (3.1-1)/2.1 and 3.1/(2.1-1)
		t.Errorf("poll bounds %+v", g)
	}
	if g := pollGain(1.1, 0.9); !math.IsInf(g.Hi, 1) {
		t.Errorf("a phase under a poll bounds nothing above: %+v", g)
	}
}

func repeat(g gainBounds, n int) []gainBounds {
	out := make([]gainBounds, n)
	for i := range out {
		out[i] = g
	}
	return out
}

func TestJudgeRow(t *testing.T) {
	ok := judgeMetric("throughput", exact(1, 1, 1, 1, 1, 1))
	if v, _ := judgeRow([]metricJudgement{ok}, nil, nil); v != met {
		t.Errorf("all met: %v", v)
	}
	if v, why := judgeRow([]metricJudgement{ok}, []string{"B over budget in rep 3"}, nil); v != missed || why != "B over budget in rep 3" {
		t.Errorf("an incident: %v %q", v, why)
	}
	if v, why := judgeRow([]metricJudgement{ok}, nil, []string{"B rep 2: not run"}); v != undecided || why != "B rep 2: not run" {
		t.Errorf("a gap: %v %q", v, why)
	}
	few := judgeMetric("p99", exact(1, 1))
	if v, why := judgeRow([]metricJudgement{ok, few, few}, nil, nil); v != undecided || why != "n=2 < 6" {
		t.Errorf("reasons once each: %v %q", v, why)
	}
}

func TestRulesTextFromConstants(t *testing.T) {
	text := rulesText()
	for _, want := range []string{rulesDate, "at least 3 times", "least 60 s longer", "at least 0.95", "least 0.90", "from 6", "1-second poll", "204.8 ms"} {
		if !strings.Contains(text, want) {
			t.Errorf("the rules text lacks %q:\n%s", want, text)
		}
	}
}
