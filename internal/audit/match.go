package audit

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// userAgentNames returns the strings a user agent prefix is matched
// against: the whole user agent, and, for one that rest.AddUserAgent built
// ("<binary>/<version> (<os>/<arch>) kubernetes/<commit>/<name>"), the <name>
// part.
func userAgentNames(ua string) []string {
	names := []string{ua}
	const marker = ") kubernetes/"
	if i := strings.Index(ua, marker); i >= 0 {
		rest := ua[i+len(marker):]
		if j := strings.IndexByte(rest, '/'); j >= 0 && j+1 < len(rest) {
			names = append(names, rest[j+1:])
		}
	}
	return names
}

func hasAnyPrefix(names []string, prefix string) bool {
	if prefix == "" {
		return false
	}
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			return true
		}
	}
	return false
}

// classify returns the component of a user agent, and whether requests with
// it are to be ignored. Ignore wins over Components; the first matching
// component wins; an unmatched user agent is ComponentOther.
func (o *Options) classify(ua string) (Component, bool) {
	names := userAgentNames(ua)
	for _, p := range o.Ignore {
		if hasAnyPrefix(names, p) {
			return "", true
		}
	}
	for _, m := range o.Components {
		if hasAnyPrefix(names, m.UserAgentPrefix) {
			return m.Component, false
		}
	}
	return ComponentOther, false
}

// podHealthy: Ready condition True and no deletionTimestamp.
func podHealthy(pod *corev1.Pod) bool {
	if pod == nil || pod.DeletionTimestamp != nil {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// workloadKey names a workload by API group, kind, namespace and name, the
// way a PUB's targetRef and a pod's controller reference name it (the
// version does not matter).
type workloadKey struct {
	group, kind, namespace, name string
}

func ownerKey(namespace string, ref *metav1.OwnerReference) (workloadKey, bool) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return workloadKey{}, false
	}
	return workloadKey{group: gv.Group, kind: ref.Kind, namespace: namespace, name: ref.Name}, true
}

// workload is what the auditor knows of a ReplicaSet, Deployment or
// StatefulSet: its UID and its controller.
type workload struct {
	uid        types.UID
	controller *metav1.OwnerReference
}

// checkedKinds are the workloads the auditor watches; an owner reference to
// one of them only counts while that workload exists with the referenced
// UID. Other kinds cannot be checked and are taken as they are named.
var checkedKinds = map[schema.GroupKind]bool{
	{Group: "apps", Kind: "ReplicaSet"}:  true,
	{Group: "apps", Kind: "Deployment"}:  true,
	{Group: "apps", Kind: "StatefulSet"}: true,
}

// coverage decides which pods a budget covers. It is the auditor's own
// matching, independent of plugins/budget:
//   - a PDB covers the pods of its namespace that its selector matches; a nil
//     or invalid selector matches nothing, {} matches every pod;
//   - a PUB with spec.targetRef covers the pods whose controller, or whose
//     ReplicaSet's controller, is the named workload (API group, kind and
//     name compared; ReplicaSets, Deployments and StatefulSets must exist
//     with the referenced UID); a PUB without targetRef covers the pods its
//     spec.selector matches, with the same rules as a PDB's selector.
type coverage struct {
	selector labels.Selector // nil: matches nothing
	target   *workloadKey
}

func pdbCoverage(pdb *policyv1.PodDisruptionBudget) coverage {
	return coverage{selector: selectorOf(pdb.Spec.Selector)}
}

func pubCoverage(pub *pubObject) coverage {
	if ref := pub.Spec.TargetReference; ref != nil {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil || ref.Kind == "" || ref.Name == "" {
			return coverage{}
		}
		return coverage{target: &workloadKey{group: gv.Group, kind: ref.Kind, namespace: pub.Namespace, name: ref.Name}}
	}
	return coverage{selector: selectorOf(pub.Spec.Selector)}
}

func selectorOf(sel *metav1.LabelSelector) labels.Selector {
	if sel == nil {
		return nil
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil
	}
	return s
}

// workloadLookup finds a workload as it was at some time.
type workloadLookup func(workloadKey) (workload, bool)

func lookupMap(m map[workloadKey]workload) workloadLookup {
	return func(k workloadKey) (workload, bool) {
		w, ok := m[k]
		return w, ok
	}
}

// covers reports whether c covers pod, which is in the budget's namespace;
// workloads resolves owner references.
func (c coverage) covers(pod *corev1.Pod, workloads workloadLookup) bool {
	if c.target != nil {
		return ownedBy(pod, *c.target, workloads)
	}
	return c.selector != nil && c.selector.Matches(labels.Set(pod.Labels))
}

// ownedBy follows the pod's controller reference, and a ReplicaSet's
// controller reference, looking for target.
func ownedBy(pod *corev1.Pod, target workloadKey, workloads workloadLookup) bool {
	ref := metav1.GetControllerOf(pod)
	for depth := 0; ref != nil && depth < 2; depth++ {
		k, ok := ownerKey(pod.Namespace, ref)
		if !ok {
			return false
		}
		w, known := workloads(k)
		if checkedKinds[schema.GroupKind{Group: k.group, Kind: k.kind}] && (!known || w.uid != ref.UID) {
			return false
		}
		if k == target {
			return true
		}
		if k.group != "apps" || k.kind != "ReplicaSet" {
			return false
		}
		ref = w.controller
	}
	return false
}
