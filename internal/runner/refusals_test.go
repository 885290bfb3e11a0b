package runner

import (
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2"

	"github.com/budgetguard/budgetguard/internal/audit"
	"github.com/budgetguard/budgetguard/internal/report"
	"github.com/budgetguard/budgetguard/plugins/budget"
)

// TestRefusalsOncePerPodPerLoop replays one descheduling loop the way
// BudgetAwareEvictor reports it, in its metrics and in its log: pod a is
// refused at PreEvictionFilter and again at the eviction gate, pod b at
// PreEvictionFilter only (the strategy listed it but never asked to evict
// it), and pod c passes the gate but the API server answers 429 (which the
// auditor reports). That is 1 refusal and 1 filtered pod, not the 3
// refusals the metrics count, and no descheduler refusal for the 429. A
// second loop refuses pod a again at both points: one more refusal.
func TestRefusalsOncePerPodPerLoop(t *testing.T) {
	reg, evictor, blocked := refusalCounters()
	before, err := refusalCounts(reg)
	if err != nil {
		t.Fatal(err)
	}

	log := &refusalLog{}
	logger := withRefusalLog(klog.Background(), log).WithValues("plugin", "BudgetAwareEvictor")
	refuse := func(point, pod string) {
		evictor.WithLabelValues(point, "InsufficientBudget").Inc()
		logger.V(2).Info(evictorRefusedLog, "extensionPoint", point, "pod", klog.KRef("shop", pod),
			"reason", "InsufficientBudget", "message", "pdb shop/web: 3 healthy, 3 desired, 0 disruptions allowed")
	}
	log.startLoop(1)
	refuse("PreEvictionFilter", "a")
	refuse("EvictionRequest", "a")
	refuse("PreEvictionFilter", "b")
	evictor.WithLabelValues("APIServer", "TooManyRequests").Inc()
	logger.V(2).Info("Evicted pod", "pod", klog.KRef("shop", "d"))
	log.startLoop(2)
	refuse("PreEvictionFilter", "a")
	refuse("EvictionRequest", "a")
	blocked.WithLabelValues("InsufficientBudget").Inc()
	after, err := refusalCounts(reg)
	if err != nil {
		t.Fatal(err)
	}

	msg := "pdb shop/web: 3 healthy, 3 desired, 0 disruptions allowed"
	want := []report.PluginRefusal{
		{Component: audit.ComponentDescheduler, Reason: "InsufficientBudget", Count: 2, Pods: []report.RefusedPod{
			{Namespace: "shop", Name: "a", Message: msg, Count: 2},
		}},
		{Component: audit.ComponentDescheduler, Reason: "InsufficientBudget", Count: 1, Filtered: true, Pods: []report.RefusedPod{
			{Namespace: "shop", Name: "b", Message: msg, Count: 1},
		}},
		{Component: audit.ComponentScheduler, Reason: "InsufficientBudget", Count: 1},
	}
	if diff := cmp.Diff(want, pluginRefusals(before, after, log.snapshot())); diff != "" {
		t.Errorf("plugin refusals (-want,+got):\n%s", diff)
	}
}

// The capturing sink leaves the logger it wraps as it was: entries reach it
// at its own verbosity, the refusal entries included, and nothing more.
func TestRefusalLogPassesEntriesOn(t *testing.T) {
	var got []string
	next := funcr.New(func(prefix, args string) { got = append(got, args) }, funcr.Options{Verbosity: 1})
	log := &refusalLog{}
	logger := withRefusalLog(next, log).WithName("descheduler")
	logger.Info("loop started")
	logger.V(2).Info(evictorRefusedLog, "extensionPoint", "EvictionRequest", "pod", klog.KRef("shop", "a"), "reason", "InsufficientBudget", "message", "m")
	logger.V(1).Info(evictorRefusedLog, "extensionPoint", "Filter", "pod", klog.KRef("shop", "b"), "reason", "MultiplePDBs", "message", "m2")
	logger.V(5).Info("noise")
	if len(got) != 2 || !strings.Contains(got[0], "loop started") || !strings.Contains(got[1], "MultiplePDBs") {
		t.Errorf("the wrapped logger got %q, want the V(0) entry and the V(1) refusal only", got)
	}
	if recs := log.snapshot(); len(recs) != 2 || recs[0].name != "a" || recs[1].name != "b" || recs[1].point != "Filter" {
		t.Errorf("recorded %+v, want both refusals, whatever the wrapped logger's verbosity", recs)
	}
}

// The timeline's refusals: the scheduler's PreemptionBlockedByBudget events
// and the evictions the descheduler asked for and its gate refused, once
// per pod per loop, in time order; not what its filters only kept from the
// strategy, nor other events.
func TestTimedRefusals(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	records := []refusalRecord{
		{at: at(30), loop: 1, point: "PreEvictionFilter", namespace: "shop", name: "a", reason: "InsufficientBudget", message: "m"},
		{at: at(31), loop: 1, point: "EvictionRequest", namespace: "shop", name: "a", reason: "InsufficientBudget", message: "m"},
		{at: at(32), loop: 1, point: "EvictionRequest", namespace: "shop", name: "a", reason: "InsufficientBudget", message: "m"},
		{at: at(33), loop: 1, point: "Filter", namespace: "shop", name: "b", reason: "SafeToEvictFalse", message: "f"},
		{at: at(50), loop: 2, point: "EvictionRequest", namespace: "shop", name: "a", reason: "InsufficientBudget", message: "m"},
	}
	events := []podEvent{
		{at: at(10), namespace: "shop", name: "big", reason: "FailedScheduling", note: "0/1 nodes"},
		{at: at(40), namespace: "shop", name: "big", reason: budget.EventPreemptionBlockedByBudget, note: "blocked"},
	}
	want := []report.TimedRefusal{
		{Time: at(31), Component: audit.ComponentDescheduler, Reason: "InsufficientBudget", Namespace: "shop", Name: "a", Message: "m"},
		{Time: at(40), Component: audit.ComponentScheduler, Reason: budget.EventPreemptionBlockedByBudget, Namespace: "shop", Name: "big", Message: "blocked"},
		{Time: at(50), Component: audit.ComponentDescheduler, Reason: "InsufficientBudget", Namespace: "shop", Name: "a", Message: "m"},
	}
	if diff := cmp.Diff(want, timedRefusals(records, events)); diff != "" {
		t.Errorf("timed refusals (-want,+got):\n%s", diff)
	}
}
