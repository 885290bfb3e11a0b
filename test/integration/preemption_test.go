package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	kruisepolicy "github.com/openkruise/kruise-api/policy/v1alpha1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// settle is how long the tests watch that nothing more is disrupted.
const settle = 5 * time.Second

// anchor sets up DESIGN.md's anchor scenario on a new node: 4 Ready 1-CPU
// pods of ReplicaSet web under a PDB with maxUnavailable 1, which fill the
// node's 4 CPUs. It returns the node and the pods' UIDs.
func anchor(t *testing.T, ns, pc string) (string, map[types.UID]string) {
	t.Helper()
	node := readyNode(t, ns)
	uids := workload(t, ns, "web", node, pc, 4)
	createPDB(t, ns, "web", 1)
	waitFor(t, defaultWait, "PDB web at 4 healthy, 3 desired, 1 allowed", pdbStatusIs(ns, "web", policyv1.PodDisruptionBudgetStatus{
		CurrentHealthy: 4, DesiredHealthy: 3, DisruptionsAllowed: 1, ExpectedPods: 4,
	}))
	return node, uids
}

// TestPreemptionAnchorDefaultPreemptionBreaksBudget is the reference: in the
// anchor scenario upstream DefaultPreemption deletes 2 (or more) pods of a
// budget that allows 1.
func TestPreemptionAnchorDefaultPreemptionBreaksBudget(t *testing.T) {
	ns := newNamespace(t)
	low, high, _ := priorityClasses(t, ns)
	node, web := anchor(t, ns, low)
	sched := startScheduler(t, ns, "")

	createPreemptor(t, ns, "preemptor", sched, high, "2", node)
	waitFor(t, defaultWait, "the preemptor bound to "+node, boundTo(ns, "preemptor", node))
	// Usually exactly 2; sometimes a second cycle, run before the
	// scheduler's cache has seen the deletions, deletes another one.
	waitFor(t, defaultWait, "at least 2 of the 4 web pods deleted by upstream preemption, against a budget of 1", func(ctx context.Context) (bool, error) {
		g, err := gone(ctx, ns, web)
		if err != nil || g < 2 {
			return false, fmt.Errorf("%d of 4 web pods disrupted (err %v)", g, err)
		}
		t.Logf("upstream DefaultPreemption disrupted %d of 4 web pods; the PDB allowed 1", g)
		return true, nil
	})
}

// TestPreemptionAnchorBudgetAwareKeepsBudget: in the same scenario
// BudgetAwarePreemption disrupts no more than the budget allows, and tells
// the preemptor which budget stopped it, with its numbers.
func TestPreemptionAnchorBudgetAwareKeepsBudget(t *testing.T) {
	ns := newNamespace(t)
	low, high, _ := priorityClasses(t, ns)
	node, web := anchor(t, ns, low)
	sched := startScheduler(t, ns, "{}")

	createPreemptor(t, ns, "preemptor", sched, high, "2", node)
	waitFor(t, defaultWait, "an event on the preemptor naming the PDB and its numbers",
		eventFor(ns, "preemptor", "PreemptionBlockedByBudget", "pdb "+ns+"/web", "4 healthy, 3 desired, 1 disruptions allowed"))
	holds(t, settle, "at most 1 web pod is disrupted", goneAtMost(ns, web, 1))
	holds(t, time.Second, "the preemptor is not bound", func(ctx context.Context) (bool, error) {
		p, err := getPod(ctx, ns, "preemptor")
		return err == nil && p.Spec.NodeName == "", err
	})
}

// TestPreemptionBackToBackPreemptorsSpendBudgetOnce: two preemptors that
// each need one victim, against a budget of 1: one disruption in total.
func TestPreemptionBackToBackPreemptorsSpendBudgetOnce(t *testing.T) {
	ns := newNamespace(t)
	low, high, _ := priorityClasses(t, ns)
	node, web := anchor(t, ns, low)
	sched := startScheduler(t, ns, "{}")

	createPreemptor(t, ns, "preemptor-a", sched, high, "1", node)
	createPreemptor(t, ns, "preemptor-b", sched, high, "1", node)
	waitFor(t, defaultWait, "one web pod disrupted", goneExactly(ns, web, 1))
	waitFor(t, defaultWait, "one preemptor bound", func(ctx context.Context) (bool, error) {
		a, errA := boundTo(ns, "preemptor-a", node)(ctx)
		b, errB := boundTo(ns, "preemptor-b", node)(ctx)
		if a != b {
			return true, nil
		}
		return false, fmt.Errorf("a bound: %v (%v), b bound: %v (%v)", a, errA, b, errB)
	})
	holds(t, settle, "only 1 web pod is disrupted in total", goneAtMost(ns, web, 1))
}

