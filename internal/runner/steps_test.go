package runner

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	kruisefake "github.com/openkruise/kruise-api/client/clientset/versioned/fake"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/budgetguard/budgetguard/internal/report"
	"github.com/budgetguard/budgetguard/internal/scenario"
	"github.com/budgetguard/budgetguard/internal/testobj"
)

// pod is a pod in namespace shop labelled app=app, Ready or not.
func pod(name, app string, ready bool) *corev1.Pod {
	return testobj.MakePod().Namespace("shop").Name(name).Label("app", app).Ready(ready).Obj()
}

func testRun(objs []runtime.Object, kruiseObjs ...runtime.Object) *run {
	return &run{
		sc:       &scenario.Scenario{},
		mode:     report.ModeBudgetguard,
		progress: io.Discard,
		client:   fake.NewClientset(objs...),
		kruise:   kruisefake.NewSimpleClientset(kruiseObjs...),
	}
}

func TestWaitPodsReady(t *testing.T) {
	terminating := pod("c", "web", true)
	terminating.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	terminating.Finalizers = []string{"x"}
	r := testRun([]runtime.Object{
		pod("a", "web", true), pod("b", "web", false), terminating, pod("other", "db", true),
	})
	ctx := context.Background()
	seen, err := r.wait(ctx, &scenario.WaitStep{PodsReady: &scenario.PodsReadyCondition{Namespace: "shop", Selector: "app=web", Count: 1}})
	if err != nil || seen != "1 of 3 pods Ready" {
		t.Errorf("count 1: %q, %v; want 1 of 3 pods Ready", seen, err)
	}
	_, err = r.wait(ctx, &scenario.WaitStep{
		PodsReady: &scenario.PodsReadyCondition{Namespace: "shop", Selector: "app=web", Count: 2},
		Timeout:   300 * time.Millisecond,
	})
	if !errors.Is(err, errTimedOut) || !strings.Contains(err.Error(), "1 of 3 pods Ready") {
		t.Errorf("count 2: %v, want a timeout that says 1 of 3 pods Ready", err)
	}
}

func TestWaitBudgetsObserved(t *testing.T) {
	pdb := testobj.MakePDB().Namespace("shop").Name("web").Generation(2).ObservedGeneration(1).Obj()
	pub := testobj.MakePUB().Namespace("shop").Name("cart").Generation(1).Obj()
	r := testRun([]runtime.Object{pdb}, pub)
	_, err := r.wait(context.Background(), &scenario.WaitStep{BudgetsObserved: true, Timeout: 300 * time.Millisecond})
	if !errors.Is(err, errTimedOut) || !strings.Contains(err.Error(), "pdb shop/web, pub shop/cart") {
		t.Errorf("got %v, want a timeout naming pdb shop/web and pub shop/cart", err)
	}

	pdb.Status.ObservedGeneration = 2
	pub.Status.ObservedGeneration = 1
	r = testRun([]runtime.Object{pdb}, pub)
	seen, err := r.wait(context.Background(), &scenario.WaitStep{BudgetsObserved: true, Timeout: time.Second})
	if err != nil || seen != "2 budgets" {
		t.Errorf("got %q, %v; want 2 budgets", seen, err)
	}
}

func TestSetReadinessAnnotatesLivePods(t *testing.T) {
	r := testRun([]runtime.Object{pod("a", "web", true), pod("b", "web", true), pod("db", "db", true)})
	ctx := context.Background()
	out, err := r.setReadiness(ctx, &scenario.SetReadinessStep{Namespace: "shop", Selector: "app=web", Readiness: "never"})
	if err != nil || out != "2 pods" {
		t.Fatalf("got %q, %v; want 2 pods", out, err)
	}
	for name, want := range map[string]string{"a": "never", "b": "never", "db": ""} {
		p, err := r.client.CoreV1().Pods("shop").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Annotations[scenario.ReadinessAnnotation]; got != want {
			t.Errorf("pod %s: readiness %q, want %q", name, got, want)
		}
	}
	if _, err := r.setReadiness(ctx, &scenario.SetReadinessStep{Namespace: "shop", Selector: "app=none", Readiness: "never"}); err == nil {
		t.Error("no error when no pod matches")
	}
}

func TestStepTimeoutIsAnErrorOrANote(t *testing.T) {
	waitStep := func(cont bool) scenario.Step {
		return scenario.Step{Index: 2, Wait: &scenario.WaitStep{
			PodScheduled: &scenario.PodScheduledCondition{Namespace: "shop", Name: "vip"},
			Timeout:      200 * time.Millisecond, ContinueOnTimeout: cont,
		}}
	}
	r := testRun(nil)
	r.sc.Steps = []scenario.Step{{}, {}, waitStep(false)}
	err := r.step(context.Background(), 2, r.sc.Steps[2])
	if err == nil || !strings.Contains(err.Error(), "steps[2] wait podScheduled shop/vip") || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("got %v, want an error naming steps[2] and what it saw", err)
	}
	if len(r.notes) != 0 {
		t.Errorf("notes %q, want none", r.notes)
	}

	r = testRun(nil)
	r.sc.Steps = []scenario.Step{{}, {}, waitStep(true)}
	if err := r.step(context.Background(), 2, r.sc.Steps[2]); err != nil {
		t.Fatalf("continueOnTimeout: %v", err)
	}
	// The note numbers the step as the progress line does.
	if len(r.notes) != 1 || !strings.HasPrefix(r.notes[0], "step 3/3 wait podScheduled shop/vip: ") {
		t.Errorf("notes %q, want one naming step 3/3", r.notes)
	}
}

