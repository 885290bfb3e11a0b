package integration

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
)

// defaultWait bounds how long a test waits for the control plane to act.
// Everything here normally happens within a second or two.
const defaultWait = 30 * time.Second

// testContext returns a context that ends with the test.
func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

var nonDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// newNamespace creates a namespace named after the test, with a random
// suffix. Its pods, ReplicaSets, Deployments and PDBs are deleted when the
// test ends (there is no namespace or garbage collector controller here).
func newNamespace(t *testing.T) string {
	t.Helper()
	ctx := testContext(t)
	prefix := nonDNS.ReplaceAllString(strings.ToLower(t.Name()), "-")
	prefix = strings.Trim(prefix[:min(len(prefix), 40)], "-") + "-"
	ns, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() { cleanupNamespace(t, ns.Name) })
	return ns.Name
}

func cleanupNamespace(t *testing.T, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), defaultWait)
	defer cancel()
	all := metav1.ListOptions{}
	now := metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}
	// Owners first, so that no controller recreates the pods.
	steps := []struct {
		what   string
		delete func() error
	}{
		{"deployments", func() error { return cp.Client.AppsV1().Deployments(ns).DeleteCollection(ctx, now, all) }},
		{"replicasets", func() error { return cp.Client.AppsV1().ReplicaSets(ns).DeleteCollection(ctx, now, all) }},
		{"pdbs", func() error { return cp.Client.PolicyV1().PodDisruptionBudgets(ns).DeleteCollection(ctx, now, all) }},
		{"pods", func() error { return cp.Client.CoreV1().Pods(ns).DeleteCollection(ctx, now, all) }},
		{"namespace", func() error { return cp.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}) }},
	}
	for _, s := range steps {
		if err := s.delete(); err != nil && !apierrors.IsNotFound(err) {
			t.Logf("clean up %s in namespace %s: %v", s.what, ns, err)
		}
	}
}

// createNode creates a Node named after ns (so that tests do not share
// nodes) with the given status capacity, which may be nil, and deletes it
// when the test ends.
func createNode(t *testing.T, ns string, capacity corev1.ResourceList) *corev1.Node {
	t.Helper()
	ctx := testContext(t)
	node, err := cp.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{GenerateName: ns + "-node-"},
		Status:     corev1.NodeStatus{Capacity: capacity},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create node: %v", err)
	}
	t.Cleanup(func() {
		_ = cp.Client.CoreV1().Nodes().Delete(context.Background(), node.Name, metav1.DeleteOptions{})
	})
	return node
}

// podTemplate returns a pod template with one container, bound to node (there
// is no scheduler here), labelled with labels and annotated with annotations.
func podTemplate(node string, labels, annotations map[string]string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			Containers: []corev1.Container{{
				Name:  "app",
				Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("100m"),
				}},
			}},
		},
	}
}

// createReplicaSet creates a ReplicaSet whose pods are bound to node through
// the template's spec.nodeName, so the ReplicaSet controller creates them
// bound and the simulated kubelet runs them.
func createReplicaSet(t *testing.T, ns, name, node string, replicas int32, annotations map[string]string) *appsv1.ReplicaSet {
	t.Helper()
	ctx := testContext(t)
	lbls := map[string]string{"app": name}
	rs, err := cp.Client.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: lbls},
			Template: podTemplate(node, lbls, annotations),
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create ReplicaSet %s/%s: %v", ns, name, err)
	}
	return rs
}

// createPod creates a bare pod bound to node.
func createPod(t *testing.T, ns, name, node string, annotations map[string]string) *corev1.Pod {
	t.Helper()
	ctx := testContext(t)
	tmpl := podTemplate(node, map[string]string{"pod": name}, annotations)
	pod, err := cp.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: tmpl.Labels, Annotations: tmpl.Annotations},
		Spec:       tmpl.Spec,
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s/%s: %v", ns, name, err)
	}
	return pod
}

// waitFor polls cond every 100ms until it returns true, and fails the test
// with what and cond's last error if that takes longer than timeout. An error
// that comes with false says why the condition does not hold yet; with true
// it is ignored.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx := testContext(t)
	deadline := time.Now().Add(timeout)
	var last error
	for {
		ok, err := cond(ctx)
		if ok {
			return
		}
		if err != nil {
			last = err
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s (last error: %v)", timeout, what, last)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// holds checks cond every 100ms for duration and fails the test with what
// if it is ever false.
func holds(t *testing.T, duration time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx := testContext(t)
	deadline := time.Now().Add(duration)
	for time.Now().Before(deadline) {
		ok, err := cond(ctx)
		if err != nil {
			t.Fatalf("checking that %s: %v", what, err)
		}
		if !ok {
			t.Fatalf("expected that %s for %s, but it did not hold", what, duration)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// getPod reads a pod from the apiserver.
func getPod(ctx context.Context, ns, name string) (*corev1.Pod, error) {
	return cp.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
}

// podReady reports whether the pod's Ready condition is True.
func podReady(pod *corev1.Pod) bool {
	return podCondition(pod, corev1.PodReady) == corev1.ConditionTrue
}

func podCondition(pod *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// podRunningReady is a waitFor condition: the pod is Running and its Ready
// condition is ready.
func podRunningReady(ns, name string, ready bool) func(ctx context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		pod, err := getPod(ctx, ns, name)
		if err != nil {
			return false, err
		}
		if pod.Status.Phase != corev1.PodRunning || podReady(pod) != ready {
			return false, fmt.Errorf("pod %s/%s is %s, Ready=%q", ns, name, pod.Status.Phase, podCondition(pod, corev1.PodReady))
		}
		return true, nil
	}
}

// listPods lists the pods in ns that match selector.
func listPods(ctx context.Context, ns string, selector map[string]string) ([]corev1.Pod, error) {
	list, err := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(selector).String()})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// waitForReadyPods waits until exactly n pods in ns match selector and all of
// them are Running and Ready, and returns them.
func waitForReadyPods(t *testing.T, ns string, selector map[string]string, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	waitFor(t, defaultWait, fmt.Sprintf("%d Running and Ready pods %v in %s", n, selector, ns), func(ctx context.Context) (bool, error) {
		var err error
		if pods, err = listPods(ctx, ns, selector); err != nil {
			return false, err
		}
		ready := 0
		for i := range pods {
			if pods[i].Status.Phase == corev1.PodRunning && podReady(&pods[i]) && pods[i].DeletionTimestamp == nil {
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

// pdbStatusIs is a waitFor condition: the PDB's status is up to date
// (observedGeneration == generation) and has the given numbers.
func pdbStatusIs(ns, name string, want policyv1.PodDisruptionBudgetStatus) func(ctx context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		pdb, err := cp.Client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got := pdb.Status
		if got.ObservedGeneration != pdb.Generation ||
			got.CurrentHealthy != want.CurrentHealthy ||
			got.DesiredHealthy != want.DesiredHealthy ||
			got.DisruptionsAllowed != want.DisruptionsAllowed ||
			got.ExpectedPods != want.ExpectedPods {
			return false, fmt.Errorf("pdb %s/%s: generation %d, status observedGeneration %d currentHealthy %d desiredHealthy %d disruptionsAllowed %d expectedPods %d",
				ns, name, pdb.Generation, got.ObservedGeneration, got.CurrentHealthy, got.DesiredHealthy, got.DisruptionsAllowed, got.ExpectedPods)
		}
		return true, nil
	}
}
