package testenv

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	kruiseclientset "github.com/openkruise/kruise-api/client/clientset/versioned"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/utils/ptr"

	"github.com/budgetguard/budgetguard/internal/testobj"
)

// DefaultWait bounds how long a test waits for the control plane to act.
// Everything here normally happens within a second or two.
const DefaultWait = 30 * time.Second

// Env is a test's handle on a cluster: the clients its helpers use.
type Env struct {
	Client kubernetes.Interface
	// Kruise is needed only by the PodUnavailableBudget helpers.
	Kruise kruiseclientset.Interface
	// Config is needed only by CreatePUBv1beta1.
	Config *rest.Config
}

// New returns an Env that works through client.
func New(client kubernetes.Interface) *Env { return &Env{Client: client} }

// Context returns a context that ends with the test, or after 2 minutes.
func Context(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// creator is a typed client's Create.
type creator[T any] interface {
	Create(context.Context, T, metav1.CreateOptions) (T, error)
}

// Create creates obj through c and fails the test when that fails.
func Create[T any](t testing.TB, c creator[T], obj T) T {
	t.Helper()
	got, err := c.Create(Context(t), obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create %T: %v", obj, err)
	}
	return got
}

var nonDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// NewNamespace creates a namespace named after the test, with a random
// suffix. Its Deployments, ReplicaSets, PDBs, PUBs (with a Kruise client)
// and pods, then the namespace, are deleted when the test ends, owners first
// so that no controller recreates the pods, budgets before pods so that no
// webhook refuses their deletion.
func (e *Env) NewNamespace(t testing.TB) string {
	t.Helper()
	prefix := nonDNS.ReplaceAllString(strings.ToLower(t.Name()), "-")
	prefix = strings.Trim(prefix[:min(len(prefix), 40)], "-") + "-"
	ns := Create[*corev1.Namespace](t, e.Client.CoreV1().Namespaces(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix},
	})
	t.Cleanup(func() { e.deleteNamespace(t, ns.Name) })
	return ns.Name
}

func (e *Env) deleteNamespace(t testing.TB, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), DefaultWait)
	defer cancel()
	all := metav1.ListOptions{}
	now := metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}
	c := e.Client
	steps := []struct {
		what   string
		delete func() error
	}{
		{"deployments", func() error { return c.AppsV1().Deployments(ns).DeleteCollection(ctx, now, all) }},
		{"replicasets", func() error { return c.AppsV1().ReplicaSets(ns).DeleteCollection(ctx, now, all) }},
		{"pdbs", func() error { return c.PolicyV1().PodDisruptionBudgets(ns).DeleteCollection(ctx, now, all) }},
		// Before the pods: the sandbox's stand-in for OpenKruise's webhook
		// refuses to delete a Ready pod its PUB allows no more.
		{"pubs", func() error {
			if e.Kruise == nil {
				return nil
			}
			return e.Kruise.PolicyV1alpha1().PodUnavailableBudgets(ns).DeleteCollection(ctx, now, all)
		}},
		{"pods", func() error { return c.CoreV1().Pods(ns).DeleteCollection(ctx, now, all) }},
		{"namespace", func() error { return c.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}) }},
	}
	for _, s := range steps {
		if err := s.delete(); err != nil && !apierrors.IsNotFound(err) {
			t.Logf("clean up %s in namespace %s: %v", s.what, ns, err)
		}
	}
}

// CreateNode creates a node whose name starts with ns (so that tests do not
// share nodes) from the builder's node, and deletes it when the test ends.
func (e *Env) CreateNode(t testing.TB, ns string, node *testobj.NodeWrapper) *corev1.Node {
	t.Helper()
	n := Create(t, e.Client.CoreV1().Nodes(), node.GenerateName(ns+"-node-").Obj())
	t.Cleanup(func() {
		_ = e.Client.CoreV1().Nodes().Delete(context.Background(), n.Name, metav1.DeleteOptions{})
	})
	return n
}

// ReadyNode creates a node with cpu CPUs and room for 110 pods and waits
// until the simulated kubelet has made it Ready and untainted.
func (e *Env) ReadyNode(t testing.TB, ns, cpu string) string {
	t.Helper()
	n := e.CreateNode(t, ns, testobj.MakeNode().Capacity(cpu, "110"))
	WaitFor(t, DefaultWait, "node "+n.Name+" Ready and untainted", e.NodeReady(n.Name))
	return n.Name
}

