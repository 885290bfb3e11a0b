package gang

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/budgetguard/budgetguard/internal/testenv"
	"github.com/budgetguard/budgetguard/internal/testobj"
	"github.com/budgetguard/budgetguard/internal/testsched"
	"github.com/budgetguard/budgetguard/plugins/budget"
)

// Preemption for a deferred in-place resize (KEP-5836, the
// InPlacePodVerticalScalingSchedulerPreemption gate, alpha in 1.37): a
// running pod whose kubelet deferred a resize for want of room goes through
// a scheduling cycle on its own node, and a PostFilter plugin may preempt
// lower-priority pods there for it. Upstream says PDBs are "supported, but
// not guaranteed" there; BudgetAwarePreemption keeps its promise as for any
// preemptor.

// resizeCluster is a 6-CPU node with four Ready 1-CPU low-priority web pods
// under a PDB allowing one disruption, and a high-priority pod "grow" on the
// node, allocated 2 CPUs, whose resize to want CPUs the kubelet deferred.
func resizeCluster(t *testing.T, want string) (c *cluster) {
	t.Helper()
	ns := env.NewNamespace(t)
	c = &cluster{ns: ns, low: env.PriorityClass(t, ns, 0), high: env.PriorityClass(t, ns, 1000), sched: "sched-" + ns}
	c.node = env.ReadyNode(t, ns, "6")
	for i := range 4 {
		env.CreatePod(t, ns, testobj.MakePod().Name(fmt.Sprintf("web-%d", i)).Label("app", "web").
			PriorityClass(c.low).Node(c.node).Container("app", "1").GracePeriod(0))
	}
	env.CreatePod(t, ns, testobj.MakePod().Name("grow").Label("app", "grow").PriorityClass(c.high).
		SchedulerName(c.sched).Node(c.node).Container("app", want).GracePeriod(0))
	env.WaitForReadyPods(t, ns, map[string]string{"app": "web"}, 4)
	env.WaitForReadyPods(t, ns, map[string]string{"app": "grow"}, 1)
	env.CreatePDB(t, ns, testobj.MakePDB().Name("web").MinAvailable(3).MatchLabels("app", "web"))
	testenv.WaitFor(t, testenv.DefaultWait, "PDB web at 4 healthy, 1 allowed", env.PDBStatusIs(ns, "web", policyv1.PodDisruptionBudgetStatus{
		CurrentHealthy: 4, DesiredHealthy: 3, DisruptionsAllowed: 1, ExpectedPods: 4,
	}))

	// What the kubelet writes when it defers a resize: the pod runs with
	// its old allocation, and PodResizePending says Deferred.
	ctx := testenv.Context(t)
	pod, err := cp.Client.CoreV1().Pods(ns).Get(ctx, "grow", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	allocated := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{
		Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonDeferred,
		Message: "Node didn't have enough capacity", LastTransitionTime: metav1.Now(),
	})
	for i := range pod.Status.ContainerStatuses {
		pod.Status.ContainerStatuses[i].AllocatedResources = allocated
		pod.Status.ContainerStatuses[i].Resources = &corev1.ResourceRequirements{Requests: allocated}
	}
	if _, err := cp.Client.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("mark the resize of pod grow deferred: %v", err)
	}
	if _, err := testsched.Run(t, cp.Client, cp.Config, testobj.SchedulerConfig{SchedulerName: c.sched}.YAML()); err != nil {
		t.Fatalf("start scheduler: %v", err)
	}
	env.DumpOnFailure(t, ns)
	return c
}

// A resize that needs one victim, which the PDB allows, preempts exactly
// one web pod.
func TestResizePreemptsWithinBudget(t *testing.T) {
	c := resizeCluster(t, "3") // 4 web + 3 = 7 > 6: one victim
	testenv.WaitFor(t, 2*testenv.DefaultWait, "one web pod preempted for the resize", func(ctx context.Context) (bool, error) {
		g, err := c.webGone(ctx)
		if err != nil || g == 0 {
			return false, fmt.Errorf("%d web pods disrupted: %v", g, err)
		}
		return true, nil
	})
	testenv.Holds(t, 5*time.Second, "no second web pod is disrupted", c.webGoneAtMost(1))
}

// A resize that needs two victims where the PDB allows one is refused: no
// web pod goes, and an event on the resizing pod names the PDB.
func TestResizeRefusedBeyondBudgetNamesIt(t *testing.T) {
	c := resizeCluster(t, "4") // 4 web + 4 = 8 > 6: two victims
	budgetRef := "pdb " + c.ns + "/web"
	testenv.WaitFor(t, 2*testenv.DefaultWait, "an event on pod grow naming "+budgetRef, func(ctx context.Context) (bool, error) {
		evs, err := cp.Client.EventsV1().Events(c.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, ev := range evs.Items {
			if ev.Regarding.Kind == "Pod" && ev.Regarding.Name == "grow" && ev.Reason == budget.EventPreemptionBlockedByBudget && strings.Contains(ev.Note, budgetRef) {
				return true, nil
			}
		}
		return false, fmt.Errorf("no %s event on pod grow naming %s among %d events", budget.EventPreemptionBlockedByBudget, budgetRef, len(evs.Items))
	})
	testenv.Holds(t, 5*time.Second, "no web pod is disrupted", c.webGoneAtMost(0))
}
