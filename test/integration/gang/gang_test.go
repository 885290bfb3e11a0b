// Package gang tests what Kubernetes 1.37's scheduler gates add to
// preemption, within budgets, on the in-process control plane: workload-aware
// (gang) preemption (the GenericWorkload gate, scheduling.k8s.io/v1beta1
// served) and preemption for a deferred in-place resize (the
// InPlacePodVerticalScalingSchedulerPreemption gate, resize_test.go). A real
// kube-apiserver, the real disruption controller and a real kube-scheduler
// whose profile runs BudgetAwarePreemption in place of DefaultPreemption at
// postFilter and podGroupPostFilter, as the shipped profile does. The gates
// are process-wide, so these tests have their own control plane (package
// integration runs with them off, and its promise tests once more with
// -gangs).
package gang

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"

	"github.com/budgetguard/budgetguard/internal/testenv"
	"github.com/budgetguard/budgetguard/internal/testobj"
	"github.com/budgetguard/budgetguard/internal/testsched"
	"github.com/budgetguard/budgetguard/plugins/budget"
	"github.com/budgetguard/budgetguard/sandbox"
)

var (
	verbose = flag.Bool("sandbox.verbose", false, "log the control plane's components")
	cp      *sandbox.ControlPlane
	env     *testenv.Env
)

// apiServerFlags serve the PodGroup API and turn on the feature gates of
// gang preemption and resize preemption, on kube-apiserver's command line; kube-apiserver's test server copies them into the process's
// gates, which the scheduler reads.
var apiServerFlags = []string{
	testenv.PodGroupAPI,
	testenv.FeatureGates(testenv.GangGate, testenv.ResizePreemptionGate),
}

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opts := sandbox.DefaultOptions()
	opts.Verbose = *verbose
	opts.APIServerFlags = apiServerFlags
	var err error
	cp, err = sandbox.Start(ctx, opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: start the sandbox control plane: %v\n", err)
		return 1
	}
	env = testenv.New(cp.Client).WithConfig(cp.Config)
	code := m.Run()
	if err := cp.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: stop the sandbox control plane: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// cluster is one test's namespace: a 4-CPU node full of four Ready 1-CPU
// low-priority pods of app web, a PDB on them that allows allowed
// disruptions, and a scheduler whose profile runs BudgetAwarePreemption.
type cluster struct {
	ns, node, low, high, sched string
}

func newCluster(t *testing.T, allowed int32) *cluster {
	t.Helper()
	ns := env.NewNamespace(t)
	c := &cluster{ns: ns, low: env.PriorityClass(t, ns, 0), high: env.PriorityClass(t, ns, 1000), sched: "sched-" + ns}
	c.node = env.ReadyNode(t, ns, "4")
	for i := range 4 {
		env.CreatePod(t, ns, testobj.MakePod().Name(fmt.Sprintf("web-%d", i)).Label("app", "web").
			PriorityClass(c.low).Node(c.node).Container("app", "1").GracePeriod(0))
	}
	env.WaitForReadyPods(t, ns, map[string]string{"app": "web"}, 4)
	env.CreatePDB(t, ns, testobj.MakePDB().Name("web").MinAvailable(4-allowed).MatchLabels("app", "web"))
	testenv.WaitFor(t, testenv.DefaultWait, fmt.Sprintf("PDB web at 4 healthy, %d allowed", allowed), env.PDBStatusIs(ns, "web", policyv1.PodDisruptionBudgetStatus{
		CurrentHealthy: 4, DesiredHealthy: 4 - allowed, DisruptionsAllowed: allowed, ExpectedPods: 4,
	}))
	if _, err := testsched.Run(t, cp.Client, cp.Config, testobj.SchedulerConfig{SchedulerName: c.sched}.YAML()); err != nil {
		t.Fatalf("start scheduler: %v", err)
	}
	env.DumpOnFailure(t, ns)
	return c
}

// gang creates a PodGroup of n high-priority 1-CPU pods that schedule
// together (minCount n).
func (c *cluster) gang(t *testing.T, name string, n int) {
	t.Helper()
	ctx := testenv.Context(t)
	pg := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.ns},
		Spec: schedulingv1beta1.PodGroupSpec{
			SchedulingPolicy:  schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: int32(n)}},
			PriorityClassName: c.high,
		},
	}
	if _, err := cp.Client.SchedulingV1beta1().PodGroups(c.ns).Create(ctx, pg, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create PodGroup %s: %v", name, err)
	}
	for i := range n {
		p := testobj.MakePod().Name(fmt.Sprintf("%s-%d", name, i)).Label("gang", name).PriorityClass(c.high).
			SchedulerName(c.sched).Container("app", "1").GracePeriod(0).Obj()
		p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(name)}
		if _, err := cp.Client.CoreV1().Pods(c.ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create pod %s: %v", p.Name, err)
		}
	}
}

