package sandbox

import (
	"encoding/json"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestConvertPUBs converts as OpenKruise does: the v1alpha1 annotations
// become v1beta1 fields and back, ignoredPodSelector does not survive
// v1alpha1, and an annotation that does not parse fails the review.
func TestConvertPUBs(t *testing.T) {
	alpha := `{"apiVersion":"policy.kruise.io/v1alpha1","kind":"PodUnavailableBudget",
		"metadata":{"name":"web","namespace":"shop","annotations":{"kruise.io/pub-protect-operations":"DELETE,EVICT","pub.kruise.io/protect-total-replicas":"4"}},
		"spec":{"selector":{"matchLabels":{"app":"web"}},"maxUnavailable":1},"status":{"unavailableAllowed":1,"currentAvailable":4,"desiredAvailable":3,"totalReplicas":4}}`
	beta := `{"apiVersion":"policy.kruise.io/v1beta1","kind":"PodUnavailableBudget","metadata":{"name":"db","namespace":"shop"},
		"spec":{"selector":{"matchLabels":{"app":"db"}},"minAvailable":2,"protectOperations":["EVICT"],"ignoredPodSelector":{"matchLabels":{"track":"canary"}}},
		"status":{"unavailableAllowed":0,"currentAvailable":2,"desiredAvailable":2,"totalReplicas":2}}`
	review := func(want string, objs ...string) *apiextensionsv1.ConversionResponse {
		req := &apiextensionsv1.ConversionRequest{UID: "u", DesiredAPIVersion: want}
		for _, o := range objs {
			req.Objects = append(req.Objects, runtime.RawExtension{Raw: []byte(o)})
		}
		return convertPUBs(req)
	}
	decode := func(t *testing.T, raw []byte) map[string]any {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}

	resp := review("policy.kruise.io/v1beta1", alpha, beta)
	if resp.Result.Status != metav1.StatusSuccess || len(resp.ConvertedObjects) != 2 || resp.UID != "u" {
		t.Fatalf("to v1beta1: %+v", resp)
	}
	up := decode(t, resp.ConvertedObjects[0].Raw)
	spec := up["spec"].(map[string]any)
	if up["apiVersion"] != "policy.kruise.io/v1beta1" || spec["protectTotalReplicas"] != float64(4) ||
		len(spec["protectOperations"].([]any)) != 2 || up["status"].(map[string]any)["desiredAvailable"] != float64(3) {
		t.Errorf("v1alpha1 to v1beta1: %s", resp.ConvertedObjects[0].Raw)
	}
	if got := decode(t, resp.ConvertedObjects[1].Raw)["spec"].(map[string]any); got["ignoredPodSelector"] == nil {
		t.Errorf("v1beta1 to v1beta1 lost ignoredPodSelector: %s", resp.ConvertedObjects[1].Raw)
	}

	resp = review("policy.kruise.io/v1alpha1", beta)
	if resp.Result.Status != metav1.StatusSuccess || len(resp.ConvertedObjects) != 1 {
		t.Fatalf("to v1alpha1: %+v", resp)
	}
	down := decode(t, resp.ConvertedObjects[0].Raw)
	if down["apiVersion"] != "policy.kruise.io/v1alpha1" ||
		down["metadata"].(map[string]any)["annotations"].(map[string]any)["kruise.io/pub-protect-operations"] != "EVICT" {
		t.Errorf("v1beta1 to v1alpha1: %s", resp.ConvertedObjects[0].Raw)
	}
	if s := down["spec"].(map[string]any); s["ignoredPodSelector"] != nil || s["protectOperations"] != nil {
		t.Errorf("v1alpha1 holds v1beta1's fields: %s", resp.ConvertedObjects[0].Raw)
	}

	bad := strings.Replace(alpha, "DELETE,EVICT", "DELETE,KILL", 1)
	if resp := review("policy.kruise.io/v1beta1", bad); resp.Result.Status != metav1.StatusFailure ||
		!strings.Contains(resp.Result.Message, "kruise.io/pub-protect-operations") || resp.ConvertedObjects != nil {
		t.Errorf("an annotation that does not parse: %+v", resp)
	}
}
