package integration

import (
	"context"
	"testing"

	kruisepolicy "github.com/openkruise/kruise-api/policy/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// The descheduler's dry-run with BudgetAwareEvictor predicts the evictions
// the real run then performs: the ledger makes the prediction cumulative,
// as the API server's budget check is. DefaultEvictor's dry-run alone
// predicts every eviction the strategy wants.
func TestDeschedulerDryRunPredictsRealRun(t *testing.T) {
	ns, sel, nodeA := setupUnderutilizedWith(t, nil, 1)
	const strategy = "HighNodeUtilization"

	before := deschedulerEvicted(t, strategy, ns, nodeA)
	dry := runDeschedulerUntil(t, highUtilizationPolicy(ns, sel, true), true, func(*evictionCounter) bool {
		return deschedulerEvicted(t, strategy, ns, nodeA) > before
	})
	predicted := deschedulerEvicted(t, strategy, ns, nodeA) - before
	if n := dry.total(); n != 0 {
		t.Fatalf("dry-run sent %d eviction requests to the API server (answers: %s)", n, dry)
	}

	before = deschedulerEvicted(t, strategy, ns, nodeA)
	real := runDescheduler(t, highUtilizationPolicy(ns, sel, true), false)
	performed := deschedulerEvicted(t, strategy, ns, nodeA) - before
	t.Logf("dry-run predicted %d evictions, the real run performed %d (API answers %s)", predicted, performed, real)
	if predicted != 1 || performed != 1 || real.count(201) != 1 {
		t.Errorf("dry-run predicted %d evictions, the real run performed %d (API: %s); want 1 and 1", predicted, performed, real)
	}
}

func TestDeschedulerDryRunReferenceOverpredicts(t *testing.T) {
	ns, sel, nodeA := setupUnderutilizedWith(t, nil, 1)
	const strategy = "HighNodeUtilization"
	before := deschedulerEvicted(t, strategy, ns, nodeA)
	runDeschedulerUntil(t, highUtilizationPolicy(ns, sel, false), true, func(*evictionCounter) bool {
		return deschedulerEvicted(t, strategy, ns, nodeA) > before
	})
	// The fake cluster of the dry-run may be partly filled in the loop
	// that evicts, so all we can say is that it predicts more than the one
	// eviction the budget allows.
	if predicted := deschedulerEvicted(t, strategy, ns, nodeA) - before; predicted < 2 {
		t.Errorf("DefaultEvictor's dry-run predicted %d evictions, want more than the 1 the budget allows", predicted)
	} else {
		t.Logf("DefaultEvictor's dry-run predicted %d evictions; the budget allows 1", predicted)
	}
}

// In a dry run the descheduler's fake cluster holds pods, nodes and PDBs but
// no ReplicaSets. A PUB that selects its pods by targetRef must still cover
// them: BudgetAwareEvictor reads the workloads from the real cluster, so the
// dry run predicts the 1 eviction the PUB allows, as the real run performs.
func TestDeschedulerDryRunHonoursPUBByTargetRef(t *testing.T) {
	ns, sel, nodeA := setupUnderutilizedWith(t, nil, -1)
	ctx := testContext(t)
	pubs := cp.KruiseClient.PolicyV1alpha1().PodUnavailableBudgets(ns)
	pub, err := pubs.Create(ctx, &kruisepolicy.PodUnavailableBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: kruisepolicy.PodUnavailableBudgetSpec{
			TargetReference: &kruisepolicy.TargetReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web"},
			MaxUnavailable:  ptr.To(intstr.FromInt32(1)),
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create PUB: %v", err)
	}
	t.Cleanup(func() { _ = pubs.Delete(context.Background(), "web", metav1.DeleteOptions{}) })
	// No Kruise controller runs in this package: write the status it would compute.
	pub.Status = kruisepolicy.PodUnavailableBudgetStatus{
		ObservedGeneration: pub.Generation, UnavailableAllowed: 1, CurrentAvailable: 3, DesiredAvailable: 2, TotalReplicas: 3,
	}
	if _, err := pubs.UpdateStatus(ctx, pub, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update PUB status: %v", err)
	}
	const strategy = "HighNodeUtilization"
	before := deschedulerEvicted(t, strategy, ns, nodeA)
	dry := runDeschedulerUntil(t, highUtilizationPolicy(ns, sel, true), true, func(*evictionCounter) bool {
		return deschedulerEvicted(t, strategy, ns, nodeA) > before
	})
	predicted := deschedulerEvicted(t, strategy, ns, nodeA) - before
	if n := dry.total(); n != 0 {
		t.Fatalf("dry-run sent %d eviction requests to the API server (answers: %s)", n, dry)
	}
	before = deschedulerEvicted(t, strategy, ns, nodeA)
	real := runDescheduler(t, highUtilizationPolicy(ns, sel, true), false)
	performed := deschedulerEvicted(t, strategy, ns, nodeA) - before
	t.Logf("dry-run predicted %d evictions, the real run performed %d (API answers %s)", predicted, performed, real)
	if predicted != 1 || performed != 1 {
		t.Errorf("dry-run predicted %d evictions, the real run performed %d; want 1 and 1 (the PUB allows 1)", predicted, performed)
	}
}
