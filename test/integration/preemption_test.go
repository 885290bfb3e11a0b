package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/budgetguard/budgetguard/internal/testenv"
	"github.com/budgetguard/budgetguard/internal/testobj"
)

// settle is how long the tests watch that nothing more is disrupted.
const settle = 5 * time.Second

// anchored is a test namespace with low, high and critical PriorityClasses
// and the anchor scenario (docs/design.md) on node: 4 Ready 1-CPU pods of
// ReplicaSet web (priority low), whose UIDs are web, under a PDB with
// maxUnavailable 1, which fill the node's 4 CPUs.
type anchored struct {
	ns, low, high, critical, node string
	web                           map[types.UID]string
}

// newAnchored sets up anchored in a new namespace.
func newAnchored(t *testing.T) anchored {
	t.Helper()
	a := anchored{ns: env.NewNamespace(t)}
	a.low, a.high, a.critical = priorityClasses(t, a.ns)
	a.node, a.web = anchor(t, a.ns, a.low)
	return a
}

// expectPreemptionOn creates a high-priority 1-CPU preemptor that fits on
// the anchor's node or on node, and expects it bound to node after exactly
// one of victims was disrupted, while no web pod is.
func (a anchored) expectPreemptionOn(t *testing.T, sched, node string, victims map[types.UID]string) {
	t.Helper()
	createPreemptor(t, a.ns, "preemptor", sched, a.high, "1", a.node, node)
	testenv.WaitFor(t, testenv.DefaultWait, "the preemptor bound to "+node, env.BoundTo(a.ns, "preemptor", node))
	testenv.WaitFor(t, testenv.DefaultWait, "one of its victims disrupted", goneExactly(a.ns, victims, 1))
	testenv.Holds(t, settle, "no web pod is disrupted", goneAtMost(a.ns, a.web, 0))
}

// refusedByAPIServer sets up the anchor scenario with a BestEffort
// scheduler, whose preemptor "preemptor" needs two of the web pods, and waits
// until the API server has refused the eviction the budget does not allow.
func refusedByAPIServer(t *testing.T) anchored {
	t.Helper()
	a := newAnchored(t)
	sched := startScheduler(t, a.ns, "{mode: BestEffort}")
	createPreemptor(t, a.ns, "preemptor", sched, a.high, "2", a.node)
	testenv.WaitFor(t, testenv.DefaultWait, "an event on the preemptor saying the API server refused with 429",
		env.EventFor(a.ns, "preemptor", "PreemptionEvictionFailed", "(429)"))
	return a
}

// anchor sets up the anchor scenario in ns on a new node, with pods of
// priority class pc. It returns the node and the pods' UIDs.
func anchor(t *testing.T, ns, pc string) (string, map[types.UID]string) {
	t.Helper()
	node := env.ReadyNode(t, ns, "4")
	uids := workload(t, ns, "web", node, pc, 4)
	env.CreatePDB(t, ns, testobj.MakePDB().Name("web").MaxUnavailable(1).MatchLabels("app", "web"))
	testenv.WaitFor(t, testenv.DefaultWait, "PDB web at 4 healthy, 3 desired, 1 allowed", env.PDBStatusIs(ns, "web", policyv1.PodDisruptionBudgetStatus{
		CurrentHealthy: 4, DesiredHealthy: 3, DisruptionsAllowed: 1, ExpectedPods: 4,
	}))
	return node, uids
}

