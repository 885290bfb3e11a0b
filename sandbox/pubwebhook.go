package sandbox

import (
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	kruisepub "github.com/openkruise/kruise-api/apps/pub"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	kruisebeta "github.com/budgetguard/budgetguard/apis/kruise/policy/v1beta1"
)

// This file decides what OpenKruise's pod webhooks decide about
// PodUnavailableBudgets (kruise master 07169cfac:
// pkg/webhook/pod/validating/pod_unavailable_budget.go,
// pkg/webhook/pod/mutating/pod_unavailable_budget.go and
// pkg/control/pubcontrol/pub_control_utils.go). pubwebhook_server.go serves
// it to kube-apiserver when Options.PUBWebhook is on. It reads PUBs at
// policy.kruise.io/v1beta1, as kruise's webhook does (pubclient.go). Like the
// status simulation in pubstatus.go, it stands in for an external component
// and shares no code with budgetguard's own rules in plugins/budget, but for
// the test of whether a pod's spec and status are consistent
// (budget.PodStateConsistent, kruise's IsPodStateConsistent).

// Pod annotations kruise's webhooks read and write.
const (
	// pubRelatedAnnotation names, on a pod, the PUB kruise's mutating
	// webhook tied it to at creation; the validating webhook finds a pod's
	// PUB only through it.
	pubRelatedAnnotation = "pub.kruise.io/related-pub"
	// pubRelatedAnnotationDeprecated is its older name, which kruise
	// writes too and still reads when the newer one is absent.
	pubRelatedAnnotationDeprecated = "kruise.io/related-pub"
)

// pubMaxUnavailablePods is kruise's MaxUnavailablePodSize: the most entries
// disruptedPods and unavailablePods may hold together before the webhook
// refuses more.
const pubMaxUnavailablePods = 2000

// pubResource is the resource kruise names in its refusals
// (policyv1beta1.Resource("podunavailablebudget")), so the message reads
// podunavailablebudget.policy.kruise.io "<name>" is forbidden: ….
var pubResource = schema.GroupResource{Group: "policy.kruise.io", Resource: "podunavailablebudget"}

// relatedPUBName is kruise's GetPodRelatedPubName: the newer annotation,
// else the deprecated one; "" when neither is set.
func relatedPUBName(pod *corev1.Pod) string {
	if name := pod.Annotations[pubRelatedAnnotation]; name != "" {
		return name
	}
	return pod.Annotations[pubRelatedAnnotationDeprecated]
}

// pubWorkloadRef is the workload kruise's controller finder resolves a pod's
// controller to (a ReplicaSet of a Deployment resolves to the Deployment).
type pubWorkloadRef struct {
	APIVersion, Kind, Name string
}

