package testenv

import (
	"context"
	"testing"

	kruiseclientset "github.com/openkruise/kruise-api/client/clientset/versioned"
	kruisepolicy "github.com/openkruise/kruise-api/policy/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	kruisebeta "github.com/budgetguard/budgetguard/apis/kruise/policy/v1beta1"
	"github.com/budgetguard/budgetguard/internal/testobj"
	"github.com/budgetguard/budgetguard/plugins/budget"
)

// WithConfig returns e with the client configuration of its API server,
// which CreatePUBv1beta1 builds its client from.
func (e *Env) WithConfig(cfg *rest.Config) *Env {
	e.Config = cfg
	return e
}

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

// CreatePUBv1beta1 creates pub at policy.kruise.io/v1beta1, converted from
// kruise-api's v1alpha1 as OpenKruise converts it, with edit applied to the
// v1beta1 spec (nil: none), and returns it as the API server stored it.
func (e *Env) CreatePUBv1beta1(t testing.TB, pub *kruisepolicy.PodUnavailableBudget, edit func(*kruisebeta.PodUnavailableBudgetSpec)) *kruisebeta.PodUnavailableBudget {
	t.Helper()
	if e.Config == nil {
		t.Fatal("testenv: CreatePUBv1beta1 needs Env.Config")
	}
	client, err := budget.NewPUBv1beta1Client(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	beta, err := kruisebeta.FromV1alpha1(pub)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(&beta.Spec)
	}
	got := &kruisebeta.PodUnavailableBudget{}
	if err := client.Post().Namespace(beta.Namespace).Resource("podunavailablebudgets").Body(beta).Do(Context(t)).Into(got); err != nil {
		t.Fatalf("create PodUnavailableBudget %s/%s at %s: %v", beta.Namespace, beta.Name, kruisebeta.GroupVersion, err)
	}
	return got
}
