package runner

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/budgetguard/budgetguard/internal/audit"
	"github.com/budgetguard/budgetguard/internal/report"
	"github.com/budgetguard/budgetguard/internal/scenario"
)

func TestUnmet(t *testing.T) {
	sc := &scenario.Scenario{Expect: &scenario.Expect{Budgetguard: &scenario.Expectation{
		Disruptions: &scenario.Count{Min: 0, Max: 1},
		Violations:  &scenario.Count{Min: 0, Max: 0},
		Refusals: map[string]scenario.Count{
			"InsufficientBudget":        {Min: 1, Max: -1},
			"SafeToEvictFalse/filtered": {Min: 2, Max: 2},
			"apiserver-429":             {Min: 0, Max: 0},
			"apiserver-403":             {Min: 2, Max: 2},
		},
		Pods: &scenario.PodsExpectation{Pending: []string{"shop/big"}, Bound: []string{"shop/small", "shop/gone"}},
	}}}
	run := report.Run{
		Mode: report.ModeBudgetguard,
		Refusals: []report.PluginRefusal{
			{Component: audit.ComponentScheduler, Reason: "InsufficientBudget", Count: 1},
			{Component: audit.ComponentDescheduler, Reason: "InsufficientBudget", Count: 2},
			{Component: audit.ComponentDescheduler, Reason: "SafeToEvictFalse", Count: 3, Filtered: true},
		},
		Audit: audit.Result{
			Disruptions: []audit.Disruption{{Pod: "a"}},
			// An OpenKruise webhook's 403s count as the API server's.
			Refusals: []audit.Refusal{{Code: 429}, {Code: 404}, {Code: 403}, {Code: 403}},
		},
		Pods: []report.Pod{{Namespace: "shop", Name: "big"}, {Namespace: "shop", Name: "small", Node: "n1"}},
	}
	want := []string{
		"expect.budgetguard.refusals[SafeToEvictFalse/filtered]: want 2, got 3",
		"expect.budgetguard.refusals[apiserver-429]: want 0, got 1",
		"expect.budgetguard.pods.bound[1]: pod shop/gone is gone, want it bound",
	}
	if diff := cmp.Diff(want, Unmet(sc, run)); diff != "" {
		t.Errorf("Unmet (-want,+got):\n%s", diff)
	}

	run.Audit.Refusals = nil
	run.Refusals[2].Count = 2
	run.Pods[0].Node = "n1"
	run.Audit.Violations = []audit.Violation{{}}
	want = []string{
		"expect.budgetguard.violations: want 0, got 1",
		"expect.budgetguard.refusals[apiserver-403]: want 2, got 0",
		"expect.budgetguard.pods.bound[1]: pod shop/gone is gone, want it bound",
		"expect.budgetguard.pods.pending[0]: pod shop/big is bound to n1, want it Pending",
	}
	if diff := cmp.Diff(want, Unmet(sc, run)); diff != "" {
		t.Errorf("Unmet (-want,+got):\n%s", diff)
	}

	run.Mode = report.ModeUpstream
	if got := Unmet(sc, run); got != nil {
		t.Errorf("Unmet for a mode without expectations = %q, want none", got)
	}
	if got := Unmet(&scenario.Scenario{}, run); got != nil {
		t.Errorf("Unmet without an expect block = %q, want none", got)
	}
}