// pubForNewPod is kruise's GetPubForPod of its mutating webhook: the first
// PUB of pubs (the PUBs of the pod's namespace) that names workload in
// spec.targetRef (API group, kind and name compared), or, for a PUB
// without targetRef or a pod without a workload, whose spec.selector
// matches the pod's labels (a nil, empty or invalid selector matches
// nothing). workload is nil for a pod without a controller or one kruise
// cannot resolve. Kruise takes the first of its cache's list, in no
// defined order; callers pass pubs sorted by name, so the sandbox is
// deterministic where kruise is not.
func pubForNewPod(pod *corev1.Pod, workload *pubWorkloadRef, pubs []*kruisebeta.PodUnavailableBudget) *kruisebeta.PodUnavailableBudget {
	for _, pub := range pubs {
		if ref := pub.Spec.TargetReference; ref != nil && workload != nil {
			if sameGroupKindName(ref.APIVersion, ref.Kind, ref.Name, *workload) {
				return pub
			}
			continue
		}
		// Kruise reaches here also for a PUB with targetRef when the pod
		// has no workload: its selector (usually nil) decides.
		if pub.Spec.Selector == nil {
			continue
		}
		if len(pub.Spec.Selector.MatchLabels)+len(pub.Spec.Selector.MatchExpressions) == 0 {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(pub.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		return pub
	}
	return nil
}

// sameGroupKindName is kruise's IsReferenceEqual: API group, kind and name
// equal, the version ignored; an unparsable apiVersion equals nothing.
func sameGroupKindName(apiVersion, kind, name string, w pubWorkloadRef) bool {
	gv1, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return false
	}
	gv2, err := schema.ParseGroupVersion(w.APIVersion)
	if err != nil {
		return false
	}
	return gv1.Group == gv2.Group && kind == w.Kind && name == w.Name
}

// withRelatedPUB is kruise's SetPodRelatedPubAnnotation: it returns a copy
// of annotations with both related-pub annotations set to name.
func withRelatedPUB(annotations map[string]string, name string) map[string]string {
	out := maps.Clone(annotations)
	if out == nil {
		out = map[string]string{}
	}
	out[pubRelatedAnnotation] = name
	out[pubRelatedAnnotationDeprecated] = name
	return out
}

// pubPodExempt reports whether kruise's PodUnavailableBudgetValidatePod
// admits pod before it reads any PUB: the pod carries
// pub.kruise.io/no-protect set to a true value, or it does not count as
// available (pubPodAvailable: not Running and Ready, terminating, labelled
// unavailable-pod.kruise.io/, or its spec and status not consistent), so
// nothing is spent.
func pubPodExempt(pod *corev1.Pod) bool {
	if allow, err := strconv.ParseBool(pod.Annotations[kruisebeta.PodPubNoProtectionAnnotation]); err == nil && allow {
		return true
	}
	return !pubPodAvailable(pod)
}

// pubProtects is kruise's isNeedPubProtection (getPubProtectOperations):
// the operations of spec.protectOperations; when it is empty, those of the
// kruise.io/pub-protect-operations annotation (comma separated, empty
// items skipped, compared as written, without trimming spaces); when that
// lists none, DELETE, UPDATE and EVICT.
func pubProtects(pub *kruisebeta.PodUnavailableBudget, op kruisebeta.PubOperation) bool {
	if len(pub.Spec.ProtectOperations) > 0 {
		for _, o := range pub.Spec.ProtectOperations {
			if o == op {
				return true
			}
		}
		return false
	}
	listed := false
	for _, item := range strings.Split(pub.Annotations[kruisebeta.PubProtectOperationAnnotation], ",") {
		if item == "" {
			continue
		}
		listed = true
		if kruisebeta.PubOperation(item) == op {
			return true
		}
	}
	if listed {
		return false
	}
	switch op {
	case kruisebeta.PubDeleteOperation, kruisebeta.PubUpdateOperation, kruisebeta.PubEvictOperation:
		return true
	}
	return false
}

// pubIgnores is kruise's isPodMatchedIgnoredPubSelector: whether pub's
// spec.ignoredPodSelector selects pod. A nil or empty selector selects
// nothing; one that is not valid is an error, with which kruise answers
// the request (a 400).
func pubIgnores(pub *kruisebeta.PodUnavailableBudget, pod *corev1.Pod) (bool, error) {
	if pub.Spec.IgnoredPodSelector == nil {
		return false, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(pub.Spec.IgnoredPodSelector)
	if err != nil {
		return false, fmt.Errorf("podunavailablebudget %s/%s: spec.ignoredPodSelector: %w", pub.Namespace, pub.Name, err)
	}
	if sel.Empty() {
		return false, nil
	}
	return sel.Matches(labels.Set(pod.Labels)), nil
}

// pubAdmitsFree reports whether kruise admits op on pod under pub without
// spending anything, the checks of PodUnavailableBudgetValidatePod that
// come before its status update, in kruise's order: pub's
// spec.ignoredPodSelector selects pod, pub wants no pod available
// (status.desiredAvailable 0), does not protect op, or already records pod
// in status.disruptedPods or status.unavailablePods. An
// ignoredPodSelector that is not valid is an error. The caller checks
// pubPodExempt first.
func pubAdmitsFree(pub *kruisebeta.PodUnavailableBudget, pod *corev1.Pod, op kruisebeta.PubOperation) (bool, error) {
	if ignored, err := pubIgnores(pub, pod); err != nil || ignored {
		return ignored, err
	}
	if pub.Status.DesiredAvailable == 0 || !pubProtects(pub, op) {
		return true, nil
	}
	_, disrupted := pub.Status.DisruptedPods[pod.Name]
	_, unavailable := pub.Status.UnavailablePods[pod.Name]
	return disrupted || unavailable, nil
}

// pubSpend is kruise's checkAndDecrement: it returns a copy of pub with the
// disruption of the pod podName by op recorded at now (in
// status.unavailablePods for UPDATE, else in status.disruptedPods) and
// status.unavailableAllowed one lower, or kruise's 403 when the PUB allows
// nothing or its entries are full. The caller writes the copy with pub's
// resourceVersion.
func pubSpend(pub *kruisebeta.PodUnavailableBudget, podName string, op kruisebeta.PubOperation, now time.Time) (*kruisebeta.PodUnavailableBudget, error) {
	st := &pub.Status
	if st.UnavailableAllowed <= 0 {
		return nil, apierrors.NewForbidden(pubResource, pub.Name, fmt.Errorf("pub unavailable allowed is negative"))
	}
	if len(st.DisruptedPods)+len(st.UnavailablePods) > pubMaxUnavailablePods {
		return nil, apierrors.NewForbidden(pubResource, pub.Name, fmt.Errorf("DisruptedPods and UnavailablePods map too big - too many unavailable not confirmed by PUB controller"))
	}
	out := pub.DeepCopy()
	st = &out.Status
	st.UnavailableAllowed--
	if st.DisruptedPods == nil {
		st.DisruptedPods = map[string]metav1.Time{}
	}
	if st.UnavailablePods == nil {
		st.UnavailablePods = map[string]metav1.Time{}
	}
	if op == kruisebeta.PubUpdateOperation {
		st.UnavailablePods[podName] = metav1.NewTime(now)
	} else {
		st.DisruptedPods[podName] = metav1.NewTime(now)
	}
	return out, nil
}

// pubUpdateMayDisrupt is kruise's IsPodUnavailableChanged: an update of a
// pod can make it unavailable when it changes the spec or adds an
// unavailable-pod.kruise.io/ label. Kruise checks updates only with its
// PodUnavailableBudgetUpdateGate feature gate, off by default.
func pubUpdateMayDisrupt(oldPod, newPod *corev1.Pod) bool {
	if !apiequality.Semantic.DeepEqual(oldPod.Spec, newPod.Spec) {
		return true
	}
	return !hasUnavailableLabel(oldPod.Labels) && hasUnavailableLabel(newPod.Labels)
}

func hasUnavailableLabel(l map[string]string) bool {
	for key := range l {
		if strings.HasPrefix(key, kruisepub.PubUnavailablePodLabelPrefix) {
			return true
		}
	}
	return false
}