// PriorityClass creates a PriorityClass named after ns and value, deleted
// when the test ends, and returns its name.
func (e *Env) PriorityClass(t testing.TB, ns string, value int32) string {
	t.Helper()
	pc := Create(t, e.Client.SchedulingV1().PriorityClasses(), &schedulingv1.PriorityClass{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", ns, value)},
		Value:      value,
	})
	t.Cleanup(func() {
		_ = e.Client.SchedulingV1().PriorityClasses().Delete(context.Background(), pc.Name, metav1.DeleteOptions{})
	})
	// The Priority admission plugin reads PriorityClasses from an informer:
	// a pod created right away may be refused ("no PriorityClass with
	// name ... was found"). Returned once a dry run of a pod that uses it
	// gets past that check.
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "priorityclass-probe"},
		Spec: corev1.PodSpec{
			PriorityClassName: pc.Name,
			Containers:        []corev1.Container{{Name: "probe", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
	WaitFor(t, DefaultWait, "PriorityClass "+pc.Name+" known to admission", func(ctx context.Context) (bool, error) {
		_, err := e.Client.CoreV1().Pods(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil && strings.Contains(err.Error(), "no PriorityClass with name") {
			return false, err
		}
		return true, nil
	})
	return pc.Name
}

// CreatePod creates the pod in ns.
func (e *Env) CreatePod(t testing.TB, ns string, pod *testobj.PodWrapper) *corev1.Pod {
	t.Helper()
	return Create(t, e.Client.CoreV1().Pods(ns), pod.Obj())
}

// CreatePDB creates the PDB in ns.
func (e *Env) CreatePDB(t testing.TB, ns string, pdb *testobj.PDBWrapper) *policyv1.PodDisruptionBudget {
	t.Helper()
	return Create(t, e.Client.PolicyV1().PodDisruptionBudgets(ns), pdb.Obj())
}

// CreateReplicaSet creates the ReplicaSet in ns.
func (e *Env) CreateReplicaSet(t testing.TB, ns string, rs *testobj.ReplicaSetWrapper) *appsv1.ReplicaSet {
	t.Helper()
	return Create(t, e.Client.AppsV1().ReplicaSets(ns), rs.Obj())
}

// ListPods lists the pods in ns that match selector.
func (e *Env) ListPods(ctx context.Context, ns string, selector map[string]string) ([]corev1.Pod, error) {
	list, err := e.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(selector).String()})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// WaitForReadyPods waits until exactly n pods in ns match selector and all
// of them are Running, Ready and not terminating, and returns them.
func (e *Env) WaitForReadyPods(t testing.TB, ns string, selector map[string]string, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	WaitFor(t, DefaultWait, fmt.Sprintf("%d Running and Ready pods %v in %s", n, selector, ns), func(ctx context.Context) (bool, error) {
		var err error
		if pods, err = e.ListPods(ctx, ns, selector); err != nil {
			return false, err
		}
		ready := 0
		for i := range pods {
			if pods[i].Status.Phase == corev1.PodRunning && PodReady(&pods[i]) && pods[i].DeletionTimestamp == nil {
				ready++
			}
		}
		if len(pods) != n || ready != n {
			return false, fmt.Errorf("%d pods, %d of them Running and Ready", len(pods), ready)
		}
		return true, nil
	})
	return pods
}

// DumpOnFailure logs the namespace's pods, events and PDBs when the test
// fails.
func (e *Env) DumpOnFailure(t testing.TB, ns string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), DefaultWait)
		defer cancel()
		if pods, err := e.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err == nil {
			for _, p := range pods.Items {
				t.Logf("pod %s: node %q nominated %q phase %s deleting %v", p.Name, p.Spec.NodeName, p.Status.NominatedNodeName, p.Status.Phase, p.DeletionTimestamp != nil)
			}
		}
		if evs, err := e.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{}); err == nil {
			for _, ev := range evs.Items {
				t.Logf("event %s %s: %s", ev.Regarding.Name, ev.Reason, ev.Note)
			}
		}
		if pdbs, err := e.Client.PolicyV1().PodDisruptionBudgets(ns).List(ctx, metav1.ListOptions{}); err == nil {
			for _, p := range pdbs.Items {
				t.Logf("pdb %s: %+v", p.Name, p.Status)
			}
		}
	})
}

// PodReady reports whether the pod's Ready condition is True.
func PodReady(pod *corev1.Pod) bool {
	return PodCondition(pod, corev1.PodReady) == corev1.ConditionTrue
}

// PodCondition returns the status of the pod's condition t, or "".
func PodCondition(pod *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// Counter returns the value of the counter name in the legacy registry
// that components serve on /metrics, in the series whose labels include
// every one of labels; 0 when there is none.
func Counter(t testing.TB, name string, labels map[string]string) float64 {
	t.Helper()
	v, _ := Metric(t, name, labels)
	return v
}

// Metric returns the value of the counter or gauge name in the legacy
// registry, in the first series whose labels include every one of labels,
// and whether there is such a series.
func Metric(t testing.TB, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatalf("gather metrics: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue series
				}
			}
			if g := m.GetGauge(); g != nil {
				return g.GetValue(), true
			}
			return m.GetCounter().GetValue(), true
		}
	}
	return 0, false
}
