package budgetpreemption

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/utils/ptr"
)

func TestValidateBudgetAwarePreemptionArgs(t *testing.T) {
	path := field.NewPath("profiles").Index(0).Child("pluginConfig").Index(1).Child("args")
	tests := []struct {
		name    string
		mutate  func(*BudgetAwarePreemptionArgs)
		wantErr string
	}{
		{name: "defaults are valid", mutate: func(*BudgetAwarePreemptionArgs) {}},
		{
			name:    "unknown actuation",
			mutate:  func(a *BudgetAwarePreemptionArgs) { a.Actuation = "Kill" },
			wantErr: `profiles[0].pluginConfig[1].args.actuation: Unsupported value: "Kill": supported values: "Evict", "Delete"`,
		},
		{
			name:    "unknown mode",
			mutate:  func(a *BudgetAwarePreemptionArgs) { a.Mode = "Lenient" },
			wantErr: `profiles[0].pluginConfig[1].args.mode: Unsupported value: "Lenient"`,
		},
		{
			name:    "negative override priority",
			mutate:  func(a *BudgetAwarePreemptionArgs) { a.OverrideBudgetsAtPriority = ptr.To[int32](-1) },
			wantErr: `profiles[0].pluginConfig[1].args.overrideBudgetsAtPriority: Invalid value: -1`,
		},
		{
			// At 0, every pod of default priority could break budgets.
			name:    "override priority 0",
			mutate:  func(a *BudgetAwarePreemptionArgs) { a.OverrideBudgetsAtPriority = ptr.To[int32](0) },
			wantErr: `profiles[0].pluginConfig[1].args.overrideBudgetsAtPriority: Invalid value: 0: must be above 0`,
		},
		{
			name:   "override priority 1 is allowed",
			mutate: func(a *BudgetAwarePreemptionArgs) { a.OverrideBudgetsAtPriority = ptr.To[int32](1) },
		},
		{
			name:   "override at system-cluster-critical",
			mutate: func(a *BudgetAwarePreemptionArgs) { a.OverrideBudgetsAtPriority = ptr.To[int32](2000000000) },
		},
		{
			name:    "expendable cutoff above 0",
			mutate:  func(a *BudgetAwarePreemptionArgs) { a.ExpendablePodsPriorityCutoff = 1 },
			wantErr: `profiles[0].pluginConfig[1].args.expendablePodsPriorityCutoff: Invalid value: 1: must be 0 or below`,
		},
		{
			name:   "expendable cutoff 0 is allowed",
			mutate: func(a *BudgetAwarePreemptionArgs) { a.ExpendablePodsPriorityCutoff = 0 },
		},
		{
			name:   "expendable cutoff far below",
			mutate: func(a *BudgetAwarePreemptionArgs) { a.ExpendablePodsPriorityCutoff = -2147483648 },
		},
		{
			name:    "percentage out of range",
			mutate:  func(a *BudgetAwarePreemptionArgs) { a.MinCandidateNodesPercentage = 101 },
			wantErr: `profiles[0].pluginConfig[1].args.minCandidateNodesPercentage: Invalid value: 101`,
		},
		{
			name: "both candidate numbers zero",
			mutate: func(a *BudgetAwarePreemptionArgs) {
				a.MinCandidateNodesPercentage, a.MinCandidateNodesAbsolute = 0, 0
			},
			wantErr: `profiles[0].pluginConfig[1].args.minCandidateNodesAbsolute: Invalid value: 0: cannot be zero`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := DefaultArgs()
			tc.mutate(a)
			err := ValidateBudgetAwarePreemptionArgs(path, a)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestNewRejectsInvalidArgs checks that New validates again, with the path
// of the plugin's args in the message.
func TestNewRejectsInvalidArgs(t *testing.T) {
	a := DefaultArgs()
	a.Actuation = "Kill"
	_, err := argsFrom(a)
	const want = `pluginConfig[BudgetAwarePreemption].args.actuation: Unsupported value: "Kill"`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error = %v, want one containing %q", err, want)
	}
	if _, err := argsFrom(&schedconfig.DefaultPreemptionArgs{}); err == nil || !strings.Contains(err.Error(), "*config.DefaultPreemptionArgs") {
		t.Fatalf("error = %v, want one naming the wrong type", err)
	}
}
