package budgetpreemption

import (
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	schedv1 "k8s.io/kube-scheduler/config/v1"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	schedscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	"k8s.io/utils/ptr"
)

// Kind is the kind of the plugin's arguments in a KubeSchedulerConfiguration.
const Kind = Name + "Args"

// The args are registered into the kube-scheduler's scheme (decoding) and
// into its scheme builders, from which the scheduler builds the scheme that
// defaults and converts plugin args: both read the same registrations.
func init() {
	schedv1.SchemeBuilder.Register(addVersionedTypes)
	schedconfig.SchemeBuilder.Register(addInternalTypes)
	utilruntime.Must(addVersionedTypes(schedscheme.Scheme))
	utilruntime.Must(addInternalTypes(schedscheme.Scheme))
}

func addInternalTypes(s *runtime.Scheme) error {
	s.AddKnownTypeWithName(schedconfig.SchemeGroupVersion.WithKind(Kind), &BudgetAwarePreemptionArgs{})
	return nil
}

func addVersionedTypes(s *runtime.Scheme) error {
	s.AddKnownTypeWithName(schedv1.SchemeGroupVersion.WithKind(Kind), &VersionedArgs{})
	s.AddTypeDefaultingFunc(&VersionedArgs{}, func(obj any) { SetDefaultsBudgetAwarePreemptionArgs(obj.(*VersionedArgs)) })
	if err := s.AddConversionFunc((*VersionedArgs)(nil), (*BudgetAwarePreemptionArgs)(nil), func(a, b any, _ conversion.Scope) error {
		convertToInternal(a.(*VersionedArgs), b.(*BudgetAwarePreemptionArgs))
		return nil
	}); err != nil {
		return err
	}
	return s.AddConversionFunc((*BudgetAwarePreemptionArgs)(nil), (*VersionedArgs)(nil), func(a, b any, _ conversion.Scope) error {
		convertToVersioned(a.(*BudgetAwarePreemptionArgs), b.(*VersionedArgs))
		return nil
	})
}

func convertToInternal(in *VersionedArgs, out *BudgetAwarePreemptionArgs) {
	out.Mode = ptr.Deref(in.Mode, "")
	out.Actuation = ptr.Deref(in.Actuation, "")
	out.OverrideBudgetsAtPriority = copyPtr(in.OverrideBudgetsAtPriority)
	out.HonorSafeToEvictAnnotation = ptr.Deref(in.HonorSafeToEvictAnnotation, false)
	out.MinCandidateNodesPercentage = ptr.Deref(in.MinCandidateNodesPercentage, 0)
	out.MinCandidateNodesAbsolute = ptr.Deref(in.MinCandidateNodesAbsolute, 0)
	out.ExpendablePodsPriorityCutoff = ptr.Deref(in.ExpendablePodsPriorityCutoff, 0)
}

func convertToVersioned(in *BudgetAwarePreemptionArgs, out *VersionedArgs) {
	out.Mode = ptr.To(in.Mode)
	out.Actuation = ptr.To(in.Actuation)
	out.OverrideBudgetsAtPriority = copyPtr(in.OverrideBudgetsAtPriority)
	out.HonorSafeToEvictAnnotation = ptr.To(in.HonorSafeToEvictAnnotation)
	out.MinCandidateNodesPercentage = ptr.To(in.MinCandidateNodesPercentage)
	out.MinCandidateNodesAbsolute = ptr.To(in.MinCandidateNodesAbsolute)
	out.ExpendablePodsPriorityCutoff = ptr.To(in.ExpendablePodsPriorityCutoff)
}

func copyPtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	return ptr.To(*p)
}
