package budgetpreemption

import (
	"k8s.io/utils/ptr"

	"github.com/budgetguard/budgetguard/plugins/budget"
)

// Defaults of the arguments; the candidate-node numbers are upstream's.
const (
	DefaultMinCandidateNodesPercentage int32 = 10
	DefaultMinCandidateNodesAbsolute   int32 = 100
	// DefaultExpendablePodsPriorityCutoff is the default of
	// cluster-autoscaler's --expendable-pods-priority-cutoff.
	DefaultExpendablePodsPriorityCutoff int32 = budget.DefaultExpendablePodsPriorityCutoff
)

// SetDefaultsBudgetAwarePreemptionArgs fills the unset fields of the
// versioned args. The scheme's defaulter (register.go) calls it.
func SetDefaultsBudgetAwarePreemptionArgs(a *VersionedArgs) {
	if a.Mode == nil {
		a.Mode = ptr.To(ModeStrict)
	}
	if a.Actuation == nil {
		a.Actuation = ptr.To(ActuationEvict)
	}
	if a.HonorSafeToEvictAnnotation == nil {
		a.HonorSafeToEvictAnnotation = ptr.To(true)
	}
	if a.MinCandidateNodesPercentage == nil {
		a.MinCandidateNodesPercentage = ptr.To(DefaultMinCandidateNodesPercentage)
	}
	if a.MinCandidateNodesAbsolute == nil {
		a.MinCandidateNodesAbsolute = ptr.To(DefaultMinCandidateNodesAbsolute)
	}
	if a.ExpendablePodsPriorityCutoff == nil {
		a.ExpendablePodsPriorityCutoff = ptr.To(DefaultExpendablePodsPriorityCutoff)
	}
}

// DefaultArgs returns the arguments used when a profile configures none.
func DefaultArgs() *BudgetAwarePreemptionArgs {
	v := &VersionedArgs{}
	SetDefaultsBudgetAwarePreemptionArgs(v)
	out := &BudgetAwarePreemptionArgs{}
	convertToInternal(v, out)
	return out
}
