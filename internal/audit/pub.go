package audit

import (
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// pubObject is what the auditor reads of an OpenKruise PodUnavailableBudget,
// at policy.kruise.io/v1beta1 where it is served and v1alpha1 otherwise: the
// fields of both versions that decide which pods it covers, which
// disruptions its webhook exempts, and what its controller counted. The
// auditor decodes PUBs itself, with no budgetguard type.
type pubObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector        *metav1.LabelSelector `json:"selector,omitempty"`
		TargetReference *struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Name       string `json:"name"`
		} `json:"targetRef,omitempty"`
		// v1beta1 only.
		ProtectOperations  []string              `json:"protectOperations,omitempty"`
		IgnoredPodSelector *metav1.LabelSelector `json:"ignoredPodSelector,omitempty"`
	} `json:"spec"`
	Status struct {
		ObservedGeneration int64                  `json:"observedGeneration,omitempty"`
		DisruptedPods      map[string]metav1.Time `json:"disruptedPods,omitempty"`
		UnavailablePods    map[string]metav1.Time `json:"unavailablePods,omitempty"`
		UnavailableAllowed int32                  `json:"unavailableAllowed"`
		CurrentAvailable   int32                  `json:"currentAvailable"`
		DesiredAvailable   int32                  `json:"desiredAvailable"`
	} `json:"status,omitempty"`
}

// OpenKruise's names (kruise-api policy/v1alpha1 and v1beta1).
const (
	pubProtectOperationsAnnotation = "kruise.io/pub-protect-operations"
	pubNoProtectAnnotation         = "pub.kruise.io/no-protect"
	// A pod with a label of this prefix is unavailable to every PUB
	// (pkg/control/pubcontrol: IsPodUnavailableChanged, PodUnavailableLabel).
	pubUnavailableLabelPrefix = "unavailable-pod.kruise.io/"
)

// decodePUB reads a PUB as the dynamic informer delivers it.
func decodePUB(u *unstructured.Unstructured) (*pubObject, error) {
	raw, err := json.Marshal(u.Object)
	if err != nil {
		return nil, err
	}
	var p pubObject
	if err := json.Unmarshal(raw, &p); err != nil {
		// json.Unmarshal fills what it can before a field of the wrong
		// type: keep that.
		return &p, fmt.Errorf("podunavailablebudget %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return &p, nil
}

var pubResource = schema.GroupResource{Group: pubGroup, Resource: "podunavailablebudgets"}

// pubExemption is what OpenKruise's PUB webhook lets go without consulting
// the budget (pkg/webhook/pod/validating/pod_unavailable_budget.go and
// pkg/control/pubcontrol/pub_control_utils.go, PodUnavailableBudgetValidatePod):
// a pod annotated pub.kruise.io/no-protect, an operation the budget does
// not protect (spec.protectOperations, or the kruise.io/pub-protect-operations
// annotation; all of DELETE, UPDATE and EVICT when neither is set), and a pod
// that spec.ignoredPodSelector selects.
type pubExemption struct {
	protects map[Action]bool // nil: every operation
	ignored  labels.Selector // nil: none
}

func pubExemptionOf(p *pubObject) pubExemption {
	var e pubExemption
	ops := p.Spec.ProtectOperations
	if len(ops) == 0 {
		if v := p.Annotations[pubProtectOperationsAnnotation]; v != "" {
			ops = strings.Split(v, ",")
		}
	}
	if len(ops) > 0 {
		e.protects = map[Action]bool{}
		for _, op := range ops {
			switch strings.TrimSpace(op) {
			case "DELETE":
				e.protects[ActionDelete] = true
			case "EVICT":
				e.protects[ActionEvict] = true
			}
		}
	}
	if sel := p.Spec.IgnoredPodSelector; sel != nil {
		// Kruise's webhook answers an invalid selector with an error (the
		// request is refused), and an empty one selects nothing there.
		if s, err := metav1.LabelSelectorAsSelector(sel); err == nil && !s.Empty() {
			e.ignored = s
		}
	}
	return e
}

// exempts reports whether Kruise's webhook lets action on pod go free.
func (e pubExemption) exempts(pod *corev1.Pod, action Action) bool {
	if pod.Annotations[pubNoProtectAnnotation] == "true" {
		return true
	}
	if e.protects != nil && !e.protects[action] {
		return true
	}
	return e.ignored != nil && e.ignored.Matches(labels.Set(pod.Labels))
}

// pubAvailable is what OpenKruise's PUB controller counts as available
// (pkg/control/pubcontrol/pub_control.go, IsPodReady and
// IsPodStateConsistent; pkg/controller/podunavailablebudget): Running and
// Ready, not terminating, no unavailable-pod.kruise.io/ label, and its spec
// and status consistent: every container that reports a status runs the
// image its spec names (the auditor's own, simpler check: the in-place
// update annotations that Kruise also reads are not used in the sandbox).
func pubAvailable(pod *corev1.Pod) bool {
	if !podHealthy(pod) || pod.Status.Phase != corev1.PodRunning {
		return false
	}
	for k := range pod.Labels {
		if strings.HasPrefix(k, pubUnavailableLabelPrefix) {
			return false
		}
	}
	for _, c := range pod.Spec.Containers {
		for _, s := range pod.Status.ContainerStatuses {
			if s.Name == c.Name && !sameImage(c.Image, s.Image, s.ImageID) {
				return false
			}
		}
	}
	return true
}

// sameImage compares a spec image with the image a container status
// reports: a digest against the status's imageID, a name against the
// status's image, docker.io/library/ and :latest as the kubelet fills them in.
func sameImage(spec, image, imageID string) bool {
	if i := strings.Index(spec, "@"); i >= 0 {
		return strings.HasSuffix(imageID, spec[i:]) || strings.HasSuffix(image, spec[i:])
	}
	return normalImage(spec) == normalImage(image)
}

func normalImage(s string) string {
	if s == "" {
		return s
	}
	name := s
	if !strings.Contains(name[strings.LastIndex(name, "/")+1:], ":") {
		name += ":latest"
	}
	first, _, found := strings.Cut(name, "/")
	switch {
	case !found:
		name = "docker.io/library/" + name
	case !strings.ContainsAny(first, ".:") && first != "localhost":
		name = "docker.io/" + name
	}
	return name
}
