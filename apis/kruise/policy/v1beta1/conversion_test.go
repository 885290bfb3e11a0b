package v1beta1

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	kruisev1alpha1 "github.com/openkruise/kruise-api/policy/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func alphaPUB(annotations map[string]string) *kruisev1alpha1.PodUnavailableBudget {
	maxUnavailable := intstr.FromInt32(1)
	return &kruisev1alpha1.PodUnavailableBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy.kruise.io/v1alpha1", Kind: "PodUnavailableBudget"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", Annotations: annotations, ResourceVersion: "7", Generation: 2},
		Spec: kruisev1alpha1.PodUnavailableBudgetSpec{
			TargetReference: &kruisev1alpha1.TargetReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MaxUnavailable:  &maxUnavailable,
		},
		Status: kruisev1alpha1.PodUnavailableBudgetStatus{
			ObservedGeneration: 2, UnavailableAllowed: 1, CurrentAvailable: 3, DesiredAvailable: 2, TotalReplicas: 3,
			DisruptedPods: map[string]metav1.Time{"web-0": {}},
		},
	}
}

// TestFromV1alpha1PromotesAnnotations: the v1alpha1 annotations become the
// v1beta1 fields, as Kruise's conversion does, and the rest is unchanged.
func TestFromV1alpha1PromotesAnnotations(t *testing.T) {
	src := alphaPUB(map[string]string{
		PubProtectOperationAnnotation:     "DELETE, EVICT,",
		PubProtectTotalReplicasAnnotation: "5",
	})
	before := src.DeepCopy()
	got, err := FromV1alpha1(src)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, src); diff != "" {
		t.Errorf("FromV1alpha1 changed its argument (-before,+after):\n%s", diff)
	}
	if diff := cmp.Diff([]PubOperation{PubDeleteOperation, PubEvictOperation}, got.Spec.ProtectOperations); diff != "" {
		t.Errorf("protectOperations (-want,+got):\n%s", diff)
	}
	if got.Spec.ProtectTotalReplicas == nil || *got.Spec.ProtectTotalReplicas != 5 {
		t.Errorf("protectTotalReplicas = %v, want 5", got.Spec.ProtectTotalReplicas)
	}
	if got.APIVersion != "policy.kruise.io/v1beta1" || got.Spec.TargetReference.Name != "web" || got.Status.UnavailableAllowed != 1 ||
		got.Status.DesiredAvailable != 2 || len(got.Status.DisruptedPods) != 1 || got.ResourceVersion != "7" {
		t.Errorf("FromV1alpha1 lost a field: %+v", got)
	}
}

// TestFromV1alpha1KeepsAnUnparsableAnnotation: where Kruise's conversion
// would fail, the object comes back with the field unset and an error that
// names the annotation.
func TestFromV1alpha1KeepsAnUnparsableAnnotation(t *testing.T) {
	for _, tc := range []struct {
		annotation, value string
	}{
		{PubProtectOperationAnnotation, "DELETE,KILL"},
		{PubProtectTotalReplicasAnnotation, "many"},
	} {
		got, err := FromV1alpha1(alphaPUB(map[string]string{tc.annotation: tc.value}))
		if err == nil || !strings.Contains(err.Error(), tc.annotation) || !strings.Contains(err.Error(), "shop/web") {
			t.Errorf("%s=%q: error %v, want one naming the annotation and the PUB", tc.annotation, tc.value, err)
		}
		if got == nil || got.Spec.ProtectOperations != nil || got.Spec.ProtectTotalReplicas != nil || got.Annotations[tc.annotation] != tc.value {
			t.Errorf("%s=%q: got %+v, want the fields unset and the annotation kept", tc.annotation, tc.value, got)
		}
	}
}

// TestToV1alpha1WritesAnnotations: the fields go back into annotations,
// stale annotations go, and ignoredPodSelector, which v1alpha1 cannot say,
// is dropped.
func TestToV1alpha1WritesAnnotations(t *testing.T) {
	beta, err := FromV1alpha1(alphaPUB(map[string]string{PubProtectTotalReplicasAnnotation: "4", "other": "x"}))
	if err != nil {
		t.Fatal(err)
	}
	beta.Spec.ProtectOperations = []PubOperation{PubEvictOperation, PubResizeOperation}
	beta.Spec.ProtectTotalReplicas = nil
	beta.Spec.IgnoredPodSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"canary": "true"}}
	got := ToV1alpha1(beta)
	want := map[string]string{PubProtectOperationAnnotation: "EVICT,RESIZE", "other": "x"}
	if diff := cmp.Diff(want, got.Annotations); diff != "" {
		t.Errorf("annotations (-want,+got):\n%s", diff)
	}
	if beta.Annotations[PubProtectTotalReplicasAnnotation] != "4" {
		t.Error("ToV1alpha1 changed its argument's annotations")
	}
	back, err := FromV1alpha1(got)
	if err != nil {
		t.Fatal(err)
	}
	beta.Spec.IgnoredPodSelector = nil
	beta.Annotations = want
	if diff := cmp.Diff(beta, back); diff != "" {
		t.Errorf("v1beta1 -> v1alpha1 -> v1beta1 (-want,+got):\n%s", diff)
	}
}
