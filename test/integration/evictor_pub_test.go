package integration

import (
	"context"
	"net/http"
	"testing"

	kruisepolicy "github.com/openkruise/kruise-api/policy/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// A PodUnavailableBudget that allows 1 unavailable pod limits the
// descheduler to 1 eviction. There is no PDB, and no Kruise webhook in the
// sandbox, so the API server lets the stock descheduler evict all 3.
func TestEvictorPodUnavailableBudget(t *testing.T) {
	ns, sel, _ := setupUnderutilizedWith(t, nil, -1)
	ctx := testContext(t)
	pubs := cp.KruiseClient.PolicyV1alpha1().PodUnavailableBudgets(ns)
	pub, err := pubs.Create(ctx, &kruisepolicy.PodUnavailableBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: kruisepolicy.PodUnavailableBudgetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			MaxUnavailable: ptr.To(intstr.FromInt32(1)),
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create PUB: %v", err)
	}
	t.Cleanup(func() { _ = pubs.Delete(context.Background(), "web", metav1.DeleteOptions{}) })
	// No Kruise controller runs here: write the status it would compute.
	pub.Status = kruisepolicy.PodUnavailableBudgetStatus{
		ObservedGeneration: pub.Generation,
		UnavailableAllowed: 1,
		CurrentAvailable:   3,
		DesiredAvailable:   2,
		TotalReplicas:      3,
	}
	if _, err := pubs.UpdateStatus(ctx, pub, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update PUB status: %v", err)
	}

	got := runDescheduler(t, highUtilizationPolicy(ns, sel, true), false)
	if n := got.count(http.StatusCreated); n != 1 {
		t.Errorf("evictions = %d, want 1, the PUB's budget (answers: %s)", n, got)
	}
	if n := got.total(); n != 1 {
		t.Errorf("eviction requests = %d, want 1 (answers: %s)", n, got)
	}
}

// The reference for TestEvictorPodUnavailableBudget: DefaultEvictor knows
// nothing of PUBs.
func TestDeschedulerDefaultEvictorIgnoresPUB(t *testing.T) {
	ns, sel, _ := setupUnderutilizedWith(t, nil, -1)
	ctx := testContext(t)
	pubs := cp.KruiseClient.PolicyV1alpha1().PodUnavailableBudgets(ns)
	if _, err := pubs.Create(ctx, &kruisepolicy.PodUnavailableBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: kruisepolicy.PodUnavailableBudgetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			MaxUnavailable: ptr.To(intstr.FromInt32(1)),
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create PUB: %v", err)
	}
	t.Cleanup(func() { _ = pubs.Delete(context.Background(), "web", metav1.DeleteOptions{}) })
	got := runDescheduler(t, highUtilizationPolicy(ns, sel, false), false)
	if n := got.count(http.StatusCreated); n != 3 {
		t.Errorf("evictions = %d, want 3 (answers: %s)", n, got)
	}
}
