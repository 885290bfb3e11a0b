package sandbox

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	kruisebeta "github.com/budgetguard/budgetguard/apis/kruise/policy/v1beta1"
	"github.com/budgetguard/budgetguard/internal/testobj"
)

// deleteRequest is the AdmissionRequest of a delete of pod.
func deleteRequest(t *testing.T, pod *corev1.Pod, dryRun bool) *admissionv1.AdmissionRequest {
	t.Helper()
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	opts := metav1.DeleteOptions{}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	rawOpts, err := json.Marshal(opts)
	if err != nil {
		t.Fatal(err)
	}
	return &admissionv1.AdmissionRequest{
		Operation: admissionv1.Delete, Namespace: pod.Namespace, Name: pod.Name,
		Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		OldObject: runtime.RawExtension{Raw: raw}, Options: runtime.RawExtension{Raw: rawOpts},
	}
}

// TestPUBWebhookValidateDelete runs the validating handler on fake clients:
// a status update that meets a conflict re-reads the PUB and decides on the
// new status (here: another pod took the last unavailable pod meanwhile,
// so it refuses); a dry run writes nothing; an untied pod is not looked at.
func TestPUBWebhookValidateDelete(t *testing.T) {
	logger, ctx := ktesting.NewTestContext(t)
	now := time.Now()
	tied := webPod("a").Annotation(pubRelatedAnnotation, "web").Obj()

	tests := []struct {
		name string
		pod  *corev1.Pod
		// conflict makes the first status update fail with a conflict,
		// after writing newer, as a concurrent writer would.
		conflict   *testobj.PUBWrapper
		dryRun     bool
		wantDenied string // "" when admitted
		wantWrites int
		wantStatus *testobj.PUBWrapper
	}{{
		name:       "admitted and recorded",
		pod:        tied,
		wantWrites: 1,
		wantStatus: webPUB().Status(3, 2, 0).Disrupted(now, "a").Unavailable(now),
	}, {
		name:       "conflict: re-read shows the budget spent",
		pod:        tied,
		conflict:   webPUB().Status(3, 2, 0).Disrupted(now, "b"),
		wantDenied: `podunavailablebudget.policy.kruise.io "web" is forbidden: pub unavailable allowed is negative`,
		wantWrites: 1,
		wantStatus: webPUB().Status(3, 2, 0).Disrupted(now, "b"),
	}, {
		name:       "conflict: re-read still allows one",
		pod:        tied,
		conflict:   webPUB().Status(4, 2, 2).Disrupted(now, "b"),
		wantWrites: 2,
		wantStatus: webPUB().Status(4, 2, 1).Disrupted(now, "a", "b").Unavailable(now),
	}, {
		name:       "dry run",
		pod:        tied,
		dryRun:     true,
		wantStatus: webPUB().Status(3, 2, 1),
	}, {
		name:       "not tied to a PUB",
		pod:        webPod("a").Obj(),
		wantStatus: webPUB().Status(3, 2, 1),
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pubs := newFakePUBs(t, webPUB().Status(3, 2, 1))
			first := true
			pubs.beforeStatusUpdate = func(*kruisebeta.PodUnavailableBudget) error {
				if first && tc.conflict != nil {
					first = false
					pubs.set(betaPUB(t, tc.conflict))
					return apierrors.NewConflict(pubResource, "web", nil)
				}
				return nil
			}
			w := &pubWebhook{client: kubefake.NewClientset(), pubs: pubs, logger: logger, now: func() time.Time { return now }}

			resp := w.validate(ctx, deleteRequest(t, tc.pod, tc.dryRun))
			switch {
			case tc.wantDenied == "" && !resp.Allowed:
				t.Errorf("refused with %+v, want admitted", resp.Result)
			case tc.wantDenied != "" && (resp.Allowed || resp.Result == nil || resp.Result.Code != 403 || !strings.Contains(resp.Result.Message, tc.wantDenied)):
				t.Errorf("response %+v, want a 403 with %q", resp.Result, tc.wantDenied)
			}
			if n := pubs.statusUpdateCount(); n != tc.wantWrites {
				t.Errorf("%d status updates, want %d", n, tc.wantWrites)
			}
			got, err := pubs.Get(context.Background(), pubTestNamespace, "web")
			if err != nil {
				t.Fatal(err)
			}
			if want := betaPUB(t, tc.wantStatus).Status; !statusEqual(got.Status, want) {
				t.Errorf("status %+v, want %+v", got.Status, want)
			}
		})
	}
}

