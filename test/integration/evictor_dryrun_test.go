package integration

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/budgetguard/budgetguard/internal/testenv"
	"github.com/budgetguard/budgetguard/internal/testobj"
)

// The descheduler's dry-run with BudgetAwareEvictor predicts the evictions
// the real run then performs, loop after loop: the ledger makes the
// prediction cumulative, as the API server's budget check is, and a
// predicted eviction still spends its budget in the next loop, after the
// descheduler has restored the pod in its fake cluster. Over three loops
// each, both take 1 of the 3 Ready pods. (The real run's later loops may
// also evict the replacements, which never turn Ready here and so spend no
// budget; the dry run cannot foresee pods that do not exist yet.)
// DefaultEvictor's dry-run alone predicts every eviction the strategy wants.
func TestDeschedulerDryRunPredictsRealRun(t *testing.T) {
	ns, sel, nodeA := setupUnderutilizedWith(t, nil, 1)
	pods, err := env.ListPods(testenv.Context(t), ns, map[string]string{"app": "web"})
	if err != nil {
		t.Fatal(err)
	}
	ready := map[string]bool{}
	for _, p := range pods {
		ready[p.Name] = true
	}
	predicted, _, real := dryRunThenRealRunLoops(t, highUtilizationPolicy(ns, sel, true), ns, nodeA, 3)
	performed := 0
	for _, name := range real.Evicted() {
		if ready[name] {
			performed++
		}
	}
	if predicted != 1 || performed != 1 {
		t.Errorf("over 3 loops the dry-run predicted %d evictions, the real run evicted %d of the 3 Ready pods (API: %s, evicted %v); want 1 and 1", predicted, performed, real, real.Evicted())
	}
}

func TestDeschedulerDryRunReferenceOverpredicts(t *testing.T) {
	ns, sel, nodeA := setupUnderutilizedWith(t, nil, 1)
	const strategy = "HighNodeUtilization"
	before := deschedulerEvicted(t, strategy, ns, nodeA)
	// Until it predicts a second eviction (or 30 s pass): stopping at the
	// first one raced the loop that predicts the second (seen once in CI).
	runDeschedulerUntil(t, highUtilizationPolicy(ns, sel, false), true, func(*evictionCounter) bool {
		return deschedulerEvicted(t, strategy, ns, nodeA) > before+1
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
	pub := env.CreatePUB(t, ns, testobj.MakePUB().Name("web").TargetRef("apps/v1", "ReplicaSet", "web").MaxUnavailable(intstr.FromInt32(1)))
	// No Kruise controller runs in this package: write the status it would compute.
	env.SetPUBStatus(t, pub, 3, 2, 1)
	predicted, performed, _ := dryRunThenRealRun(t, highUtilizationPolicy(ns, sel, true), ns, nodeA)
	if predicted != 1 || performed != 1 {
		t.Errorf("dry-run predicted %d evictions, the real run performed %d; want 1 and 1 (the PUB allows 1)", predicted, performed)
	}
}
