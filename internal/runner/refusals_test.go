package runner

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2"

	"github.com/budgetguard/budgetguard/internal/audit"
	"github.com/budgetguard/budgetguard/internal/report"
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
