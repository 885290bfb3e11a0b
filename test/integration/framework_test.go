package integration

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/budgetguard/budgetguard/internal/testenv"
	"github.com/budgetguard/budgetguard/internal/testobj"
)

// env works through the shared control plane's client; TestMain sets it.
// Tests isolate themselves with env.NewNamespace and nodes named after their
// namespace (env.CreateNode).
var env *testenv.Env

// createReplicaSet creates a ReplicaSet of replicas pods labelled app=name,
// annotated with annotations and bound to node through the template's
// spec.nodeName, so the ReplicaSet controller creates them bound (there is
// no scheduler here) and the simulated kubelet runs them.
func createReplicaSet(t *testing.T, ns, name, node string, replicas int32, annotations map[string]string) *appsv1.ReplicaSet {
	t.Helper()
	tmpl := testobj.BoundPod(node).Label("app", name).Annotations(annotations).Template()
	return env.CreateReplicaSet(t, ns, testobj.MakeReplicaSet().Name(name).Replicas(replicas).Template(tmpl))
}

// createPod creates a bare pod labelled pod=name, bound to node.
func createPod(t *testing.T, ns, name, node string, annotations map[string]string) *corev1.Pod {
	t.Helper()
	return env.CreatePod(t, ns, testobj.BoundPod(node).Name(name).Label("pod", name).Annotations(annotations))
}

// podOnNewNode creates a namespace, a node and on it a bare pod named name
// with annotations, and waits until the pod is Running with its Ready
// condition ready.
func podOnNewNode(t *testing.T, name string, annotations map[string]string, ready bool) (string, *corev1.Pod) {
	t.Helper()
	ns := env.NewNamespace(t)
	node := env.CreateNode(t, ns, testobj.MakeNode())
	pod := createPod(t, ns, name, node.Name, annotations)
	testenv.WaitFor(t, testenv.DefaultWait, fmt.Sprintf("pod %s Running with Ready=%v", name, ready), env.PodRunningReady(ns, pod.Name, ready))
	return ns, pod
}
