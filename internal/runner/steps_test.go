package runner

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	kruisefake "github.com/openkruise/kruise-api/client/clientset/versioned/fake"
	kruisepolicy "github.com/openkruise/kruise-api/policy/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/budgetguard/budgetguard/internal/report"
	"github.com/budgetguard/budgetguard/internal/scenario"
)

func pod(name string, ready bool, labels map[string]string) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", Labels: labels},
		Status:     corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}},
	}
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
	web := map[string]string{"app": "web"}
	terminating := pod("c", true, web)
	terminating.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	terminating.Finalizers = []string{"x"}
	r := testRun([]runtime.Object{
		pod("a", true, web), pod("b", false, web), terminating, pod("other", true, map[string]string{"app": "db"}),
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
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", Generation: 2},
		Status: policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1}}
	pub := &kruisepolicy.PodUnavailableBudget{ObjectMeta: metav1.ObjectMeta{Name: "cart", Namespace: "shop", Generation: 1}}
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
	web := map[string]string{"app": "web"}
	r := testRun([]runtime.Object{pod("a", true, web), pod("b", true, web), pod("db", true, map[string]string{"app": "db"})})
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
	if len(r.notes) != 1 || !strings.Contains(r.notes[0], "steps[2]") {
		t.Errorf("notes %q, want one naming steps[2]", r.notes)
	}
}
