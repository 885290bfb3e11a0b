package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"k8s.io/kubernetes/pkg/scheduler"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	schedscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/profile"
	"k8s.io/utils/ptr"

	"github.com/budgetguard/budgetguard/plugins/budgetpreemption"
	"github.com/budgetguard/budgetguard/sandbox"
)

// Priorities of the preemption tests' PriorityClasses.
const (
	lowPriority  = 0
	highPriority = 1000
	// criticalPriority is above the override threshold the tests configure.
	criticalPriority = 100000
)

// startScheduler runs a real kube-scheduler against the shared control plane
// until the test ends. Its one profile, named after ns so that it schedules
// only this test's pods, uses BudgetAwarePreemption with the given args (a
// YAML flow mapping such as "{actuation: Delete}"), or upstream
// DefaultPreemption when args is "". It returns the profile's name.
func startScheduler(t *testing.T, ns, args string) string {
	t.Helper()
	name, err := runScheduler(t, ns, args)
	if err != nil {
		t.Fatalf("start scheduler: %v", err)
	}
	return name
}

// runScheduler is startScheduler returning scheduler.New's error.
func runScheduler(t *testing.T, ns, args string) (string, error) {
	t.Helper()
	name := "sched-" + ns
	doc := "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: " + name + "\n"
	if args != "" {
		doc += `  plugins:
    postFilter:
      enabled:
      - name: BudgetAwarePreemption
      disabled:
      - name: DefaultPreemption
  pluginConfig:
  - name: BudgetAwarePreemption
    args: ` + args + "\n"
	}
	obj, _, err := schedscheme.Codecs.UniversalDecoder().Decode([]byte(doc), nil, nil)
	if err != nil {
		return "", fmt.Errorf("decode scheduler configuration: %w", err)
	}
	cfg := obj.(*schedconfig.KubeSchedulerConfiguration)

	ctx, cancel := context.WithCancel(context.Background())
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: cp.Client.EventsV1()})
	broadcaster.StartRecordingToSink(ctx.Done())
	factory := scheduler.NewInformerFactory(cp.Client, 0)
	sched, err := scheduler.New(ctx, cp.Client, factory, nil, profile.NewRecorderFactory(broadcaster),
		scheduler.WithKubeConfig(cp.Config),
		scheduler.WithProfiles(cfg.Profiles...),
		scheduler.WithPodInitialBackoffSeconds(1),
		scheduler.WithPodMaxBackoffSeconds(2),
		scheduler.WithFrameworkOutOfTreeRegistry(frameworkruntime.Registry{budgetpreemption.Name: budgetpreemption.New}),
	)
	if err != nil {
		cancel()
		broadcaster.Shutdown()
		return "", err
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	if err := sched.WaitForHandlersSync(ctx); err != nil {
		cancel()
		return "", fmt.Errorf("scheduler handlers: %w", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sched.Run(ctx)
	}()
	dumpOnFailure(t, ns)
	t.Cleanup(func() {
		cancel()
		<-done
		factory.Shutdown()
		broadcaster.Shutdown()
	})
	return name, nil
}

// priorityClasses creates low, high and critical PriorityClasses named
// after ns and returns their names.
func priorityClasses(t *testing.T, ns string) (low, high, critical string) {
	t.Helper()
	ctx := testContext(t)
	names := make([]string, 0, 3)
	for _, v := range []int32{lowPriority, highPriority, criticalPriority} {
		pc, err := cp.Client.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", ns, v)},
			Value:      v,
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create PriorityClass: %v", err)
		}
		t.Cleanup(func() {
			_ = cp.Client.SchedulingV1().PriorityClasses().Delete(context.Background(), pc.Name, metav1.DeleteOptions{})
		})
		names = append(names, pc.Name)
	}
	return names[0], names[1], names[2]
}

