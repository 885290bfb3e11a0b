package budget

import v1 "k8s.io/api/core/v1"

// AnnotationSafeToEvict is cluster-autoscaler's per-pod annotation. "false"
// means the autoscaler will never drain the pod; budgetguard's plugins then
// never choose it as a victim either, so the components agree. "true" never
// bypasses a budget.
const AnnotationSafeToEvict = "cluster-autoscaler.kubernetes.io/safe-to-evict"

// AutoscalerForbidsEviction reports whether pod carries
// cluster-autoscaler.kubernetes.io/safe-to-evict: "false".
func AutoscalerForbidsEviction(pod *v1.Pod) bool {
	return pod.Annotations[AnnotationSafeToEvict] == "false"
}

// Taints cluster-autoscaler puts on nodes it removes (cluster-autoscaler
// 1.36, utils/taints/taints.go: ToBeDeletedTaint, DeletionCandidateTaint).
// The autoscaler matches them by key alone, whatever the effect or value.
const (
	// TaintToBeDeleted marks a node the autoscaler is draining and about to
	// delete (effect NoSchedule; the value is the Unix time it was set).
	TaintToBeDeleted = "ToBeDeletedByClusterAutoscaler"
	// TaintDeletionCandidate marks a node the autoscaler found unneeded and
	// may remove soon (effect PreferNoSchedule).
	TaintDeletionCandidate = "DeletionCandidateOfClusterAutoscaler"
)

// NodeBeingRemoved reports whether cluster-autoscaler is draining node: it
// carries the ToBeDeletedByClusterAutoscaler taint. A nil node is not.
func NodeBeingRemoved(node *v1.Node) bool {
	return hasTaint(node, TaintToBeDeleted)
}

// NodeDeletionCandidate reports whether cluster-autoscaler may remove node
// soon: it carries the DeletionCandidateOfClusterAutoscaler taint.
func NodeDeletionCandidate(node *v1.Node) bool {
	return hasTaint(node, TaintDeletionCandidate)
}

func hasTaint(node *v1.Node, key string) bool {
	if node == nil {
		return false
	}
	for _, t := range node.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// DefaultExpendablePodsPriorityCutoff is the default of cluster-autoscaler's
// --expendable-pods-priority-cutoff (cluster-autoscaler 1.36,
// config/flags/flags.go).
const DefaultExpendablePodsPriorityCutoff int32 = -10

// PodExpendable reports whether cluster-autoscaler treats pod as expendable
// under cutoff, as its IsExpendablePod does (cluster-autoscaler 1.36,
// utils/pod/pod.go): spec.priority is set and below cutoff. A pod whose
// priority is unset is never expendable. The autoscaler leaves such pods
// out of its simulation and assumes a pending pod may preempt them.
func PodExpendable(pod *v1.Pod, cutoff int32) bool {
	return pod.Spec.Priority != nil && *pod.Spec.Priority < cutoff
}