// statusEqual compares statuses by their counts and the pods their entries
// name; nil and empty maps are equal.
func statusEqual(a, b kruisebeta.PodUnavailableBudgetStatus) bool {
	names := func(m map[string]metav1.Time) string {
		return strings.Join(slices.Sorted(maps.Keys(m)), ",")
	}
	return countsOf(a) == countsOf(b) && names(a.DisruptedPods) == names(b.DisruptedPods) && names(a.UnavailablePods) == names(b.UnavailablePods)
}

// TestPUBWebhookMutate ties a pod of a ReplicaSet of a Deployment to the PUB
// whose targetRef names the Deployment, and leaves a pod no PUB covers
// alone.
func TestPUBWebhookMutate(t *testing.T) {
	logger, ctx := ktesting.NewTestContext(t)
	deploy := testobj.MakeDeployment().Namespace(pubTestNamespace).Name("web").UID("d-uid").Obj()
	rs := testobj.MakeReplicaSet().Namespace(pubTestNamespace).Name("web-1").UID("rs-uid").
		OwnedBy("apps/v1", "Deployment", "web", "d-uid").Obj()
	w := &pubWebhook{
		client: kubefake.NewClientset(deploy, rs),
		pubs:   newFakePUBs(t, webPUB().TargetRef("apps/v1", "Deployment", "web")),
		logger: logger, now: time.Now,
	}
	create := func(pod *corev1.Pod) *admissionv1.AdmissionResponse {
		raw, err := json.Marshal(pod)
		if err != nil {
			t.Fatal(err)
		}
		return w.mutate(ctx, &admissionv1.AdmissionRequest{
			Operation: admissionv1.Create, Namespace: pubTestNamespace,
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Object:   runtime.RawExtension{Raw: raw},
		})
	}

	resp := create(webPod("a").OwnedBy("apps/v1", "ReplicaSet", "web-1", "rs-uid").Annotation("x", "y").Obj())
	want := `[{"op":"add","path":"/metadata/annotations","value":{"kruise.io/related-pub":"web","pub.kruise.io/related-pub":"web","x":"y"}}]`
	if !resp.Allowed || string(resp.Patch) != want {
		t.Errorf("pod of the Deployment: allowed %v, patch %s; want allowed with %s", resp.Allowed, resp.Patch, want)
	}
	resp = create(webPod("b").Obj())
	if !resp.Allowed || resp.Patch != nil {
		t.Errorf("bare pod: allowed %v, patch %s; want allowed, no patch", resp.Allowed, resp.Patch)
	}
}

// evictionRequest is the AdmissionRequest of an eviction of the pod name.
func evictionRequest(t *testing.T, name string) *admissionv1.AdmissionRequest {
	t.Helper()
	raw, err := json.Marshal(map[string]any{"apiVersion": "policy/v1", "kind": "Eviction", "metadata": map[string]string{"name": name, "namespace": pubTestNamespace}})
	if err != nil {
		t.Fatal(err)
	}
	return &admissionv1.AdmissionRequest{
		Operation: admissionv1.Create, Namespace: pubTestNamespace, Name: name, SubResource: "eviction",
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Object:   runtime.RawExtension{Raw: raw},
	}
}

