package kubectlplugin

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestWhyNames: -o name of why lists the budgets the answer names: those
// that cover the pod, then, for a pending pod, those its refusal names,
// each once. A preemptor that no budget covers names the budget that
// refused its preemption.
func TestWhyNames(t *testing.T) {
	out := WhyOutput{
		Budgets: []BudgetInfo{{Kind: "PodUnavailableBudget", Namespace: "shop", Name: "guard"}},
		Pending: &PendingInfo{NamedBudgets: []string{"pdb shop/web", "pub shop/guard", "pdb other/db"}},
	}
	want := []ObjectInfo{
		{Kind: "PodUnavailableBudget", Namespace: "shop", Name: "guard"},
		{Kind: "PodDisruptionBudget", Namespace: "shop", Name: "web"},
		{Kind: "PodUnavailableBudget", Namespace: "shop", Name: "guard"},
		{Kind: "PodDisruptionBudget", Namespace: "other", Name: "db"},
	}
	if diff := cmp.Diff(want, whyNames(out)); diff != "" {
		t.Errorf("names (-want,+got):\n%s", diff)
	}
	if got := whyNames(WhyOutput{}); len(got) != 0 {
		t.Errorf("names of an answer without budgets: %v", got)
	}
}
