package integration

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"github.com/budgetguard/budgetguard/internal/testenv"
	"github.com/budgetguard/budgetguard/internal/testobj"
	"github.com/budgetguard/budgetguard/internal/testsched"
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
	doc := testobj.SchedulerConfig{SchedulerName: name, Upstream: args == "", Args: args}.YAML()
	_, err := runSchedulerProfiles(t, ns, cp.Client, cp.Config, doc)
	return name, err
}

// runSchedulerProfiles runs a real kube-scheduler with client and kubeConfig
// and the profiles of docs (KubeSchedulerConfigurations, as
// testobj.SchedulerConfig renders them) until the test ends, or until the
// stop function it returns is called.
func runSchedulerProfiles(t *testing.T, ns string, client kubernetes.Interface, kubeConfig *rest.Config, docs ...string) (stop func(), err error) {
	t.Helper()
	stop, err = testsched.Run(t, client, kubeConfig, docs...)
	if err == nil {
		env.DumpOnFailure(t, ns)
	}
	return stop, err
}

// priorityClasses creates low, high and critical PriorityClasses named
// after ns and returns their names.
func priorityClasses(t *testing.T, ns string) (low, high, critical string) {
	t.Helper()
	return env.PriorityClass(t, ns, lowPriority), env.PriorityClass(t, ns, highPriority), env.PriorityClass(t, ns, criticalPriority)
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
	ctx := testenv.Context(t)
	lbls := map[string]string{"app": name}
	var annotations map[string]string
	if !ready {
		annotations = map[string]string{sandbox.ReadinessAnnotation: sandbox.ReadinessNever}
	}
	tmpl := testobj.BoundPod(node).Labels(lbls).Annotations(annotations).PriorityClass(pc).Template()
	tmpl.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("1")
	env.CreateReplicaSet(t, ns, testobj.MakeReplicaSet().Name(name).Replicas(n).Template(tmpl))
	var pods []corev1.Pod
	if ready {
		pods = env.WaitForReadyPods(t, ns, lbls, int(n))
	} else {
		testenv.WaitFor(t, testenv.DefaultWait, fmt.Sprintf("%d Running pods of %s", n, name), func(ctx context.Context) (bool, error) {
			list, err := env.ListPods(ctx, ns, lbls)
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
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
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

// createPreemptor creates a pod for scheduler schedName that asks for cpu
// and may only run on nodes.
func createPreemptor(t *testing.T, ns, name, schedName, pc, cpu string, nodes ...string) {
	t.Helper()
	env.CreatePod(t, ns, testobj.MakePod().Name(name).Label("role", "preemptor").
		SchedulerName(schedName).PriorityClass(pc).GracePeriod(0).OnNodes(nodes...).Container("app", cpu))
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
