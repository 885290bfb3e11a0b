package integration

import (
	"fmt"
	"slices"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/budgetguard/budgetguard/internal/testenv"
	"github.com/budgetguard/budgetguard/internal/testobj"
	"github.com/budgetguard/budgetguard/sandbox"
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

// TestPreemptionRequeueLatencyAfterReplacementReady measures, 10 times, how
// long a preemptor blocked by a budget waits after the budget frees up the
// way it does in a cluster: a pod of the budget's application turns Ready.
// Node A (4 CPU) holds 4 Ready pods of web; a pod of late on node B is
// Running but not Ready; one PDB with minAvailable 4 covers all 5, so it
// allows nothing. A 1-CPU preemptor that fits only on A is refused. Then the
// late pod turns Ready, the disruption controller raises the budget to 1
// allowed, and the preemptor is bound to A. The clock runs from the moment
// the test sees the pod Ready to the moment it sees the preemptor bound.
// Without the requeue the preemptor waits in the unschedulable pool for 5
// minutes, and each round would time out (DefaultWait, 30 s). The times are
// logged, not asserted: this machine is shared.
func TestPreemptionRequeueLatencyAfterReplacementReady(t *testing.T) {
	const rounds = 10
	var latencies []time.Duration
	for i := range rounds {
		t.Run(fmt.Sprint("round-", i), func(t *testing.T) {
			latencies = append(latencies, requeueRound(t))
		})
	}
	if len(latencies) < rounds {
		return // a round failed and said why
	}
	slices.Sort(latencies)
	t.Logf("replacement Ready -> preemptor bound over %d rounds: median %v, max %v, all %v",
		rounds, (latencies[rounds/2-1]+latencies[rounds/2])/2, latencies[rounds-1], latencies)
}

// requeueRound is one round of TestPreemptionRequeueLatencyAfterReplacementReady.
func requeueRound(t *testing.T) time.Duration {
	ns := env.NewNamespace(t)
	low, high, _ := priorityClasses(t, ns)
	nodeA, nodeB := env.ReadyNode(t, ns, "4"), env.ReadyNode(t, ns, "1")
	workload(t, ns, "web", nodeA, low, 4)
	workloadWith(t, ns, "late", nodeB, low, 1, false)
	env.CreatePDB(t, ns, testobj.MakePDB().Name("app").MinAvailable(4).Selector(&metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"web", "late"}}},
	}))
	testenv.WaitFor(t, testenv.DefaultWait, "PDB app at 4 healthy, 4 desired, 0 allowed", env.PDBStatusIs(ns, "app", policyv1.PodDisruptionBudgetStatus{
		CurrentHealthy: 4, DesiredHealthy: 4, DisruptionsAllowed: 0, ExpectedPods: 5,
	}))
	sched := startScheduler(t, ns, "{}")
	createPreemptor(t, ns, "preemptor", sched, high, "1", nodeA)
	testenv.WaitFor(t, testenv.DefaultWait, "the preemptor blocked by pdb "+ns+"/app",
		env.EventFor(ns, "preemptor", "PreemptionBlockedByBudget", "pdb "+ns+"/app"))

	ctx := testenv.Context(t)
	late, err := env.ListPods(ctx, ns, map[string]string{"app": "late"})
	if err != nil || len(late) != 1 {
		t.Fatalf("list the late pod: %d pods, %v", len(late), err)
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, sandbox.ReadinessAnnotation, sandbox.ReadinessReady)
	if _, err := cp.Client.CoreV1().Pods(ns).Patch(ctx, late[0].Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("make pod %s/%s Ready: %v", ns, late[0].Name, err)
	}
	var ready time.Time
	deadline := time.Now().Add(testenv.DefaultWait)
	for time.Now().Before(deadline) {
		if ready.IsZero() {
			p, err := cp.Client.CoreV1().Pods(ns).Get(ctx, late[0].Name, metav1.GetOptions{})
			if err == nil && testenv.PodReady(p) {
				ready = time.Now()
			}
		}
		p, err := cp.Client.CoreV1().Pods(ns).Get(ctx, "preemptor", metav1.GetOptions{})
		if err == nil && p.Spec.NodeName == nodeA {
			if ready.IsZero() {
				t.Fatal("the preemptor was bound before the late pod was seen Ready")
			}
			return time.Since(ready)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the preemptor was not bound to %s within %v of the late pod turning Ready (seen Ready: %v)", nodeA, testenv.DefaultWait, !ready.IsZero())
	return 0
}
