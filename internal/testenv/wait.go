package testenv

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition is polled by WaitFor and Holds. An error that comes with false
// says why the condition does not hold yet.
type Condition func(ctx context.Context) (bool, error)

// WaitFor polls cond every 100ms until it returns true, and fails the test
// with what and cond's last error if that takes longer than timeout. An
// error that comes with true is ignored.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond Condition) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	ctx := waitContext(t, deadline)
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

// waitContext is the context WaitFor and Holds pass to cond: it ends with
// the test, or a grace period after deadline, so that a condition's last
// call may run to the deadline. Context's 2 minutes do not bound it: a
// wait of 15 minutes (the quick start's build on a busy machine) is 15
// minutes.
func waitContext(t testing.TB, deadline time.Time) context.Context {
	ctx, cancel := context.WithDeadline(t.Context(), deadline.Add(waitGrace))
	t.Cleanup(cancel)
	return ctx
}

// waitGrace is how long a condition's call may outlast its wait.
const waitGrace = 30 * time.Second

// Holds checks cond every 100ms for duration and fails the test with what
// if it is ever false or fails.
func Holds(t testing.TB, duration time.Duration, what string, cond Condition) {
	t.Helper()
	deadline := time.Now().Add(duration)
	ctx := waitContext(t, deadline)
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

// NodeReady holds when the node is Ready and has no taints.
func (e *Env) NodeReady(name string) Condition {
	return func(ctx context.Context) (bool, error) {
		node, err := e.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
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
	}
}

// PodRunningReady holds when the pod is Running and its Ready condition is
// ready.
func (e *Env) PodRunningReady(ns, name string, ready bool) Condition {
	return func(ctx context.Context) (bool, error) {
		pod, err := e.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if pod.Status.Phase != corev1.PodRunning || PodReady(pod) != ready {
			return false, fmt.Errorf("pod %s/%s is %s, Ready=%q", ns, name, pod.Status.Phase, PodCondition(pod, corev1.PodReady))
		}
		return true, nil
	}
}

// BoundTo holds when the pod is bound to node ("" for any node).
func (e *Env) BoundTo(ns, name, node string) Condition {
	return func(ctx context.Context) (bool, error) {
		p, err := e.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Spec.NodeName == "" || (node != "" && p.Spec.NodeName != node) {
			return false, fmt.Errorf("pod %s/%s is on node %q, nominated %q", ns, name, p.Spec.NodeName, p.Status.NominatedNodeName)
		}
		return true, nil
	}
}

// PDBStatusIs holds when the PDB's status is up to date (observedGeneration
// == generation) and has want's currentHealthy, desiredHealthy,
// disruptionsAllowed and expectedPods.
func (e *Env) PDBStatusIs(ns, name string, want policyv1.PodDisruptionBudgetStatus) Condition {
	return func(ctx context.Context) (bool, error) {
		pdb, err := e.Client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{})
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

// EventFor holds when an event with reason was recorded on the pod and its
// note contains every one of want.
func (e *Env) EventFor(ns, pod, reason string, want ...string) Condition {
	return func(ctx context.Context) (bool, error) {
		list, err := e.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		var seen []string
		for _, ev := range list.Items {
			if ev.Regarding.Name != pod || ev.Reason != reason {
				continue
			}
			ok := true
			for _, w := range want {
				ok = ok && strings.Contains(ev.Note, w)
			}
			if ok {
				return true, nil
			}
			seen = append(seen, ev.Note)
		}
		return false, fmt.Errorf("events %s on %s: %q", reason, pod, seen)
	}
}
