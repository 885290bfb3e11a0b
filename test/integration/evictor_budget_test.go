package integration

import (
	"testing"

	policyv1 "k8s.io/api/policy/v1"

	"github.com/budgetguard/budgetguard/internal/testenv"
	"github.com/budgetguard/budgetguard/internal/testobj"
)

// setupUnderutilized puts the 3 pods of app "web" (100m CPU each) on node
// A, 4 CPU, which is therefore underutilized (7.5%), and a 2-CPU bare pod
// on node B, which HighNodeUtilization packs onto: it wants to evict all 3
// web pods. A PDB with maxUnavailable 1 allows 1.
func setupUnderutilized(t *testing.T) (ns, nodeSelector string) {
	t.Helper()
	ns, nodeSelector, _ = setupUnderutilizedWith(t, nil, 1)
	return ns, nodeSelector
}

// setupUnderutilizedWith is setupUnderutilized with annotations on the web
// pods and a PDB with maxUnavailable pdbMax (none if negative); it returns
// node A's name too.
func setupUnderutilizedWith(t *testing.T, annotations map[string]string, pdbMax int32) (ns, nodeSelector, nodeA string) {
	t.Helper()
	ns = env.NewNamespace(t)
	nodes, nodeSelector := evictorNodes(t, ns, 2)
	a, b := nodes[0], nodes[1]
	env.CreatePod(t, ns, testobj.MakePod().Name("filler").Label("pod", "filler").Node(b.Name).GracePeriod(30).Container("app", "2"))
	createReplicaSet(t, ns, "web", a.Name, 3, annotations)
	env.WaitForReadyPods(t, ns, map[string]string{"app": "web"}, 3)
	if pdbMax >= 0 {
		env.CreatePDB(t, ns, testobj.MakePDB().Name("web").MaxUnavailable(pdbMax).MatchLabels("app", "web"))
		testenv.WaitFor(t, testenv.DefaultWait, "pdb web is up to date", env.PDBStatusIs(ns, "web", policyv1.PodDisruptionBudgetStatus{
			CurrentHealthy: 3, DesiredHealthy: 3 - pdbMax, DisruptionsAllowed: pdbMax, ExpectedPods: 3,
		}))
	}
	// The simulated kubelet makes a replacement Ready at once, which would
	// refill the budget between two evictions of one loop; on a real node a
	// replacement takes a while. Keep replacements unready.
	evictorNeverReadyReplacements(t, ns, "web")
	return ns, nodeSelector, a.Name
}

func TestEvictorHighNodeUtilizationSpendsBudgetOnce(t *testing.T) {
	t.Run("BudgetAwareEvictor", func(t *testing.T) {
		ns, sel := setupUnderutilized(t)
		got := runDescheduler(t, highUtilizationPolicy(ns, sel, true), false)
		expectAnswers(t, got, 1, 0, 1)
	})
	// The reference: the stock DefaultEvictor alone asks the apiserver for
	// all 3 evictions and collects 429s for the 2 the budget forbids.
	t.Run("DefaultEvictorOnly", func(t *testing.T) {
		ns, sel := setupUnderutilized(t)
		got := runDescheduler(t, highUtilizationPolicy(ns, sel, false), false)
		expectAnswers(t, got, 1, 2, -1)
	})
}

// setupDuplicates puts the 5 pods of ReplicaSet "web" on node A of three
// nodes, so RemoveDuplicates wants 2 per node at most and asks to evict 3 of
// them; a PDB with maxUnavailable 1 allows 1.
func setupDuplicates(t *testing.T) (ns, nodeSelector string) {
	t.Helper()
	ns = env.NewNamespace(t)
	nodes, nodeSelector := evictorNodes(t, ns, 3)
	createReplicaSet(t, ns, "web", nodes[0].Name, 5, nil)
	env.WaitForReadyPods(t, ns, map[string]string{"app": "web"}, 5)
	env.CreatePDB(t, ns, testobj.MakePDB().Name("web").MaxUnavailable(1).MatchLabels("app", "web"))
	testenv.WaitFor(t, testenv.DefaultWait, "pdb web is up to date", env.PDBStatusIs(ns, "web", policyv1.PodDisruptionBudgetStatus{
		CurrentHealthy: 5, DesiredHealthy: 4, DisruptionsAllowed: 1, ExpectedPods: 5,
	}))
	evictorNeverReadyReplacements(t, ns, "web")
	return ns, nodeSelector
}

// removeDuplicatesPolicy is a policy whose only strategy is RemoveDuplicates
// on the nodes nodeSelector selects, evicting in ns only; budgetAware adds
// BudgetAwareEvictor. RemoveDuplicates asks PreEvictionFilter about every
// candidate while it lists them, including the pod it keeps.
func removeDuplicatesPolicy(ns, nodeSelector string, budgetAware bool) string {
	return testobj.DeschedulerPolicy{NodeSelector: nodeSelector, Namespace: ns, BudgetAware: budgetAware, Strategy: "RemoveDuplicates"}.YAML()
}

// RemoveDuplicates lists its candidates through PreEvictionFilter before it
// evicts any. The budget must be spent by the evictions, not by the listing:
// exactly the 1 eviction the PDB allows happens, and the API server sends no
// 429 because the eviction gate refuses the other 2 before they are sent.
func TestEvictorRemoveDuplicatesSpendsBudgetOnce(t *testing.T) {
	t.Run("BudgetAwareEvictor", func(t *testing.T) {
		ns, sel := setupDuplicates(t)
		before := evictorRefusals(t, "EvictionRequest", "InsufficientBudget")
		got := runDescheduler(t, removeDuplicatesPolicy(ns, sel, true), false)
		expectAnswers(t, got, 1, 0, 1)
		if n := evictorRefusals(t, "EvictionRequest", "InsufficientBudget") - before; n != 2 {
			t.Errorf("evictions the gate refused for InsufficientBudget = %v, want 2", n)
		}
	})
	t.Run("DefaultEvictorOnly", func(t *testing.T) {
		ns, sel := setupDuplicates(t)
		got := runDescheduler(t, removeDuplicatesPolicy(ns, sel, false), false)
		expectAnswers(t, got, 1, 2, -1)
	})
}

// evictorRefusals reads BudgetAwareEvictor's refusal counter.
func evictorRefusals(t *testing.T, point, reason string) float64 {
	t.Helper()
	return testenv.Counter(t, "budgetguard_evictor_evictions_refused_total", map[string]string{"extension_point": point, "reason": reason})
}
