package integration

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/budgetguard/budgetguard/internal/testenv"
)

// TestPreemptionRequeuedWhenBudgetFrees: a preemptor that a PDB blocked is
// retried as soon as the budget allows enough disruptions, not when the
// scheduling queue flushes its unschedulable pods (5 minutes). The
// scheduler's 2 s maximum backoff does not help here: a pod rejected as
// Unschedulable waits in the unschedulable pool for an event that moves it.
func TestPreemptionRequeuedWhenBudgetFrees(t *testing.T) {
	a := newAnchored(t)
	ns, high, node, web, sched := a.ns, a.high, a.node, a.web, startScheduler(t, a.ns, "{}")

	// 2 CPUs take 2 victims; the budget allows 1.
	createPreemptor(t, ns, "preemptor", sched, high, "2", node)
	testenv.WaitFor(t, testenv.DefaultWait, "the preemptor blocked by pdb "+ns+"/web",
		env.EventFor(ns, "preemptor", "PreemptionBlockedByBudget", "pdb "+ns+"/web"))
	testenv.Holds(t, time.Second, "no web pod is disrupted", goneAtMost(ns, web, 0))

	ctx := testenv.Context(t)
	freed := time.Now()
	if _, err := cp.Client.PolicyV1().PodDisruptionBudgets(ns).Patch(ctx, "web", types.MergePatchType,
		[]byte(`{"spec":{"maxUnavailable":2}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patch PDB %s/web to maxUnavailable 2: %v", ns, err)
	}
	testenv.WaitFor(t, testenv.DefaultWait, "the preemptor bound to "+node+" once the budget allows 2", env.BoundTo(ns, "preemptor", node))
	t.Logf("the preemptor was bound %s after the PDB was raised to maxUnavailable 2", time.Since(freed).Round(100*time.Millisecond))
	testenv.WaitFor(t, testenv.DefaultWait, "2 web pods disrupted", goneExactly(ns, web, 2))
	testenv.Holds(t, settle, "no more than 2 web pods are disrupted", goneAtMost(ns, web, 2))
}