// TestPreemptionAnchorDefaultPreemptionBreaksBudget is the reference: in the
// anchor scenario upstream DefaultPreemption deletes 2 (or more) pods of a
// budget that allows 1.
func TestPreemptionAnchorDefaultPreemptionBreaksBudget(t *testing.T) {
	a := newAnchored(t)
	ns, high, node, web, sched := a.ns, a.high, a.node, a.web, startScheduler(t, a.ns, "")

	createPreemptor(t, ns, "preemptor", sched, high, "2", node)
	testenv.WaitFor(t, testenv.DefaultWait, "the preemptor bound to "+node, env.BoundTo(ns, "preemptor", node))
	// Usually exactly 2; sometimes a second cycle, run before the
	// scheduler's cache has seen the deletions, deletes another one.
	testenv.WaitFor(t, testenv.DefaultWait, "at least 2 of the 4 web pods deleted by upstream preemption, against a budget of 1", func(ctx context.Context) (bool, error) {
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
	a := newAnchored(t)
	ns, high, node, web, sched := a.ns, a.high, a.node, a.web, startScheduler(t, a.ns, "{}")

	createPreemptor(t, ns, "preemptor", sched, high, "2", node)
	testenv.WaitFor(t, testenv.DefaultWait, "an event on the preemptor naming the PDB and its numbers",
		env.EventFor(ns, "preemptor", "PreemptionBlockedByBudget", "pdb "+ns+"/web", "4 healthy, 3 desired, 1 disruption allowed"))
	testenv.Holds(t, settle, "at most 1 web pod is disrupted", goneAtMost(ns, web, 1))
	testenv.Holds(t, time.Second, "the preemptor is not bound", func(ctx context.Context) (bool, error) {
		p, err := cp.Client.CoreV1().Pods(ns).Get(ctx, "preemptor", metav1.GetOptions{})
		return err == nil && p.Spec.NodeName == "", err
	})
}

// TestPreemptionBackToBackPreemptorsSpendBudgetOnce: two preemptors that
// each need one victim, against a budget of 1: one disruption in total.
func TestPreemptionBackToBackPreemptorsSpendBudgetOnce(t *testing.T) {
	a := newAnchored(t)
	ns, high, node, web, sched := a.ns, a.high, a.node, a.web, startScheduler(t, a.ns, "{}")

	createPreemptor(t, ns, "preemptor-a", sched, high, "1", node)
	createPreemptor(t, ns, "preemptor-b", sched, high, "1", node)
	testenv.WaitFor(t, testenv.DefaultWait, "one web pod disrupted", goneExactly(ns, web, 1))
	testenv.WaitFor(t, testenv.DefaultWait, "one preemptor bound", func(ctx context.Context) (bool, error) {
		a, errA := env.BoundTo(ns, "preemptor-a", node)(ctx)
		b, errB := env.BoundTo(ns, "preemptor-b", node)(ctx)
		if a != b {
			return true, nil
		}
		return false, fmt.Errorf("a bound: %v (%v), b bound: %v (%v)", a, errA, b, errB)
	})
	testenv.Holds(t, settle, "only 1 web pod is disrupted in total", goneAtMost(ns, web, 1))
}

// TestPreemptionPrefersNodeWithUnprotectedVictims: a node whose victims are
// under no budget is chosen over a node whose victims would spend one.
func TestPreemptionPrefersNodeWithUnprotectedVictims(t *testing.T) {
	a := newAnchored(t)
	ns := a.ns
	free := env.ReadyNode(t, ns, "4")
	batch := workload(t, ns, "batch", free, a.low, 4)
	sched := startScheduler(t, ns, "{}")

	a.expectPreemptionOn(t, sched, free, batch)
}

// TestPreemptionPrefersUnhealthyVictimsUnderAlwaysAllow: a node whose
// victims are unhealthy pods under a PDB with unhealthyPodEvictionPolicy
// AlwaysAllow (which spend nothing, although the PDB allows no disruption)
// is chosen over a node whose victims would spend a budget.
func TestPreemptionPrefersUnhealthyVictimsUnderAlwaysAllow(t *testing.T) {
	a := newAnchored(t)
	ns := a.ns
	sickNode := env.ReadyNode(t, ns, "4")
	sick := workloadWith(t, ns, "sick", sickNode, a.low, 4, false)
	env.CreatePDB(t, ns, testobj.MakePDB().Name("sick").MaxUnavailable(0).MatchLabels("app", "sick").UnhealthyPodEvictionPolicy(policyv1.AlwaysAllow))
	testenv.WaitFor(t, testenv.DefaultWait, "PDB sick at 0 healthy, 4 desired, 0 allowed", env.PDBStatusIs(ns, "sick", policyv1.PodDisruptionBudgetStatus{
		CurrentHealthy: 0, DesiredHealthy: 4, DisruptionsAllowed: 0, ExpectedPods: 4,
	}))
	sched := startScheduler(t, ns, "{}")

	a.expectPreemptionOn(t, sched, sickNode, sick)
}

// TestPreemptionPUBProtectedVictimsNeverChosen: pods protected by an
// OpenKruise PodUnavailableBudget that allows nothing are never victims,
// although no PDB covers them and nothing in the API server would stop a
// delete (no Kruise webhook runs here).
func TestPreemptionPUBProtectedVictimsNeverChosen(t *testing.T) {
	ns := env.NewNamespace(t)
	low, high, _ := priorityClasses(t, ns)
	node := env.ReadyNode(t, ns, "4")
	web := workload(t, ns, "web", node, low, 4)
	pub := env.CreatePUB(t, ns, testobj.MakePUB().Name("web").MatchLabels("app", "web").MaxUnavailable(intstr.FromInt32(0)))
	// No Kruise controller runs here: write the status it would write.
	env.SetPUBStatus(t, pub, 4, 4, 0)
	sched := startScheduler(t, ns, "{actuation: Delete}")

	createPreemptor(t, ns, "preemptor", sched, high, "1", node)
	testenv.WaitFor(t, testenv.DefaultWait, "an event on the preemptor naming the PUB",
		env.EventFor(ns, "preemptor", "PreemptionBlockedByBudget", "pub "+ns+"/web"))
	testenv.Holds(t, settle, "no web pod is disrupted", goneAtMost(ns, web, 0))
}

// TestPreemptionOverrideBudgetsAtPriority: a preemptor at or above
// overrideBudgetsAtPriority may break the budget; below it, it may not.
func TestPreemptionOverrideBudgetsAtPriority(t *testing.T) {
	a := newAnchored(t)
	ns, high, node, web, sched := a.ns, a.high, a.node, a.web, startScheduler(t, a.ns, fmt.Sprintf("{overrideBudgetsAtPriority: %d}", criticalPriority))

	createPreemptor(t, ns, "important", sched, high, "2", node)
	testenv.WaitFor(t, testenv.DefaultWait, "the high-priority preemptor blocked by the PDB",
		env.EventFor(ns, "important", "PreemptionBlockedByBudget", "pdb "+ns+"/web"))
	testenv.Holds(t, 2*time.Second, "no web pod is disrupted", goneAtMost(ns, web, 0))

	createPreemptor(t, ns, "critical", sched, a.critical, "2", node)
	testenv.WaitFor(t, testenv.DefaultWait, "the critical preemptor bound to "+node, env.BoundTo(ns, "critical", node))
	testenv.WaitFor(t, testenv.DefaultWait, "at least 2 web pods disrupted for the critical preemptor", func(ctx context.Context) (bool, error) {
		g, err := gone(ctx, ns, web)
		return err == nil && g >= 2, fmt.Errorf("%d of 4 web pods disrupted (err %v)", g, err)
	})
}

// TestPreemptionDeleteActuation: with actuation Delete the victim is deleted,
// within the budget.
func TestPreemptionDeleteActuation(t *testing.T) {
	a := newAnchored(t)
	ns, high, node, web, sched := a.ns, a.high, a.node, a.web, startScheduler(t, a.ns, "{actuation: Delete}")

	createPreemptor(t, ns, "preemptor", sched, high, "1", node)
	testenv.WaitFor(t, testenv.DefaultWait, "the preemptor bound to "+node, env.BoundTo(ns, "preemptor", node))
	testenv.WaitFor(t, testenv.DefaultWait, "one web pod deleted", goneExactly(ns, web, 1))
	testenv.Holds(t, settle, "only 1 web pod is disrupted", goneAtMost(ns, web, 1))
}

// TestPreemptionEvictRefusedByAPIServer: in BestEffort mode the plugin may
// choose a victim the budget denies; with Evict actuation the API server
// refuses it (429), the attempt is aborted with an event on the preemptor,
// and the budget holds.
func TestPreemptionEvictRefusedByAPIServer(t *testing.T) {
	a := refusedByAPIServer(t)
	ns, web := a.ns, a.web
	testenv.Holds(t, settle, "at most 1 web pod is disrupted", goneAtMost(ns, web, 1))
	p, err := cp.Client.CoreV1().Pods(ns).Get(testenv.Context(t), "preemptor", metav1.GetOptions{})
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
	ns := env.NewNamespace(t)
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
