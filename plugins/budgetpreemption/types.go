package budgetpreemption

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Mode says what the plugin does with a victim its budget denies.
type Mode string

const (
	// ModeStrict never chooses a victim whose budget denies its disruption;
	// a node that would need one is not a candidate.
	ModeStrict Mode = "Strict"
	// ModeBestEffort keeps upstream's order of preference: it avoids denied
	// victims where it can, and takes them when it must.
	ModeBestEffort Mode = "BestEffort"
)

// Actuation is how victims are removed.
type Actuation string

const (
	// ActuationEvict posts a policy/v1 Eviction for each victim, so the API
	// server re-checks the PodDisruptionBudget atomically.
	ActuationEvict Actuation = "Evict"
	// ActuationDelete deletes victims directly, as upstream preemption does,
	// except those whose disruption a PodDisruptionBudget allows and counts:
	// they are evicted, so that the API server records the disruption in
	// the PDB's status (see deletes in actuation.go).
	ActuationDelete Actuation = "Delete"
)

// BudgetAwarePreemptionArgs holds the arguments of the BudgetAwarePreemption
// plugin, in the form the plugin uses (defaults applied).
//
// +kubebuilder:object:generate=true
// +kubebuilder:object:root=true
type BudgetAwarePreemptionArgs struct {
	metav1.TypeMeta

	// Mode is Strict (the default) or BestEffort.
	Mode Mode
	// Actuation is Evict (the default) or Delete.
	Actuation Actuation
	// OverrideBudgetsAtPriority, when set, lets preemptors whose priority is
	// at or above it break budgets; their victims are deleted. It must be
	// above 0, the priority of pods without a PriorityClass.
	OverrideBudgetsAtPriority *int32
	// HonorSafeToEvictAnnotation keeps pods annotated
	// cluster-autoscaler.kubernetes.io/safe-to-evict: "false" from ever
	// being victims.
	HonorSafeToEvictAnnotation bool
	// MinCandidateNodesPercentage and MinCandidateNodesAbsolute mean what
	// they mean for DefaultPreemption.
	MinCandidateNodesPercentage int32
	MinCandidateNodesAbsolute   int32
	// ExpendablePodsPriorityCutoff is cluster-autoscaler's
	// --expendable-pods-priority-cutoff (default -10). The autoscaler leaves
	// pods below it out of its simulation and assumes any preemptor may
	// preempt them, so it never scales up for a pod that fits by preempting
	// them. Victims below it are therefore taken even when a budget protects
	// them: they spend nothing in the Strict check, and the preemptor gets a
	// PreemptedExpendableUnderBudget event. Keep it equal to the autoscaler's.
	ExpendablePodsPriorityCutoff int32
}

// VersionedArgs is BudgetAwarePreemptionArgs as written in a
// kubescheduler.config.k8s.io/v1 KubeSchedulerConfiguration, where every
// field is optional. Its kind is BudgetAwarePreemptionArgs.
//
// +kubebuilder:object:generate=true
// +kubebuilder:object:root=true
type VersionedArgs struct {
	metav1.TypeMeta `json:",inline"`

	Mode                        *Mode      `json:"mode,omitempty"`
	Actuation                   *Actuation `json:"actuation,omitempty"`
	OverrideBudgetsAtPriority   *int32     `json:"overrideBudgetsAtPriority,omitempty"`
	HonorSafeToEvictAnnotation  *bool      `json:"honorSafeToEvictAnnotation,omitempty"`
	MinCandidateNodesPercentage *int32     `json:"minCandidateNodesPercentage,omitempty"`
	MinCandidateNodesAbsolute   *int32     `json:"minCandidateNodesAbsolute,omitempty"`
	// ExpendablePodsPriorityCutoff defaults to -10, cluster-autoscaler's.
	ExpendablePodsPriorityCutoff *int32 `json:"expendablePodsPriorityCutoff,omitempty"`
}
