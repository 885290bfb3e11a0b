package budgetpreemption

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// TestScoreFuncsLeaveOutCriteriaThatScoreAllAlike: criteria 1 (denied
// victims) and 3 (Strict's spending victims) are in the list only where a
// candidate has a victim they count; without them it has upstream's
// length, criterion 2 in place of upstream's first.
func TestScoreFuncsLeaveOutCriteriaThatScoreAllAlike(t *testing.T) {
	victims := func(counts ...int) map[string]*extenderv1.Victims {
		m := map[string]*extenderv1.Victims{}
		for i, c := range counts {
			m[string(rune('a'+i))] = &extenderv1.Victims{Pods: []*v1.Pod{pod("p", "", "", 0, true).Obj()}, NumPDBViolations: int64(c)}
		}
		return m
	}
	bestEffort := DefaultArgs()
	bestEffort.Mode = ModeBestEffort
	for _, tc := range []struct {
		name   string
		args   *BudgetAwarePreemptionArgs
		counts []int
		want   int
	}{
		{"Strict, no budget involved", DefaultArgs(), []int{0, 0}, 5},
		{"Strict, a spending victim", DefaultArgs(), []int{0, 1}, 6},
		{"Strict, denied and spending victims (an overriding preemptor)", DefaultArgs(), []int{deniedWeight, 1}, 7},
		{"BestEffort, no budget involved", bestEffort, []int{0, 0}, 5},
		{"BestEffort, a spending victim", bestEffort, []int{0, 1}, 5},
		{"BestEffort, a denied victim", bestEffort, []int{deniedWeight + 1, 0}, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.args, []*v1.Node{node("n1")}, nil, nil)
			if got := len(e.pl.scoreFuncs(victims(tc.counts...))); got != tc.want {
				t.Errorf("%d criteria, want %d", got, tc.want)
			}
		})
	}
}
