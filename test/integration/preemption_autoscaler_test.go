package integration

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/budgetguard/budgetguard/internal/testenv"
	"github.com/budgetguard/budgetguard/internal/testobj"
	"github.com/budgetguard/budgetguard/plugins/budget"
	"github.com/budgetguard/budgetguard/plugins/budgetevictor"
)

// taintNode puts a taint with key and effect on node (docs/autoscaler.md:
// cluster-autoscaler matches its taints by key alone).
func taintNode(t *testing.T, node, key string, effect corev1.TaintEffect) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"taints":[{"key":%q,"value":"1700000000","effect":%q}]}}`, key, effect)
	if _, err := cp.Client.CoreV1().Nodes().Patch(testenv.Context(t), node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("taint node %s with %s:%s: %v", node, key, effect, err)
	}
}

// TestPreemptionAutoscalerRemovingNodes: cluster-autoscaler's taints steer
// preemption. Node A holds a pod no budget protects; node B a pod whose PDB
// allows 1 disruption. Untainted, budgetguard prefers A, where preemption
// spends no budget (TestPreemptionPrefersNodeWithUnprotectedVictims). When
// the autoscaler is draining A (ToBeDeletedByClusterAutoscaler) it is never
// a candidate, even for a preemptor that tolerates every taint; when it only
// marked A as a deletion candidate (DeletionCandidateOfClusterAutoscaler), A
// comes after every other candidate. Either way the preemptor goes to B and
// the pod on A is left alone.
func TestPreemptionAutoscalerRemovingNodes(t *testing.T) {
	for _, tc := range []struct {
		taint  string
		effect corev1.TaintEffect
	}{
		{taint: budget.TaintToBeDeleted, effect: corev1.TaintEffectNoSchedule},
		{taint: budget.TaintDeletionCandidate, effect: corev1.TaintEffectPreferNoSchedule},
	} {
		t.Run(tc.taint, func(t *testing.T) {
			ns := env.NewNamespace(t)
			low, high, _ := priorityClasses(t, ns)
			nodeA, nodeB := env.ReadyNode(t, ns, "1"), env.ReadyNode(t, ns, "1")
			free := env.CreatePod(t, ns, testobj.MakePod().Name("free").Label("app", "free").Node(nodeA).
				PriorityClass(low).GracePeriod(0).Container("app", "1"))
			guarded := env.CreatePod(t, ns, testobj.MakePod().Name("guarded").Label("app", "guarded").Node(nodeB).
				PriorityClass(low).GracePeriod(0).Container("app", "1"))
			env.CreatePDB(t, ns, testobj.MakePDB().Name("guarded").MinAvailable(0).MatchLabels("app", "guarded"))
			testenv.WaitFor(t, testenv.DefaultWait, "pod free Ready", env.PodRunningReady(ns, "free", true))
			testenv.WaitFor(t, testenv.DefaultWait, "pdb guarded at 1 healthy, 0 desired, 1 allowed", env.PDBStatusIs(ns, "guarded", policyv1.PodDisruptionBudgetStatus{
				CurrentHealthy: 1, DesiredHealthy: 0, DisruptionsAllowed: 1, ExpectedPods: 1,
			}))
			taintNode(t, nodeA, tc.taint, tc.effect)

			sched := startScheduler(t, ns, "{}")
			env.CreatePod(t, ns, testobj.MakePod().Name("preemptor").SchedulerName(sched).PriorityClass(high).
				GracePeriod(0).TolerateAll().OnNodes(nodeA, nodeB).Container("app", "1"))
			testenv.WaitFor(t, testenv.DefaultWait, "the preemptor bound to node B "+nodeB, env.BoundTo(ns, "preemptor", nodeB))
			testenv.WaitFor(t, testenv.DefaultWait, "pod guarded disrupted", goneExactly(ns, map[types.UID]string{guarded.UID: guarded.Name}, 1))
			testenv.Holds(t, settle, "pod free on node A is not disrupted", goneAtMost(ns, map[types.UID]string{free.UID: free.Name}, 0))
		})
	}
}

// TestEvictorRefusesPodsOnNodeBeingRemovedByAutoscaler: cluster-autoscaler
// drains a node tainted ToBeDeletedByClusterAutoscaler itself, so
// BudgetAwareEvictor leaves its pods alone, even under no budget, and counts
// each refusal with its own reason. The reference shows the strategy wanted
// them: DefaultEvictor alone evicts all 3.
func TestEvictorRefusesPodsOnNodeBeingRemovedByAutoscaler(t *testing.T) {
	ns, sel, nodeA := setupUnderutilizedWith(t, nil, -1)
	taintNode(t, nodeA, budget.TaintToBeDeleted, corev1.TaintEffectNoSchedule)

	before := evictorRefusals(t, "PreEvictionFilter", budgetevictor.ReasonNodeBeingDrainedByAutoscaler) +
		evictorRefusals(t, "Filter", budgetevictor.ReasonNodeBeingDrainedByAutoscaler)
	got := runDescheduler(t, highUtilizationPolicy(ns, sel, true), false)
	if n := got.Total(); n != 0 {
		t.Errorf("eviction requests = %d, want 0 (answers: %s)", n, got)
	}
	after := evictorRefusals(t, "PreEvictionFilter", budgetevictor.ReasonNodeBeingDrainedByAutoscaler) +
		evictorRefusals(t, "Filter", budgetevictor.ReasonNodeBeingDrainedByAutoscaler)
	if after-before < 1 {
		t.Errorf("refusals with reason %s rose by %v, want at least 1", budgetevictor.ReasonNodeBeingDrainedByAutoscaler, after-before)
	}
	ref := runDescheduler(t, highUtilizationPolicy(ns, sel, false), false)
	if n := ref.Count(http.StatusCreated); n != 3 {
		t.Errorf("reference evictions = %d, want 3 (answers: %s)", n, ref)
	}
}

// TestPreemptionRefusedCandidateIsACleanAbort: in BestEffort mode with the
// Eviction API, the only candidate needs two victims, a pod no budget
// protects (of a ReplicaSet whose replacements land on the same node) and a
// pod whose PDB allows nothing, which the API server will always refuse.
// Evicting both at once took the free pod on every retry, and its
// replacement was taken on the next: a preemptor that can never be placed
// kept disrupting its neighbours. Now the victim a budget may refuse goes
// first, its refusal stops the candidate before the free pod is touched,
// and the candidate is not retried while the budget denies it: across the
// scheduler's retries the free pods are disrupted at most once.
func TestPreemptionRefusedCandidateIsACleanAbort(t *testing.T) {
	ns := env.NewNamespace(t)
	low, high, _ := priorityClasses(t, ns)
	node := env.ReadyNode(t, ns, "2")
	// The free pod is the more important victim, which upstream's executor
	// disrupts first.
	mid := env.PriorityClass(t, ns, (lowPriority+highPriority)/2)
	tmpl := testobj.BoundPod(node).Label("app", "free").PriorityClass(mid).Template()
	tmpl.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	env.CreateReplicaSet(t, ns, testobj.MakeReplicaSet().Name("free").Replicas(1).Template(tmpl))
	env.CreatePod(t, ns, testobj.MakePod().Name("guarded").Label("app", "guarded").Node(node).
		PriorityClass(low).GracePeriod(0).Container("app", "1"))
	env.CreatePDB(t, ns, testobj.MakePDB().Name("guarded").MinAvailable(1).MatchLabels("app", "guarded"))
	env.WaitForReadyPods(t, ns, map[string]string{"app": "free"}, 1)
	testenv.WaitFor(t, testenv.DefaultWait, "pdb guarded at 1 healthy, 1 desired, 0 allowed", env.PDBStatusIs(ns, "guarded", policyv1.PodDisruptionBudgetStatus{
		CurrentHealthy: 1, DesiredHealthy: 1, DisruptionsAllowed: 0, ExpectedPods: 1,
	}))

	// Every pod of app=free the ReplicaSet creates from here on is a
	// replacement of a disrupted one.
	ctx := testenv.Context(t)
	w, err := cp.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: "app=free"})
	if err != nil {
		t.Fatalf("watch pods of app=free: %v", err)
	}
	defer w.Stop()
	seen := map[types.UID]bool{}
	count := func() int {
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					t.Fatal("the watch of app=free pods ended")
				}
				if p, isPod := ev.Object.(*corev1.Pod); isPod {
					seen[p.UID] = true
				}
			default:
				return len(seen)
			}
		}
	}

	sched := startScheduler(t, ns, "{mode: BestEffort}")
	createPreemptor(t, ns, "preemptor", sched, high, "2", node)
	testenv.WaitFor(t, testenv.DefaultWait, "an event on the preemptor saying the API server refused with 429",
		env.EventFor(ns, "preemptor", "PreemptionEvictionFailed", "(429)"))
	// The scheduler retries an unschedulable pod within its 2 s backoff
	// whenever a pod is deleted or added; watch several retries' worth.
	testenv.Holds(t, 3*settle, "the free pods are disrupted at most once", func(context.Context) (bool, error) {
		// The first pod seen, plus at most one replacement.
		if n := count(); n > 2 {
			return false, fmt.Errorf("%d pods of app=free seen: %d disruptions", n, n-1)
		}
		return true, nil
	})
	if p, err := cp.Client.CoreV1().Pods(ns).Get(ctx, "guarded", metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
		t.Errorf("pod guarded should stand (its PDB allows nothing): %v", err)
	}
	t.Logf("%d pods of app=free seen", count())
}
