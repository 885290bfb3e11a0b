package runner

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/component-base/metrics"

	"github.com/budgetguard/budgetguard/internal/audit"
	"github.com/budgetguard/budgetguard/internal/report"
)

// refusalCounters returns a registry of its own with counters shaped like
// budgetguard's refusal counters (same names and labels): the evictor's and
// the scheduler's.
func refusalCounters() (metrics.KubeRegistry, *metrics.CounterVec, *metrics.CounterVec) {
	reg := metrics.NewKubeRegistry()
	evictor := metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "budgetguard", Subsystem: "evictor", Name: "evictions_refused_total", Help: "h",
	}, []string{"extension_point", "reason"})
	blocked := metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "budgetguard", Subsystem: "preemption", Name: "blocked_total", Help: "h",
	}, []string{"reason"})
	reg.MustRegister(evictor, blocked)
	return reg, evictor, blocked
}

// TestRefusalDeltaFromCounters reads counters shaped like budgetguard's
// (same names and labels) from a registry of its own, before and after
// some refusals, and checks the delta: per component and reason, summed
// over the evictor's extension points, other metrics ignored.
func TestRefusalDeltaFromCounters(t *testing.T) {
	reg, evictor, blocked := refusalCounters()
	other := metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "budgetguard", Subsystem: "preemption", Name: "decisions_total", Help: "h",
	}, []string{"result", "reason"})
	reg.MustRegister(other)

	evictor.WithLabelValues("Filter", "MultiplePDBs").Inc()
	blocked.WithLabelValues("InsufficientBudget").Add(2)
	before, err := refusalCounts(reg)
	if err != nil {
		t.Fatal(err)
	}

	evictor.WithLabelValues("PreEvictionFilter", "InsufficientBudget").Inc()
	evictor.WithLabelValues("EvictionRequest", "InsufficientBudget").Add(2)
	blocked.WithLabelValues("InsufficientBudget").Inc()
	blocked.WithLabelValues("StaleStatus").Inc()
	other.WithLabelValues("denied", "InsufficientBudget").Add(7)
	after, err := refusalCounts(reg)
	if err != nil {
		t.Fatal(err)
	}

	want := []report.PluginRefusal{
		{Component: audit.ComponentDescheduler, Reason: "InsufficientBudget", Count: 3},
		{Component: audit.ComponentScheduler, Reason: "InsufficientBudget", Count: 1},
		{Component: audit.ComponentScheduler, Reason: "StaleStatus", Count: 1},
	}
	if diff := cmp.Diff(want, refusalDelta(before, after)); diff != "" {
		t.Errorf("refusal delta (-want,+got):\n%s", diff)
	}
	if got := refusalDelta(after, after); len(got) != 0 {
		t.Errorf("delta of unchanged counters = %v, want none", got)
	}
}