// TestPUBWebhookDecidesOnV1beta1 runs the validating handler on a PUB that
// allows nothing, with the fields of policy.kruise.io/v1beta1 that
// OpenKruise's webhook reads: a pod that spec.ignoredPodSelector selects may
// be deleted and evicted without a record, the PUB's other pods get
// kruise's 403; spec.protectOperations leaves the operations it does not
// list free; an ignoredPodSelector that is not valid answers an error, as
// kruise's does; a pod whose spec and status are not consistent goes free.
func TestPUBWebhookDecidesOnV1beta1(t *testing.T) {
	logger, ctx := ktesting.NewTestContext(t)
	const refusal = `podunavailablebudget.policy.kruise.io "web" is forbidden: pub unavailable allowed is negative`
	tie := func(w *testobj.PodWrapper) *testobj.PodWrapper { return w.Annotation(pubRelatedAnnotation, "web") }
	canary := tie(webPod("canary").Label("track", "canary")).Obj()
	stable := tie(webPod("stable").Label("track", "stable")).Obj()
	updating := tie(webPod("updating").Container("app", "").Annotation("apps.kruise.io/inplace-update-grace", "{}")).Obj()
	ignoreCanary := func(s *kruisebeta.PodUnavailableBudgetSpec) {
		s.IgnoredPodSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"track": "canary"}}
	}
	tests := []struct {
		name      string
		edit      func(*kruisebeta.PodUnavailableBudgetSpec)
		pod       *corev1.Pod
		evict     bool
		wantCode  int32 // 0 when admitted
		wantInMsg string
	}{
		{name: "delete of an ignored pod", edit: ignoreCanary, pod: canary},
		{name: "eviction of an ignored pod", edit: ignoreCanary, pod: canary, evict: true},
		{name: "delete of a pod not ignored", edit: ignoreCanary, pod: stable, wantCode: 403, wantInMsg: refusal},
		{name: "eviction of a pod not ignored", edit: ignoreCanary, pod: stable, evict: true, wantCode: 403, wantInMsg: refusal},
		{name: "protectOperations EVICT: a delete goes free",
			edit: func(s *kruisebeta.PodUnavailableBudgetSpec) {
				s.ProtectOperations = []kruisebeta.PubOperation{kruisebeta.PubEvictOperation}
			},
			pod: stable},
		{name: "protectOperations EVICT: an eviction is refused",
			edit: func(s *kruisebeta.PodUnavailableBudgetSpec) {
				s.ProtectOperations = []kruisebeta.PubOperation{kruisebeta.PubEvictOperation}
			},
			pod: stable, evict: true, wantCode: 403, wantInMsg: refusal},
		{name: "ignoredPodSelector that is not valid",
			edit: func(s *kruisebeta.PodUnavailableBudgetSpec) {
				s.IgnoredPodSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "track", Operator: "Near"}}}
			},
			pod: canary, wantCode: 400, wantInMsg: "spec.ignoredPodSelector"},
		{name: "a pod updating in place goes free", edit: func(*kruisebeta.PodUnavailableBudgetSpec) {}, pod: updating},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pub := betaPUB(t, webPUB().MatchLabels("app", "web").Status(3, 3, 0))
			tc.edit(&pub.Spec)
			pubs := newFakePUBs(t)
			pubs.set(pub)
			w := &pubWebhook{client: kubefake.NewClientset(tc.pod), pubs: pubs, logger: logger, now: time.Now}
			req := deleteRequest(t, tc.pod, false)
			if tc.evict {
				req = evictionRequest(t, tc.pod.Name)
			}
			resp := w.validate(ctx, req)
			switch {
			case tc.wantCode == 0 && !resp.Allowed:
				t.Errorf("refused with %+v, want admitted", resp.Result)
			case tc.wantCode != 0 && (resp.Allowed || resp.Result == nil || resp.Result.Code != tc.wantCode || !strings.Contains(resp.Result.Message, tc.wantInMsg)):
				t.Errorf("response allowed=%v %+v, want a %d with %q", resp.Allowed, resp.Result, tc.wantCode, tc.wantInMsg)
			}
			if n := pubs.statusUpdateCount(); n != 0 {
				t.Errorf("%d status updates, want none", n)
			}
		})
	}
}