// TestPreemptionPrefersNodeWithUnprotectedVictims: a node whose victims are
// under no budget is chosen over a node whose victims would spend one.
func TestPreemptionPrefersNodeWithUnprotectedVictims(t *testing.T) {
	ns := newNamespace(t)
	low, high, _ := priorityClasses(t, ns)
	protected, web := anchor(t, ns, low)
	free := readyNode(t, ns)
	batch := workload(t, ns, "batch", free, low, 4)
	sched := startScheduler(t, ns, "{}")

	createPreemptor(t, ns, "preemptor", sched, high, "1", protected, free)
	waitFor(t, defaultWait, "the preemptor bound to the node without budgets", boundTo(ns, "preemptor", free))
	waitFor(t, defaultWait, "one batch pod disrupted", goneExactly(ns, batch, 1))
	holds(t, settle, "no web pod is disrupted", goneAtMost(ns, web, 0))
}

// TestPreemptionPrefersUnhealthyVictimsUnderAlwaysAllow: a node whose
// victims are unhealthy pods under a PDB with unhealthyPodEvictionPolicy
// AlwaysAllow (which spend nothing, although the PDB allows no disruption)
// is chosen over a node whose victims would spend a budget.
func TestPreemptionPrefersUnhealthyVictimsUnderAlwaysAllow(t *testing.T) {
	ns := newNamespace(t)
	low, high, _ := priorityClasses(t, ns)
	protected, web := anchor(t, ns, low)
	sickNode := readyNode(t, ns)
	sick := workloadWith(t, ns, "sick", sickNode, low, 4, false)
	_, err := cp.Client.PolicyV1().PodDisruptionBudgets(ns).Create(testContext(t), &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "sick"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable:             ptr.To(intstr.FromInt32(0)),
			Selector:                   &metav1.LabelSelector{MatchLabels: map[string]string{"app": "sick"}},
			UnhealthyPodEvictionPolicy: ptr.To(policyv1.AlwaysAllow),
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create PDB: %v", err)
	}
	waitFor(t, defaultWait, "PDB sick at 0 healthy, 4 desired, 0 allowed", pdbStatusIs(ns, "sick", policyv1.PodDisruptionBudgetStatus{
		CurrentHealthy: 0, DesiredHealthy: 4, DisruptionsAllowed: 0, ExpectedPods: 4,
	}))
	sched := startScheduler(t, ns, "{}")

	createPreemptor(t, ns, "preemptor", sched, high, "1", protected, sickNode)
	waitFor(t, defaultWait, "the preemptor bound to the node of the unhealthy pods", boundTo(ns, "preemptor", sickNode))
	waitFor(t, defaultWait, "one unhealthy pod evicted", goneExactly(ns, sick, 1))
	holds(t, settle, "no web pod is disrupted", goneAtMost(ns, web, 0))
}

// TestPreemptionPUBProtectedVictimsNeverChosen: pods protected by an
// OpenKruise PodUnavailableBudget that allows nothing are never victims,
// although no PDB covers them and nothing in the API server would stop a
// delete (no Kruise webhook runs here).
func TestPreemptionPUBProtectedVictimsNeverChosen(t *testing.T) {
	ns := newNamespace(t)
	low, high, _ := priorityClasses(t, ns)
	node := readyNode(t, ns)
	web := workload(t, ns, "web", node, low, 4)
	ctx := testContext(t)
	pub, err := cp.KruiseClient.PolicyV1alpha1().PodUnavailableBudgets(ns).Create(ctx, &kruisepolicy.PodUnavailableBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: kruisepolicy.PodUnavailableBudgetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			MaxUnavailable: ptr.To(intstr.FromInt32(0)),
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create PUB: %v", err)
	}
	// No Kruise controller runs here: write the status it would write.
	pub.Status = kruisepolicy.PodUnavailableBudgetStatus{
		ObservedGeneration: pub.Generation, UnavailableAllowed: 0,
		CurrentAvailable: 4, DesiredAvailable: 4, TotalReplicas: 4,
	}
	if _, err := cp.KruiseClient.PolicyV1alpha1().PodUnavailableBudgets(ns).UpdateStatus(ctx, pub, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update PUB status: %v", err)
	}
	t.Cleanup(func() {
		_ = cp.KruiseClient.PolicyV1alpha1().PodUnavailableBudgets(ns).Delete(context.Background(), "web", metav1.DeleteOptions{})
	})
	sched := startScheduler(t, ns, "{actuation: Delete}")

	createPreemptor(t, ns, "preemptor", sched, high, "1", node)
	waitFor(t, defaultWait, "an event on the preemptor naming the PUB",
		eventFor(ns, "preemptor", "PreemptionBlockedByBudget", "pub "+ns+"/web"))
	holds(t, settle, "no web pod is disrupted", goneAtMost(ns, web, 0))
}

