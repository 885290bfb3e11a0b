package sandbox

import (
	"context"
	"strings"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"

	kruisebeta "github.com/budgetguard/budgetguard/apis/kruise/policy/v1beta1"
	"github.com/budgetguard/budgetguard/internal/testenv"
	"github.com/budgetguard/budgetguard/internal/testobj"
	"github.com/budgetguard/budgetguard/plugins/budget"
)

// kruiseRefusal is the message kube-apiserver answers when kruise's webhook
// named hook refuses a pod of the PUB web.
func kruiseRefusal(hook string) string {
	return `admission webhook "` + hook + `" denied the request: podunavailablebudget.policy.kruise.io "web" is forbidden: pub unavailable allowed is negative`
}

// TestPUBWebhook starts a control plane with the PUB webhook on (the
// default) and checks, on bare Ready pods that a PUB by selector covers and
// a status written by hand: new pods are tied to the PUB; with
// unavailableAllowed 0 a delete and an eviction get kruise's 403; with 1 they
// are admitted, the pod is recorded in status.disruptedPods and
// unavailableAllowed drops to 0; a dry run records nothing. Then, with
// DisablePUBWebhook, nothing ties or refuses a pod.
func TestPUBWebhook(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()

	t.Run("on", func(t *testing.T) {
		cp := startControlPlane(ctx, t, DefaultOptions())
		env := testenv.New(cp.Client).WithKruise(cp.KruiseClient)
		ns := env.NewNamespace(t)
		node := env.CreateNode(t, ns, testobj.MakeNode())
		pub := env.CreatePUB(t, ns, testobj.MakePUB().Name("web").MatchLabels("app", "web"))
		for _, name := range []string{"web-a", "web-b", "web-c"} {
			pod := env.CreatePod(t, ns, testobj.MakePod().Name(name).Label("app", "web").Node(node.Name).Container("app", ""))
			if got := pod.Annotations[pubRelatedAnnotation]; got != "web" {
				t.Errorf("pod %s: annotation %s = %q, want %q", name, pubRelatedAnnotation, got, "web")
			}
		}
		other := env.CreatePod(t, ns, testobj.MakePod().Name("other").Label("app", "other").Node(node.Name).Container("app", ""))
		if got, ok := other.Annotations[pubRelatedAnnotation]; ok {
			t.Errorf("pod other, which no PUB selects: annotation %s = %q, want none", pubRelatedAnnotation, got)
		}
		env.WaitForReadyPods(t, ns, map[string]string{"app": "web"}, 3)

		pods := cp.Client.CoreV1().Pods(ns)
		pubs := cp.KruiseClient.PolicyV1alpha1().PodUnavailableBudgets(ns)
		evict := func(name string, dryRun []string) error {
			return pods.EvictV1(ctx, &policyv1.Eviction{
				ObjectMeta:    metav1.ObjectMeta{Name: name, Namespace: ns},
				DeleteOptions: &metav1.DeleteOptions{DryRun: dryRun},
			})
		}
		wantRefused := func(what string, err error, hook string) {
			t.Helper()
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), kruiseRefusal(hook)) {
				t.Errorf("%s: error = %v, want a 403 with %q", what, err, kruiseRefusal(hook))
			}
		}
		wantRecorded := func(what string, pod string, allowed int32) {
			t.Helper()
			got, err := pubs.Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				t.Fatalf("%s: get PUB: %v", what, err)
			}
			if _, ok := got.Status.DisruptedPods[pod]; !ok || got.Status.UnavailableAllowed != allowed {
				t.Errorf("%s: status.disruptedPods = %v, unavailableAllowed = %d; want %s recorded and %d allowed",
					what, got.Status.DisruptedPods, got.Status.UnavailableAllowed, pod, allowed)
			}
			pub = got
		}

		pub = env.SetPUBStatus(t, pub, 3, 3, 0)
		wantRefused("delete web-a with 0 allowed", pods.Delete(ctx, "web-a", metav1.DeleteOptions{}), pubWebhookPod)
		wantRefused("evict web-b with 0 allowed", evict("web-b", nil), pubWebhookEviction)
		if err := pods.Delete(ctx, "other", metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete pod other, which no PUB covers: %v", err)
		}

		pub = env.SetPUBStatus(t, pub, 3, 2, 1)
		if err := pods.Delete(ctx, "web-c", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Errorf("dry-run delete web-c with 1 allowed: %v", err)
		}
		if got, _ := pubs.Get(ctx, "web", metav1.GetOptions{}); got != nil && (len(got.Status.DisruptedPods) > 0 || got.Status.UnavailableAllowed != 1) {
			t.Errorf("a dry run wrote status.disruptedPods = %v, unavailableAllowed = %d; want none and 1", got.Status.DisruptedPods, got.Status.UnavailableAllowed)
		}
		if err := pods.Delete(ctx, "web-a", metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete web-a with 1 allowed: %v", err)
		}
		wantRecorded("delete web-a", "web-a", 0)
		wantRefused("delete web-c after web-a spent the budget", pods.Delete(ctx, "web-c", metav1.DeleteOptions{}), pubWebhookPod)

		pub = env.SetPUBStatus(t, pub, 2, 1, 1)
		if err := evict("web-b", nil); err != nil {
			t.Errorf("evict web-b with 1 allowed: %v", err)
		}
		wantRecorded("evict web-b", "web-b", 0)
	})

	t.Run("off", func(t *testing.T) {
		opts := DefaultOptions()
		opts.DisablePUBWebhook = true
		cp := startControlPlane(ctx, t, opts)
		env := testenv.New(cp.Client).WithKruise(cp.KruiseClient)
		ns := env.NewNamespace(t)
		node := env.CreateNode(t, ns, testobj.MakeNode())
		pub := env.CreatePUB(t, ns, testobj.MakePUB().Name("web").MatchLabels("app", "web"))
		created := env.CreatePod(t, ns, testobj.MakePod().Name("web-a").Label("app", "web").Node(node.Name).Container("app", ""))
		if got, ok := created.Annotations[pubRelatedAnnotation]; ok {
			t.Errorf("without the webhook: annotation %s = %q, want none", pubRelatedAnnotation, got)
		}
		// Tied by hand, as kruise would have tied it.
		env.CreatePod(t, ns, testobj.MakePod().Name("web-b").Label("app", "web").Annotation(pubRelatedAnnotation, "web").Node(node.Name).Container("app", ""))
		env.WaitForReadyPods(t, ns, map[string]string{"app": "web"}, 2)
		env.SetPUBStatus(t, pub, 2, 2, 0)
		if err := cp.Client.CoreV1().Pods(ns).Delete(ctx, "web-b", metav1.DeleteOptions{}); err != nil {
			t.Errorf("without the webhook: delete web-b with 0 allowed: %v", err)
		}
		got, err := cp.KruiseClient.PolicyV1alpha1().PodUnavailableBudgets(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Status.DisruptedPods) > 0 {
			t.Errorf("without the webhook: status.disruptedPods = %v, want none", got.Status.DisruptedPods)
		}
		if _, err := cp.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, PUBValidatingWebhookConfiguration, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("without the webhook: get ValidatingWebhookConfiguration %s: error = %v, want NotFound", PUBValidatingWebhookConfiguration, err)
		}
	})
}

