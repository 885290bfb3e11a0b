package scenario

import (
	"fmt"
	"strings"

	kruisepolicyv1alpha1 "github.com/openkruise/kruise-api/policy/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	kruisebeta "github.com/budgetguard/budgetguard/apis/kruise/policy/v1beta1"
)

// kindInfo is one kind a scenario may hold.
type kindInfo struct {
	gvk        schema.GroupVersionKind
	namespaced bool
	newObject  func() runtime.Object
	// template returns the pod template of a workload, nil for other kinds.
	template func(runtime.Object) *corev1.PodTemplateSpec
}

var supportedKinds = []kindInfo{
	{gvk: corev1.SchemeGroupVersion.WithKind("Namespace"),
		newObject: func() runtime.Object { return &corev1.Namespace{} }},
	{gvk: corev1.SchemeGroupVersion.WithKind("Node"),
		newObject: func() runtime.Object { return &corev1.Node{} }},
	{gvk: schedulingv1.SchemeGroupVersion.WithKind("PriorityClass"),
		newObject: func() runtime.Object { return &schedulingv1.PriorityClass{} }},
	{gvk: appsv1.SchemeGroupVersion.WithKind("Deployment"), namespaced: true,
		newObject: func() runtime.Object { return &appsv1.Deployment{} },
		template:  func(o runtime.Object) *corev1.PodTemplateSpec { return &o.(*appsv1.Deployment).Spec.Template }},
	{gvk: appsv1.SchemeGroupVersion.WithKind("ReplicaSet"), namespaced: true,
		newObject: func() runtime.Object { return &appsv1.ReplicaSet{} },
		template:  func(o runtime.Object) *corev1.PodTemplateSpec { return &o.(*appsv1.ReplicaSet).Spec.Template }},
	{gvk: appsv1.SchemeGroupVersion.WithKind("StatefulSet"), namespaced: true,
		newObject: func() runtime.Object { return &appsv1.StatefulSet{} },
		template:  func(o runtime.Object) *corev1.PodTemplateSpec { return &o.(*appsv1.StatefulSet).Spec.Template }},
	{gvk: corev1.SchemeGroupVersion.WithKind("Pod"), namespaced: true,
		newObject: func() runtime.Object { return &corev1.Pod{} }},
	{gvk: policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget"), namespaced: true,
		newObject: func() runtime.Object { return &policyv1.PodDisruptionBudget{} }},
	{gvk: kruisepolicyv1alpha1.GroupVersion.WithKind("PodUnavailableBudget"), namespaced: true,
		newObject: func() runtime.Object { return &kruisepolicyv1alpha1.PodUnavailableBudget{} }},
	{gvk: kruisebeta.GroupVersion.WithKind("PodUnavailableBudget"), namespaced: true,
		newObject: func() runtime.Object { return &kruisebeta.PodUnavailableBudget{} }},
}

// SupportedKinds returns the apiVersion and kind of every manifest a
// scenario may hold, in the order docs/scenarios.md lists them.
func SupportedKinds() []schema.GroupVersionKind {
	out := make([]schema.GroupVersionKind, len(supportedKinds))
	for i, k := range supportedKinds {
		out[i] = k.gvk
	}
	return out
}

// Namespaced reports whether objects of the supported kind gvk live in a
// namespace; false for kinds a scenario may not hold.
func Namespaced(gvk schema.GroupVersionKind) bool {
	k, ok := lookupKind(gvk.GroupVersion().String(), gvk.Kind)
	return ok && k.namespaced
}

func lookupKind(apiVersion, kind string) (kindInfo, bool) {
	for _, k := range supportedKinds {
		if k.gvk.Kind == kind && k.gvk.GroupVersion().String() == apiVersion {
			return k, true
		}
	}
	return kindInfo{}, false
}

// kindProblem explains why apiVersion/kind is not supported, naming the
// field to fix and what would be right.
func kindProblem(apiVersion, kind string) (field, detail string) {
	if kind == "" {
		return "kind", "required; want one of " + supportedKindList()
	}
	for _, k := range supportedKinds {
		if k.gvk.Kind == kind {
			return "apiVersion", fmt.Sprintf("%q is not supported for %s; want %q", apiVersion, kind, k.gvk.GroupVersion().String())
		}
	}
	if kind == Kind {
		return "kind", fmt.Sprintf("only the first document may be the %s header", Kind)
	}
	return "kind", fmt.Sprintf("unsupported kind %q; want one of %s", kind, supportedKindList())
}

func supportedKindList() string {
	names := make([]string, len(supportedKinds))
	for i, k := range supportedKinds {
		names[i] = k.gvk.Kind
	}
	return strings.Join(names, ", ")
}

// objectMeta returns the metadata of one of the supported kinds.
func objectMeta(o runtime.Object) metav1.Object {
	if a, ok := o.(metav1.ObjectMetaAccessor); ok {
		return a.GetObjectMeta()
	}
	return nil
}