// webGone counts the web pods deleted or terminating.
func (c *cluster) webGone(ctx context.Context) (int, error) {
	pods, err := env.ListPods(ctx, c.ns, map[string]string{"app": "web"})
	if err != nil {
		return 0, err
	}
	gone := 4 - len(pods)
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			gone++
		}
	}
	return gone, nil
}

func (c *cluster) webGoneAtMost(n int) testenv.Condition {
	return func(ctx context.Context) (bool, error) {
		g, err := c.webGone(ctx)
		if err != nil {
			return false, err
		}
		if g > n {
			return false, fmt.Errorf("%d web pods disrupted, more than %d", g, n)
		}
		return true, nil
	}
}

// bound reports whether every pod of the gang is bound.
func (c *cluster) bound(name string, n int) testenv.Condition {
	return func(ctx context.Context) (bool, error) {
		pods, err := env.ListPods(ctx, c.ns, map[string]string{"gang": name})
		if err != nil {
			return false, err
		}
		b := 0
		for _, p := range pods {
			if p.Spec.NodeName != "" {
				b++
			}
		}
		if b != n {
			return false, fmt.Errorf("%d of %d pods of gang %s bound", b, n, name)
		}
		return true, nil
	}
}

// A gang that fits within the PDB's allowance preempts: three victims, the
// three the PDB allows, and the whole gang is bound.
func TestGangPreemptsWithinBudget(t *testing.T) {
	c := newCluster(t, 3)
	c.gang(t, "train", 3)
	testenv.WaitFor(t, 2*testenv.DefaultWait, "all 3 pods of gang train bound", c.bound("train", 3))
	gone, err := c.webGone(testenv.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	if gone != 3 {
		t.Errorf("%d web pods disrupted; the gang needed 3 and the PDB allowed 3", gone)
	}
	testenv.WaitFor(t, testenv.DefaultWait, "the victims' Preempted events name the PodGroup", func(ctx context.Context) (bool, error) {
		evs, err := cp.Client.CoreV1().Events(c.ns).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("reason", "Preempted").String()})
		if err != nil {
			return false, err
		}
		n := 0
		for _, ev := range evs.Items {
			if strings.HasPrefix(ev.Message, "Preempted by podgroup") {
				n++
			}
		}
		if n < 3 {
			return false, fmt.Errorf("%d Preempted events by the podgroup, want 3", n)
		}
		return true, nil
	})
}

// A gang that needs more victims than the PDB allows is refused: no web
// pod goes, the gang stays pending, and the refusal names the PDB in an
// event on the PodGroup and in its PodGroupScheduled condition.
func TestGangRefusedBeyondBudgetNamesIt(t *testing.T) {
	c := newCluster(t, 2)
	c.gang(t, "train", 3)
	budgetRef := "pdb " + c.ns + "/web"
	testenv.WaitFor(t, 2*testenv.DefaultWait, "an event on PodGroup train naming "+budgetRef, func(ctx context.Context) (bool, error) {
		evs, err := cp.Client.EventsV1().Events(c.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, ev := range evs.Items {
			if ev.Regarding.Kind == "PodGroup" && ev.Regarding.Name == "train" && ev.Reason == budget.EventPreemptionBlockedByBudget && strings.Contains(ev.Note, budgetRef) {
				return true, nil
			}
		}
		return false, fmt.Errorf("no %s event on PodGroup train naming %s among %d events", budget.EventPreemptionBlockedByBudget, budgetRef, len(evs.Items))
	})
	testenv.WaitFor(t, testenv.DefaultWait, "PodGroup train's PodGroupScheduled condition names "+budgetRef, func(ctx context.Context) (bool, error) {
		pg, err := cp.Client.SchedulingV1beta1().PodGroups(c.ns).Get(ctx, "train", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cond := apimeta.FindStatusCondition(pg.Status.Conditions, schedulingv1beta1.PodGroupInitiallyScheduled)
		if cond == nil || cond.Status != metav1.ConditionFalse || !strings.Contains(cond.Message, budgetRef) {
			return false, fmt.Errorf("condition %+v", cond)
		}
		return true, nil
	})
	testenv.Holds(t, 5*time.Second, "no web pod is disrupted", c.webGoneAtMost(0))
	pods, err := env.ListPods(testenv.Context(t), c.ns, map[string]string{"gang": "train"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			t.Errorf("gang pod %s bound to %s", p.Name, p.Spec.NodeName)
		}
	}
	// The budget frees: the gang is retried and preempts.
	if err := cp.Client.PolicyV1().PodDisruptionBudgets(c.ns).Delete(testenv.Context(t), "web", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 2*testenv.DefaultWait, "all 3 pods of gang train bound once the PDB is gone", c.bound("train", 3))
}