// TestPUBWebhookIgnoredPodSelector: the webhook reads the PUB at
// policy.kruise.io/v1beta1, as OpenKruise's does, so a pod that the PUB's
// spec.ignoredPodSelector selects may be deleted and evicted however little
// the PUB allows, and nothing is recorded for it; the PUB's other pods get
// kruise's 403.
func TestPUBWebhookIgnoredPodSelector(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cp := startControlPlane(ctx, t, DefaultOptions())
	env := testenv.New(cp.Client).WithKruise(cp.KruiseClient).WithConfig(cp.Config)
	ns := env.NewNamespace(t)
	node := env.CreateNode(t, ns, testobj.MakeNode())
	beta, err := budget.NewPUBv1beta1Client(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	pub := env.CreatePUBv1beta1(t, testobj.MakePUB().Namespace(ns).Name("web").MatchLabels("app", "web").Obj(),
		func(s *kruisebeta.PodUnavailableBudgetSpec) {
			s.IgnoredPodSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"track": "canary"}}
		})
	for name, track := range map[string]string{"stable-a": "stable", "canary-a": "canary", "canary-b": "canary"} {
		pod := env.CreatePod(t, ns, testobj.MakePod().Name(name).Label("app", "web").Label("track", track).Node(node.Name).Container("app", ""))
		if got := pod.Annotations[pubRelatedAnnotation]; got != "web" {
			t.Fatalf("pod %s: annotation %s = %q, want %q", name, pubRelatedAnnotation, got, "web")
		}
	}
	env.WaitForReadyPods(t, ns, map[string]string{"app": "web"}, 3)

	pub.Status = kruisebeta.PodUnavailableBudgetStatus{ObservedGeneration: pub.Generation, CurrentAvailable: 3, DesiredAvailable: 3, TotalReplicas: 3}
	if err := budget.PUBStatusClientV1beta1(beta).UpdateStatus(ctx, pub); err != nil {
		t.Fatalf("write the PUB's status at v1beta1: %v", err)
	}

	pods := cp.Client.CoreV1().Pods(ns)
	evict := func(name string) error {
		return pods.EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}})
	}
	if err := evict("canary-a"); err != nil {
		t.Errorf("evict canary-a, which the PUB ignores, with 0 allowed: %v", err)
	}
	if err := pods.Delete(ctx, "canary-b", metav1.DeleteOptions{}); err != nil {
		t.Errorf("delete canary-b, which the PUB ignores, with 0 allowed: %v", err)
	}
	if err := evict("stable-a"); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), kruiseRefusal(pubWebhookEviction)) {
		t.Errorf("evict stable-a with 0 allowed: error = %v, want a 403 with %q", err, kruiseRefusal(pubWebhookEviction))
	}
	if err := pods.Delete(ctx, "stable-a", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), kruiseRefusal(pubWebhookPod)) {
		t.Errorf("delete stable-a with 0 allowed: error = %v, want a 403 with %q", err, kruiseRefusal(pubWebhookPod))
	}
	got, err := budget.PUBStatusClientV1beta1(beta).Get(ctx, ns, "web")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.DisruptedPods) > 0 || got.Status.UnavailableAllowed != 0 {
		t.Errorf("status.disruptedPods = %v, unavailableAllowed = %d; want none recorded and 0", got.Status.DisruptedPods, got.Status.UnavailableAllowed)
	}
}
