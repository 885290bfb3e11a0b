package budget

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
)

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

// ScaleUpVerdict is cluster-autoscaler's view of a pending pod: whether its
// scale-up loop takes the pod into account, and why (not).
type ScaleUpVerdict struct {
	// Considered is true when the autoscaler counts the pod as unschedulable
	// and simulates new nodes for it. Whether a node group can hold it is
	// the autoscaler's own simulation, which this does not repeat.
	Considered bool
	// Reason is a short code: Considered, Bound, Terminating, NotUnschedulable,
	// Nominated or Expendable.
	Reason string
	// Message says the same in a sentence.
	Message string
}

// AutoscalerScaleUp reports whether cluster-autoscaler (1.36) would consider
// pod for scale-up under the given --expendable-pods-priority-cutoff:
//   - it lists only unbound pods whose PodScheduled condition is False with
//     reason Unschedulable (utils/kubernetes/listers.go, the unschedulable
//     pod lister), and not being deleted;
//   - a pod with status.nominatedNodeName is placed on that node in its
//     simulation, as "waiting for lower-priority preemption", and never
//     triggers a scale-up (core/utils FilterOutExpendableAndSplit,
//     core/static_autoscaler.go);
//   - a pod below the cutoff is expendable and dropped
//     (core/podlistprocessor/filter_out_expendable.go).
//
// budgetguard keeps a refused preemptor in the first state: unnominated and
// Unschedulable, so the autoscaler scales up for it.
func AutoscalerScaleUp(pod *v1.Pod, cutoff int32) ScaleUpVerdict {
	switch {
	case pod.Spec.NodeName != "":
		return ScaleUpVerdict{Reason: "Bound", Message: "the pod is bound to node " + pod.Spec.NodeName}
	case pod.DeletionTimestamp != nil:
		return ScaleUpVerdict{Reason: "Terminating", Message: "the pod is being deleted"}
	case !podUnschedulable(pod):
		return ScaleUpVerdict{Reason: "NotUnschedulable", Message: "the pod has no PodScheduled=False condition with reason Unschedulable yet"}
	case pod.Status.NominatedNodeName != "":
		return ScaleUpVerdict{Reason: "Nominated", Message: "the pod is nominated to node " + pod.Status.NominatedNodeName + "; cluster-autoscaler places it there and does not scale up for it"}
	case PodExpendable(pod, cutoff):
		return ScaleUpVerdict{Reason: "Expendable", Message: fmt.Sprintf("the pod's priority %d is below the expendable cutoff %d; cluster-autoscaler ignores it", *pod.Spec.Priority, cutoff)}
	}
	return ScaleUpVerdict{Considered: true, Reason: "Considered", Message: "unbound, Unschedulable and not nominated: cluster-autoscaler considers it for scale-up"}
}

func podUnschedulable(pod *v1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodScheduled {
			return c.Status == v1.ConditionFalse && c.Reason == v1.PodReasonUnschedulable
		}
	}
	return false
}