// readyNode creates a 4-CPU node and waits until the simulated kubelet has
// made it Ready and untainted.
func readyNode(t *testing.T, ns string) string {
	t.Helper()
	n := createNode(t, ns, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")})
	waitFor(t, defaultWait, "node "+n.Name+" Ready and untainted", func(ctx context.Context) (bool, error) {
		node, err := cp.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if len(node.Spec.Taints) > 0 {
			return false, fmt.Errorf("taints %v", node.Spec.Taints)
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, fmt.Errorf("not Ready")
	})
	return n.Name
}

// workload creates a ReplicaSet of n Ready 1-CPU pods of priority class pc
// on node, waits for them, and then points the template at a node that does
// not exist and makes it never Ready, so that replacements of disrupted pods
// neither take the node's CPU back nor restore the budget. It returns the
// pods' UIDs.
func workload(t *testing.T, ns, name, node, pc string, n int32) map[types.UID]string {
	t.Helper()
	return workloadWith(t, ns, name, node, pc, n, true)
}

// workloadWith is workload whose pods are Running but never Ready unless
// ready is true.
func workloadWith(t *testing.T, ns, name, node, pc string, n int32, ready bool) map[types.UID]string {
	t.Helper()
	ctx := testContext(t)
	lbls := map[string]string{"app": name}
	var annotations map[string]string
	if !ready {
		annotations = map[string]string{sandbox.ReadinessAnnotation: sandbox.ReadinessNever}
	}
	tmpl := podTemplate(node, lbls, annotations)
	tmpl.Spec.PriorityClassName = pc
	tmpl.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("1")
	_, err := cp.Client.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(n),
			Selector: &metav1.LabelSelector{MatchLabels: lbls},
			Template: tmpl,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create ReplicaSet %s/%s: %v", ns, name, err)
	}
	var pods []corev1.Pod
	if ready {
		pods = waitForReadyPods(t, ns, lbls, int(n))
	} else {
		waitFor(t, defaultWait, fmt.Sprintf("%d Running pods of %s", n, name), func(ctx context.Context) (bool, error) {
			list, err := listPods(ctx, ns, lbls)
			if err != nil {
				return false, err
			}
			pods = list
			running := 0
			for _, p := range list {
				if p.Status.Phase == corev1.PodRunning {
					running++
				}
			}
			return running == int(n) && len(list) == int(n), fmt.Errorf("%d pods, %d Running", len(list), running)
		})
	}
	uids := map[types.UID]string{}
	for _, p := range pods {
		uids[p.UID] = p.Name
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		rs, err := cp.Client.AppsV1().ReplicaSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		rs.Spec.Template.Spec.NodeName = "nowhere-" + ns
		if rs.Spec.Template.Annotations == nil {
			rs.Spec.Template.Annotations = map[string]string{}
		}
		rs.Spec.Template.Annotations[sandbox.ReadinessAnnotation] = sandbox.ReadinessNever
		_, err = cp.Client.AppsV1().ReplicaSets(ns).Update(ctx, rs, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("update ReplicaSet %s/%s: %v", ns, name, err)
	}
	return uids
}

// dumpOnFailure logs the namespace's pods and events when the test fails.
func dumpOnFailure(t *testing.T, ns string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), defaultWait)
		defer cancel()
		if pods, err := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err == nil {
			for _, p := range pods.Items {
				t.Logf("pod %s: node %q nominated %q phase %s deleting %v", p.Name, p.Spec.NodeName, p.Status.NominatedNodeName, p.Status.Phase, p.DeletionTimestamp != nil)
			}
		}
		if evs, err := cp.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{}); err == nil {
			for _, e := range evs.Items {
				t.Logf("event %s %s: %s", e.Regarding.Name, e.Reason, e.Note)
			}
		}
		if pdbs, err := cp.Client.PolicyV1().PodDisruptionBudgets(ns).List(ctx, metav1.ListOptions{}); err == nil {
			for _, p := range pdbs.Items {
				t.Logf("pdb %s: %+v", p.Name, p.Status)
			}
		}
	})
}

// createPDB creates a PDB with maxUnavailable on app=name.
func createPDB(t *testing.T, ns, name string, maxUnavailable int32) {
	t.Helper()
	_, err := cp.Client.PolicyV1().PodDisruptionBudgets(ns).Create(testContext(t), &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(maxUnavailable)),
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create PDB: %v", err)
	}
}

// createPreemptor creates a pod for scheduler schedName that asks for cpu
// and may only run on nodes.
func createPreemptor(t *testing.T, ns, name, schedName, pc, cpu string, nodes ...string) {
	t.Helper()
	// A field selector term takes one node name; terms are ORed.
	terms := make([]corev1.NodeSelectorTerm, 0, len(nodes))
	for _, n := range nodes {
		terms = append(terms, corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{
			Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{n},
		}}})
	}
	_, err := cp.Client.CoreV1().Pods(ns).Create(testContext(t), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"role": "preemptor"}},
		Spec: corev1.PodSpec{
			SchedulerName:                 schedName,
			PriorityClassName:             pc,
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms},
			}},
			Containers: []corev1.Container{{
				Name:      "app",
				Image:     "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create preemptor %s: %v", name, err)
	}
}

// gone counts the pods of uids that are deleted or terminating.
func gone(ctx context.Context, ns string, uids map[types.UID]string) (int, error) {
	list, err := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	alive := 0
	for _, p := range list.Items {
		if _, ok := uids[p.UID]; ok && p.DeletionTimestamp == nil {
			alive++
		}
	}
	return len(uids) - alive, nil
}

// boundTo is a waitFor condition: the pod is bound to node ("" for any).
func boundTo(ns, name, node string) func(ctx context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		p, err := getPod(ctx, ns, name)
		if err != nil {
			return false, err
		}
		if p.Spec.NodeName == "" || (node != "" && p.Spec.NodeName != node) {
			return false, fmt.Errorf("pod %s/%s is on node %q, nominated %q", ns, name, p.Spec.NodeName, p.Status.NominatedNodeName)
		}
		return true, nil
	}
}

// eventFor is a waitFor condition: an event with reason was recorded on the
// pod, and its note contains every one of want.
func eventFor(ns, pod, reason string, want ...string) func(ctx context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		list, err := cp.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		var seen []string
		for _, e := range list.Items {
			if e.Regarding.Name != pod || e.Reason != reason {
				continue
			}
			ok := true
			for _, w := range want {
				ok = ok && strings.Contains(e.Note, w)
			}
			if ok {
				return true, nil
			}
			seen = append(seen, e.Note)
		}
		return false, fmt.Errorf("events %s on %s: %q", reason, pod, seen)
	}
}

// goneAtMost is a holds condition: at most n pods of uids are disrupted.
func goneAtMost(ns string, uids map[types.UID]string, n int) func(ctx context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		g, err := gone(ctx, ns, uids)
		if apierrors.IsNotFound(err) {
			return false, err
		}
		return g <= n, err
	}
}

// goneExactly is a waitFor condition: exactly n pods of uids are disrupted.
func goneExactly(ns string, uids map[types.UID]string, n int) func(ctx context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		g, err := gone(ctx, ns, uids)
		if err != nil {
			return false, err
		}
		if g != n {
			return false, fmt.Errorf("%d of %d pods disrupted, want %d", g, len(uids), n)
		}
		return true, nil
	}
}