// TestPreemptionOverrideBudgetsAtPriority: a preemptor at or above
// overrideBudgetsAtPriority may break the budget; below it, it may not.
func TestPreemptionOverrideBudgetsAtPriority(t *testing.T) {
	ns := newNamespace(t)
	low, high, critical := priorityClasses(t, ns)
	node, web := anchor(t, ns, low)
	sched := startScheduler(t, ns, fmt.Sprintf("{overrideBudgetsAtPriority: %d}", criticalPriority))

	createPreemptor(t, ns, "important", sched, high, "2", node)
	waitFor(t, defaultWait, "the high-priority preemptor blocked by the PDB",
		eventFor(ns, "important", "PreemptionBlockedByBudget", "pdb "+ns+"/web"))
	holds(t, 2*time.Second, "no web pod is disrupted", goneAtMost(ns, web, 0))

	createPreemptor(t, ns, "critical", sched, critical, "2", node)
	waitFor(t, defaultWait, "the critical preemptor bound to "+node, boundTo(ns, "critical", node))
	waitFor(t, defaultWait, "at least 2 web pods disrupted for the critical preemptor", func(ctx context.Context) (bool, error) {
		g, err := gone(ctx, ns, web)
		return err == nil && g >= 2, fmt.Errorf("%d of 4 web pods disrupted (err %v)", g, err)
	})
}

// TestPreemptionDeleteActuation: with actuation Delete the victim is deleted,
// within the budget.
func TestPreemptionDeleteActuation(t *testing.T) {
	ns := newNamespace(t)
	low, high, _ := priorityClasses(t, ns)
	node, web := anchor(t, ns, low)
	sched := startScheduler(t, ns, "{actuation: Delete}")

	createPreemptor(t, ns, "preemptor", sched, high, "1", node)
	waitFor(t, defaultWait, "the preemptor bound to "+node, boundTo(ns, "preemptor", node))
	waitFor(t, defaultWait, "one web pod deleted", goneExactly(ns, web, 1))
	holds(t, settle, "only 1 web pod is disrupted", goneAtMost(ns, web, 1))
}

// TestPreemptionEvictRefusedByAPIServer: in BestEffort mode the plugin may
// choose a victim the budget denies; with Evict actuation the API server
// refuses it (429), the attempt is aborted with an event on the preemptor,
// and the budget holds.
func TestPreemptionEvictRefusedByAPIServer(t *testing.T) {
	ns := newNamespace(t)
	low, high, _ := priorityClasses(t, ns)
	node, web := anchor(t, ns, low)
	sched := startScheduler(t, ns, "{mode: BestEffort}")

	createPreemptor(t, ns, "preemptor", sched, high, "2", node)
	waitFor(t, defaultWait, "an event on the preemptor saying the API server refused with 429",
		eventFor(ns, "preemptor", "PreemptionEvictionFailed", "(429)"))
	holds(t, settle, "at most 1 web pod is disrupted", goneAtMost(ns, web, 1))
	p, err := getPod(testContext(t), ns, "preemptor")
	if err != nil {
		t.Fatal(err)
	}
	if p.Spec.NodeName != "" {
		t.Errorf("the preemptor is bound to %s; the budget allowed only one of the two victims it needs", p.Spec.NodeName)
	}
}

// TestPreemptionInvalidArgs: a scheduler whose BudgetAwarePreemption args
// are invalid does not start, and says which field is wrong. (The binary's
// exit code is tested in cmd/scheduler.)
func TestPreemptionInvalidArgs(t *testing.T) {
	ns := newNamespace(t)
	for args, want := range map[string]string{
		"{actuation: Kill}": `pluginConfig[BudgetAwarePreemption].args.actuation: Unsupported value: "Kill"`,
		"{modes: Strict}":   `decoding args for plugin BudgetAwarePreemption: strict decoding error: unknown field "modes"`,
	} {
		_, err := runScheduler(t, ns, args)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("args %s: error %v, want one containing %q", args, err, want)
		}
	}
}
