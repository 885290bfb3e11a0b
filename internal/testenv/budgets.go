package testenv

import (
	"context"
	"testing"

	kruiseclientset "github.com/openkruise/kruise-api/client/clientset/versioned"
	kruisepolicy "github.com/openkruise/kruise-api/policy/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/budgetguard/budgetguard/internal/testobj"
)

// WithKruise returns e with a Kruise client, which the PUB helpers use.
func (e *Env) WithKruise(kruise kruiseclientset.Interface) *Env {
	e.Kruise = kruise
	return e
}

func (e *Env) kruise(t testing.TB) kruiseclientset.Interface {
	t.Helper()
	if e.Kruise == nil {
		t.Fatal("testenv: this Env has no Kruise client (WithKruise)")
	}
	return e.Kruise
}

// CreatePUB creates the PodUnavailableBudget in ns and deletes it when the
// test ends.
func (e *Env) CreatePUB(t testing.TB, ns string, pub *testobj.PUBWrapper) *kruisepolicy.PodUnavailableBudget {
	t.Helper()
	pubs := e.kruise(t).PolicyV1alpha1().PodUnavailableBudgets(ns)
	got := Create(t, pubs, pub.Obj())
	t.Cleanup(func() { _ = pubs.Delete(context.Background(), got.Name, metav1.DeleteOptions{}) })
	return got
}

// SetPUBStatus writes an up-to-date status with currentAvailable available,
// desiredAvailable desired, unavailableAllowed allowed and totalReplicas
// available: what OpenKruise's controller would write, for control planes
// where none runs.
func (e *Env) SetPUBStatus(t testing.TB, pub *kruisepolicy.PodUnavailableBudget, available, desired, allowed int32) *kruisepolicy.PodUnavailableBudget {
	t.Helper()
	pub = pub.DeepCopy()
	pub.Status = kruisepolicy.PodUnavailableBudgetStatus{
		ObservedGeneration: pub.Generation,
		CurrentAvailable:   available,
		DesiredAvailable:   desired,
		UnavailableAllowed: allowed,
		TotalReplicas:      available,
	}
	got, err := e.kruise(t).PolicyV1alpha1().PodUnavailableBudgets(pub.Namespace).UpdateStatus(Context(t), pub, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update the status of PUB %s/%s: %v", pub.Namespace, pub.Name, err)
	}
	return got
}
