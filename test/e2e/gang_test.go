package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/budgetguard/budgetguard/internal/sandboxtest"
	"github.com/budgetguard/budgetguard/internal/testenv"
	"github.com/budgetguard/budgetguard/internal/testobj"
	"github.com/budgetguard/budgetguard/sandbox"
)

// gangGates are the feature gates of workload-aware (gang) preemption,
// given to kube-apiserver and to the shipped scheduler alike.
var gangGates = testenv.FeatureGates(testenv.GangGate)

// TestShippedGangPreemption runs the shipped scheduler binary with the
// chart's config and RBAC and the gang gates on: a PodGroup that needs more
// victims than the PDB allows is refused, naming the PDB on the PodGroup,
// and preempts, within the budget, once the PDB allows enough. The gang
// path of kube-scheduler asks only a plugin named DefaultPreemption; this
// proves the binary hands it to BudgetAwarePreemption.
func TestShippedGangPreemption(t *testing.T) {
	dir := t.TempDir()
	buildBinaries(t, filepath.Join(dir, "bin"))
	opts := sandbox.DefaultOptions()
	opts.APIServerFlags = []string{"--authorization-mode=RBAC", testenv.PodGroupAPI, gangGates}
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cp := sandboxtest.Start(ctx, t, opts)
	env := testenv.New(cp.Client)

	ensureNamespace(t, cp.Client, releaseNS)
	objs := renderChart(t, releaseNS)
	applyAll(t, cp, objs, false)
	if t.Failed() {
		t.FailNow()
	}
	kubeconfig, _ := serviceAccountKubeconfig(t, cp, releaseNS, schedulerSA, dir)
	writeConfigMap(t, find(t, objs, "ConfigMap", "budgetguard-scheduler-config"), filepath.Join(dir, "scheduler-config"))
	setClientKubeconfig(t, filepath.Join(dir, "scheduler-config", "scheduler-config.yaml"), kubeconfig)
	scheduler := startComponent(t, "scheduler", filepath.Join(dir, "bin", "scheduler"),
		find(t, objs, "Deployment", "budgetguard-scheduler"), filepath.Join(dir, "scheduler-config"), kubeconfig,
		"--authentication-kubeconfig="+kubeconfig, "--authorization-kubeconfig="+kubeconfig, gangGates)
	scheduler.waitHealthy(t)

	const ns = "e2e-gang"
	ensureNamespace(t, cp.Client, ns)
	env.DumpOnFailure(t, ns)
	node := env.ReadyNode(t, ns, "4")
	low, high := env.PriorityClass(t, ns, 0), env.PriorityClass(t, ns, 1000)
	for i := range 4 {
		env.CreatePod(t, ns, testobj.MakePod().Name(fmt.Sprintf("web-%d", i)).Label("app", "web").
			PriorityClass(low).Node(node).Container("web", "1").GracePeriod(0))
	}
	env.WaitForReadyPods(t, ns, map[string]string{"app": "web"}, 4)
	env.CreatePDB(t, ns, testobj.MakePDB().Name("web").MatchLabels("app", "web").MinAvailable(2))
	testenv.WaitFor(t, time.Minute, "PDB web allows 2", env.PDBStatusIs(ns, "web", policyv1.PodDisruptionBudgetStatus{
		CurrentHealthy: 4, DesiredHealthy: 2, DisruptionsAllowed: 2, ExpectedPods: 4,
	}))

	// The Priority admission plugin reads PriorityClasses from an informer:
	// a new one may not be there yet.
	testenv.WaitFor(t, testenv.DefaultWait, "PodGroup train created", func(ctx context.Context) (bool, error) {
		_, err := cp.Client.SchedulingV1beta1().PodGroups(ns).Create(ctx, &schedulingv1beta1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Name: "train"},
			Spec: schedulingv1beta1.PodGroupSpec{
				SchedulingPolicy:  schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 3}},
				PriorityClassName: high,
			},
		}, metav1.CreateOptions{})
		return err == nil, err
	})
	for i := range 3 {
		p := testobj.MakePod().Name(fmt.Sprintf("train-%d", i)).Label("gang", "train").PriorityClass(high).
			SchedulerName(schedulerName).Container("train", "1").GracePeriod(0).Obj()
		p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("train")}
		testenv.Create(t, cp.Client.CoreV1().Pods(ns), p)
	}

	want := "pdb " + ns + "/web"
	var pgUID types.UID
	testenv.WaitFor(t, time.Minute, "a PreemptionBlockedByBudget event on PodGroup train naming "+want, func(ctx context.Context) (bool, error) {
		evs, err := cp.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, ev := range evs.Items {
			if ev.Regarding.Kind == "PodGroup" && ev.Regarding.Name == "train" && ev.Reason == "PreemptionBlockedByBudget" && strings.Contains(ev.Note, want) {
				t.Logf("event %s: %s", ev.Reason, ev.Note)
				pgUID = ev.Regarding.UID
				return true, nil
			}
		}
		return false, fmt.Errorf("%d events, none matches", len(evs.Items))
	})
	testenv.Holds(t, 3*time.Second, "all 4 web pods stay", func(ctx context.Context) (bool, error) {
		pods, err := env.ListPods(ctx, ns, map[string]string{"app": "web"})
		if err != nil {
			return false, err
		}
		for _, p := range pods {
			if p.DeletionTimestamp != nil {
				return false, fmt.Errorf("web pod %s is terminating", p.Name)
			}
		}
		if len(pods) != 4 {
			return false, fmt.Errorf("%d web pods", len(pods))
		}
		return true, nil
	})

	// The PDB now allows 3: the gang is retried and preempts 3 victims.
	pdb, err := cp.Client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pdb.Spec.MinAvailable = ptrIntOrString(1)
	if _, err := cp.Client.PolicyV1().PodDisruptionBudgets(ns).Update(ctx, pdb, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 2*time.Minute, "all 3 pods of gang train bound", func(ctx context.Context) (bool, error) {
		pods, err := env.ListPods(ctx, ns, map[string]string{"gang": "train"})
		if err != nil {
			return false, err
		}
		bound := 0
		for _, p := range pods {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		return bound == 3, fmt.Errorf("%d of 3 bound", bound)
	})
	pods, err := env.ListPods(ctx, ns, map[string]string{"app": "web"})
	if err != nil {
		t.Fatal(err)
	}
	left := 0
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			left++
		}
	}
	if left != 1 {
		t.Errorf("%d web pods left, want 1: the gang needed 3 victims and the PDB allowed 3", left)
	}
	data, err := os.ReadFile(scheduler.log)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "BudgetAwarePreemption@podGroupPostFilter") {
		t.Errorf("the scheduler's log does not say that pod groups preempt through BudgetAwarePreemption (plugins=...BudgetAwarePreemption@podGroupPostFilter)")
	}
	t.Logf("PodGroup train (%s) preempted within its budget", pgUID)
}