func TestEditSteps(t *testing.T) {
	pdb := testobj.MakePDB().Namespace("shop").Name("web").MaxUnavailable(1).Obj()
	big := testobj.MakePod().Namespace("shop").Name("big").Obj()
	r := testRun([]runtime.Object{pdb, big})
	ctx := context.Background()
	if _, err := r.patchObject(ctx, &scenario.PatchStep{Kind: "PodDisruptionBudget", Namespace: "shop", Name: "web",
		Patch: []byte(`{"spec":{"maxUnavailable":0}}`)}); err != nil {
		t.Fatal(err)
	}
	got, err := r.client.PolicyV1().PodDisruptionBudgets("shop").Get(ctx, "web", metav1.GetOptions{})
	if err != nil || got.Spec.MaxUnavailable == nil || got.Spec.MaxUnavailable.IntValue() != 0 {
		t.Errorf("patched PDB: %v, %v; want maxUnavailable 0", got, err)
	}

	seen, err := r.staysPending(ctx, &scenario.StaysPendingStep{Namespace: "shop", Name: "big", For: 300 * time.Millisecond})
	if err != nil || seen != "stayed Pending for 300ms" {
		t.Errorf("staysPending of a pending pod: %q, %v", seen, err)
	}
	bound := big.DeepCopy()
	bound.Spec.NodeName = "node-a"
	if _, err := r.client.CoreV1().Pods("shop").Update(ctx, bound, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	seen, err = r.staysPending(ctx, &scenario.StaysPendingStep{Namespace: "shop", Name: "big", For: time.Minute})
	if err != nil || !strings.HasPrefix(seen, "bound to node-a after ") {
		t.Errorf("staysPending of a bound pod: %q, %v; want it to end early and say so", seen, err)
	}

	if _, err := r.deleteObject(ctx, &scenario.DeleteStep{Kind: "Pod", Namespace: "shop", Name: "big"}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.staysPending(ctx, &scenario.StaysPendingStep{Namespace: "shop", Name: "big", For: time.Second}); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("staysPending of a deleted pod: %v, want an error", err)
	}
	if _, err := r.deleteObject(ctx, &scenario.DeleteStep{Kind: "Pod", Namespace: "shop", Name: "big"}); err == nil || !strings.Contains(err.Error(), "delete Pod shop/big") {
		t.Errorf("deleting it again: %v, want an error naming it", err)
	}
}

// TestCreatePodRetriesUnknownPriorityClass: a pod created in the same phase as
// its PriorityClass may be refused by the Priority admission plugin until its
// informer has the class; apply retries that refusal, and no other.
func TestCreatePodRetriesUnknownPriorityClass(t *testing.T) {
	refusal := func(name string) error {
		return apierrors.NewForbidden(corev1.Resource("pods"), name,
			errors.New("no PriorityClass with name shop-checkout was found"))
	}
	r := testRun(nil)
	refused := 0
	r.client.(*fake.Clientset).PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if refused < 2 {
			refused++
			return true, nil, refusal(a.(k8stesting.CreateAction).GetObject().(*corev1.Pod).Name)
		}
		return false, nil, nil
	})
	p := testobj.MakePod().Namespace("shop").Name("checkout").Obj()
	p.Spec.PriorityClassName = "shop-checkout"
	if err := r.create(context.Background(), p); err != nil {
		t.Fatalf("create after %d refusals: %v", refused, err)
	}
	if refused != 2 {
		t.Errorf("refused %d times, want 2", refused)
	}
	if _, err := r.client.CoreV1().Pods("shop").Get(context.Background(), "checkout", metav1.GetOptions{}); err != nil {
		t.Errorf("the pod was not created: %v", err)
	}

	// Any other refusal is returned at once.
	other := testRun(nil)
	calls := 0
	other.client.(*fake.Clientset).PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		calls++
		return true, nil, apierrors.NewForbidden(corev1.Resource("pods"), "checkout", errors.New("exceeded quota"))
	})
	err := other.create(context.Background(), testobj.MakePod().Namespace("shop").Name("checkout").Obj())
	if !apierrors.IsForbidden(err) || calls != 1 {
		t.Errorf("quota refusal: %v after %d calls, want it returned after 1", err, calls)
	}
}
