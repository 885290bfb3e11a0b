package budget

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// DisruptionPreconditions returns the preconditions an eviction (or a
// delete) of pod must carry so that the API server disrupts the pod as it
// was decided on, and no other:
//
//   - its UID always: a pod made again under the same name is never taken
//     in its place;
//   - its resourceVersion when the pod was not healthy (not Running and
//     Ready, or Pending): such a pod spends none of its budgets under rules
//     1, 3 and 5, and one that turns Ready before the request lands would
//     otherwise go unaccounted. Two such pods of one PodUnavailableBudget
//     could both go. The Eviction API adds the same precondition itself for
//     the unhealthy pods its PDB check lets go
//     (pkg/registry/core/pod/storage/eviction.go), but it knows no PUB.
//
// A healthy pod carries no resourceVersion: its budgets were decided and
// reserved (and a PDB's is checked again by the Eviction API); a conflict
// would only fail a disruption the budgets allow.
func DisruptionPreconditions(pod *v1.Pod) *metav1.Preconditions {
	p := &metav1.Preconditions{UID: ptr.To(pod.UID)}
	if !healthyForPUB(pod) && pod.ResourceVersion != "" {
		p.ResourceVersion = ptr.To(pod.ResourceVersion)
	}
	return p
}

// ChangedOnlyByDisruptionMark reports whether current is the pod decided
// on, changed since only by another disruptor's mark: the DisruptionTarget
// condition that the Eviction API and the scheduler's preemption write
// before they delete a pod, with the resourceVersion and managedFields
// that write moves. The budgets decide on such a pod exactly as on the one
// decided on, so a disruption of it that met a conflict with the decided
// resourceVersion (DisruptionPreconditions) may go again under current's.
// Any other change (phase, readiness, labels, annotations, a deletion under
// way, a new pod under the name) is not such, and keeps the conflict.
func ChangedOnlyByDisruptionMark(decided, current *v1.Pod) bool {
	if decided.UID != current.UID {
		return false
	}
	return apiequality.Semantic.DeepEqual(withoutDisruptionMark(decided), withoutDisruptionMark(current))
}

// withoutDisruptionMark is a copy of pod without its DisruptionTarget
// condition and the metadata every write moves.
func withoutDisruptionMark(pod *v1.Pod) *v1.Pod {
	p := pod.DeepCopy()
	p.TypeMeta = metav1.TypeMeta{}
	p.ResourceVersion = ""
	p.ManagedFields = nil
	p.Status.Conditions = slices.DeleteFunc(p.Status.Conditions, func(c v1.PodCondition) bool {
		return c.Type == v1.DisruptionTarget
	})
	if len(p.Status.Conditions) == 0 {
		p.Status.Conditions = nil
	}
	return p
}
