package integration

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/budgetguard/budgetguard/internal/testenv"
	"github.com/budgetguard/budgetguard/internal/testobj"
	"github.com/budgetguard/budgetguard/sandbox"
)

// setupCrashLoop runs 3 crash-looping pods of app "web" (Running, never
// Ready, restartCount rising) on a node, under a PDB with maxUnavailable 1
// and policy: the app is disrupted (0 healthy, 2 desired) and the PDB
// allows 0 disruptions.
func setupCrashLoop(t *testing.T, policy string) (ns, nodeSelector string) {
	t.Helper()
	ns = env.NewNamespace(t)
	nodes, nodeSelector := evictorNodes(t, ns, 2)
	createReplicaSet(t, ns, "web", nodes[0].Name, 3, map[string]string{sandbox.ReadinessAnnotation: sandbox.ReadinessCrashLoop})
	env.CreatePDB(t, ns, testobj.MakePDB().Name("web").MaxUnavailable(1).MatchLabels("app", "web").UnhealthyPodEvictionPolicy(policyv1.UnhealthyPodEvictionPolicyType(policy)))
	testenv.WaitFor(t, testenv.DefaultWait, "3 web pods restarted at least twice", func(ctx context.Context) (bool, error) {
		pods, err := env.ListPods(ctx, ns, map[string]string{"app": "web"})
		if err != nil {
			return false, err
		}
		n := 0
		for _, p := range pods {
			if len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].RestartCount >= 2 && !testenv.PodReady(&p) {
				n++
			}
		}
		return n == 3, fmt.Errorf("%d of %d pods restarted twice", n, len(pods))
	})
	testenv.WaitFor(t, testenv.DefaultWait, "pdb web allows 0", func(ctx context.Context) (bool, error) {
		pdb, err := cp.Client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		st := pdb.Status
		return st.ObservedGeneration == pdb.Generation && st.CurrentHealthy == 0 && st.DesiredHealthy == 2 && st.DisruptionsAllowed == 0,
			fmt.Errorf("status %+v", st)
	})
	return ns, nodeSelector
}

// restartsPolicy is a policy whose only strategy is
// RemovePodsHavingTooManyRestarts (2 restarts) in ns, on the nodes
// nodeSelector selects, with BudgetAwareEvictor.
func restartsPolicy(ns, nodeSelector string) string {
	return testobj.DeschedulerPolicy{
		NodeSelector: nodeSelector, BudgetAware: true, ExtensionPoint: "deschedule",
		Strategy: "RemovePodsHavingTooManyRestarts", StrategyArgs: fmt.Sprintf("{podRestartThreshold: 2, namespaces: {include: [%q]}}", ns),
	}.YAML()
}

func TestEvictorUnhealthyPodEvictionPolicy(t *testing.T) {
	t.Run("AlwaysAllow evicts crash-looping pods with budget 0", func(t *testing.T) {
		ns, sel := setupCrashLoop(t, "AlwaysAllow")
		got := runDescheduler(t, restartsPolicy(ns, sel), false)
		if n := got.Count(http.StatusCreated); n != 3 {
			t.Errorf("evictions = %d, want 3 (answers: %s)", n, got)
		}
		if n := got.Total(); n != 3 {
			t.Errorf("eviction requests = %d, want 3 (answers: %s)", n, got)
		}
	})
	t.Run("IfHealthyBudget keeps them while the app is disrupted", func(t *testing.T) {
		ns, sel := setupCrashLoop(t, "IfHealthyBudget")
		got := runDescheduler(t, restartsPolicy(ns, sel), false)
		if n := got.Total(); n != 0 {
			t.Errorf("eviction requests = %d, want 0 (answers: %s)", n, got)
		}
	})
}
