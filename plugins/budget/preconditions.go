package budget

import (
	v1 "k8s.io/api/core/v1"
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
