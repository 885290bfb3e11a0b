package budget

import (
	"fmt"

	kruisev1alpha1 "github.com/openkruise/kruise-api/policy/v1alpha1"
	toolscache "k8s.io/client-go/tools/cache"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	kruisepolicy "github.com/budgetguard/budgetguard/apis/kruise/policy/v1beta1"
)

// PUBOf returns obj, a PodUnavailableBudget of policy.kruise.io/v1beta1 or
// v1alpha1 (or the tombstone of one), in the v1beta1 shape; false when obj
// is no PUB. A v1alpha1 annotation that does not convert is left in place
// for the rules to read as OpenKruise's webhook does (see
// kruisepolicy.FromV1alpha1).
func PUBOf(obj any) (*PUB, bool) {
	pub, ok, _ := pubOf(obj)
	return pub, ok
}

func pubOf(obj any) (*PUB, bool, error) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	switch p := obj.(type) {
	case *PUB:
		return p, true, nil
	case *kruisev1alpha1.PodUnavailableBudget:
		pub, err := kruisepolicy.FromV1alpha1(p)
		return pub, true, err
	}
	return nil, false, nil
}

// targetKey identifies a workload a PUB's targetRef names. Like Kruise, it
// compares API group, kind and name, not the version.
type targetKey struct {
	namespace, group, kind, name string
}

func targetOf(pub *PUB) (targetKey, error) {
	ref := pub.Spec.TargetReference
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return targetKey{}, fmt.Errorf("spec.targetRef.apiVersion %q: %w", ref.APIVersion, err)
	}
	if ref.Kind == "" || ref.Name == "" {
		return targetKey{}, fmt.Errorf("spec.targetRef needs kind and name, got kind %q name %q", ref.Kind, ref.Name)
	}
	return targetKey{namespace: pub.Namespace, group: gv.Group, kind: ref.Kind, name: ref.Name}, nil
}

func ownerTarget(namespace string, ref *metav1.OwnerReference) (targetKey, bool) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return targetKey{}, false
	}
	return targetKey{namespace: namespace, group: gv.Group, kind: ref.Kind, name: ref.Name}, true
}

// pubsForLocked appends the PUBs that cover pod to out: first those that
// count it, by selector (PUBs without a targetRef) or by targetRef, which
// names the pod's controller or, for a ReplicaSet, the ReplicaSet's
// controller (a Deployment); then the one its related-pub annotation names,
// when that one does not count it. OpenKruise's webhook decides a pod under
// the PUB its annotation names, but its PUB controller counts only the pods
// of the selector or targetRef. It returns out and how many PUBs it
// appended that count pod. Caller holds c.mu for reading.
func (c *Cache) pubsForLocked(pod *v1.Pod, out []*PUB) ([]*PUB, int) {
	if c.pubs.Load() != pubOn {
		return out, 0
	}
	start := len(out)
	add := func(p *PUB) {
		for _, q := range out[start:] {
			if q == p {
				return
			}
		}
		out = append(out, p)
	}
	var buf [2]*PUB
	selected, _ := c.pubsBySelector.matching(pod.Namespace, pod.Labels, buf[:0])
	for _, p := range selected {
		add(p)
	}
	if len(c.pubsByTarget) > 0 {
		owner := metav1.GetControllerOf(pod)
		for depth := 0; owner != nil && depth < 2; depth++ {
			t, ok := ownerTarget(pod.Namespace, owner)
			if !ok {
				break
			}
			for _, p := range c.pubsByTarget[t] {
				if c.workloadIs(t, owner.UID) {
					add(p)
				}
			}
			owner = c.parentOf(t, owner.UID)
		}
	}
	counted := len(out) - start
	if name := relatedPUB(pod); name != "" {
		if p := c.pubsByName[podKey{pod.Namespace, name}]; p != nil {
			add(p)
		}
	}
	return out, counted
}

// workloadIs reports whether the workload t named in the informers is the
// one with uid, so a PUB does not follow a deleted workload's orphans into a
// new one with the same name. Unknown kinds cannot be checked and pass.
func (c *Cache) workloadIs(t targetKey, uid types.UID) bool {
	if t.group != "apps" {
		return true
	}
	var got types.UID
	switch t.kind {
	case "Deployment":
		d, err := c.deployments.Deployments(t.namespace).Get(t.name)
		if err != nil {
			return false
		}
		got = d.UID
	case "StatefulSet":
		s, err := c.statefulSets.StatefulSets(t.namespace).Get(t.name)
		if err != nil {
			return false
		}
		got = s.UID
	case "ReplicaSet":
		rs, err := c.replicaSets.ReplicaSets(t.namespace).Get(t.name)
		if err != nil {
			return false
		}
		got = rs.UID
	default:
		return true
	}
	return got == uid
}

// parentOf returns the controller of a ReplicaSet (its Deployment), or nil.
func (c *Cache) parentOf(t targetKey, uid types.UID) *metav1.OwnerReference {
	if t.group != "apps" || t.kind != "ReplicaSet" {
		return nil
	}
	rs, err := c.replicaSets.ReplicaSets(t.namespace).Get(t.name)
	if err != nil || rs.UID != uid {
		return nil
	}
	return metav1.GetControllerOf(rs)
}
