package sandbox

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	kruisefake "github.com/openkruise/kruise-api/client/clientset/versioned/fake"
	policyv1alpha1 "github.com/openkruise/kruise-api/policy/v1alpha1"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"

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
		conflict   *policyv1alpha1.PodUnavailableBudget
		dryRun     bool
		wantDenied string // "" when admitted
		wantWrites int
		wantStatus policyv1alpha1.PodUnavailableBudgetStatus
	}{{
		name:       "admitted and recorded",
		pod:        tied,
		wantWrites: 1,
		wantStatus: webPUB().Status(3, 2, 0).Disrupted(now, "a").Unavailable(now).Obj().Status,
	}, {
		name:       "conflict: re-read shows the budget spent",
		pod:        tied,
		conflict:   webPUB().Status(3, 2, 0).Disrupted(now, "b").Obj(),
		wantDenied: `podunavailablebudget.policy.kruise.io "web" is forbidden: pub unavailable allowed is negative`,
		wantWrites: 1,
		wantStatus: webPUB().Status(3, 2, 0).Disrupted(now, "b").Obj().Status,
	}, {
		name:       "conflict: re-read still allows one",
		pod:        tied,
		conflict:   webPUB().Status(4, 2, 2).Disrupted(now, "b").Obj(),
		wantWrites: 2,
		wantStatus: webPUB().Status(4, 2, 1).Disrupted(now, "a", "b").Unavailable(now).Obj().Status,
	}, {
		name:       "dry run",
		pod:        tied,
		dryRun:     true,
		wantStatus: webPUB().Status(3, 2, 1).Obj().Status,
	}, {
		name:       "not tied to a PUB",
		pod:        webPod("a").Obj(),
		wantStatus: webPUB().Status(3, 2, 1).Obj().Status,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kruise := kruisefake.NewSimpleClientset(webPUB().Status(3, 2, 1).Obj())
			writes := 0
			kruise.PrependReactor("update", "podunavailablebudgets", func(action clienttesting.Action) (bool, runtime.Object, error) {
				if action.GetSubresource() != "status" {
					return false, nil, nil
				}
				writes++
				if writes == 1 && tc.conflict != nil {
					if err := kruise.Tracker().Update(action.GetResource(), tc.conflict, pubTestNamespace); err != nil {
						t.Fatal(err)
					}
					return true, nil, apierrors.NewConflict(pubResource, "web", nil)
				}
				return false, nil, nil
			})
			w := &pubWebhook{client: kubefake.NewClientset(), kruise: kruise, logger: logger, now: func() time.Time { return now }}

			resp := w.validate(ctx, deleteRequest(t, tc.pod, tc.dryRun))
			switch {
			case tc.wantDenied == "" && !resp.Allowed:
				t.Errorf("refused with %+v, want admitted", resp.Result)
			case tc.wantDenied != "" && (resp.Allowed || resp.Result == nil || resp.Result.Code != 403 || !strings.Contains(resp.Result.Message, tc.wantDenied)):
				t.Errorf("response %+v, want a 403 with %q", resp.Result, tc.wantDenied)
			}
			if writes != tc.wantWrites {
				t.Errorf("%d status updates, want %d", writes, tc.wantWrites)
			}
			got, err := kruise.PolicyV1alpha1().PodUnavailableBudgets(pubTestNamespace).Get(context.Background(), "web", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !statusEqual(got.Status, tc.wantStatus) {
				t.Errorf("status %+v, want %+v", got.Status, tc.wantStatus)
			}
		})
	}
}

// statusEqual compares statuses by their counts and the pods their entries
// name; nil and empty maps are equal.
func statusEqual(a, b policyv1alpha1.PodUnavailableBudgetStatus) bool {
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
		kruise: kruisefake.NewSimpleClientset(webPUB().TargetRef("apps/v1", "Deployment", "web").Obj()),
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
