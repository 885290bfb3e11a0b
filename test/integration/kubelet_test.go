package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/budgetguard/budgetguard/sandbox"
)

// These tests cover the simulated kubelet's readiness annotation; see the
// sandbox package documentation.

func readiness(value string) map[string]string {
	return map[string]string{sandbox.ReadinessAnnotation: value}
}

func TestControlPlaneReadinessNever(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	node := createNode(t, ns, nil)
	pod := createPod(t, ns, "never", node.Name, readiness(sandbox.ReadinessNever))
	waitFor(t, defaultWait, "pod to be Running and not Ready", podRunningReady(ns, pod.Name, false))
	holds(t, 3*time.Second, "the pod stays Running and not Ready", podRunningReady(ns, pod.Name, false))
}

func TestControlPlaneReadinessInvalidMeansNotReady(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	node := createNode(t, ns, nil)
	pod := createPod(t, ns, "typo", node.Name, readiness("sometimes"))
	waitFor(t, defaultWait, "pod to be Running and not Ready", podRunningReady(ns, pod.Name, false))
	holds(t, 2*time.Second, "the pod stays Running and not Ready", podRunningReady(ns, pod.Name, false))
}

func TestControlPlaneReadinessCrashLoop(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	node := createNode(t, ns, nil)
	pod := createPod(t, ns, "crashy", node.Name, readiness(sandbox.ReadinessCrashLoop))
	waitFor(t, defaultWait, "pod to be Running and not Ready", podRunningReady(ns, pod.Name, false))

	// With the default interval of 2s, the restart count reaches 2 after
	// about 4s. The pod must not be Ready at any point on the way.
	var restarts int32
	waitFor(t, defaultWait, "restartCount to reach 2 while the pod is never Ready", func(ctx context.Context) (bool, error) {
		p, err := getPod(ctx, ns, pod.Name)
		if err != nil {
			return false, err
		}
		if podReady(p) {
			t.Fatalf("crashlooping pod became Ready: %+v", p.Status)
		}
		if p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) != 1 {
			return false, fmt.Errorf("phase %s, %d container statuses", p.Status.Phase, len(p.Status.ContainerStatuses))
		}
		cs := p.Status.ContainerStatuses[0]
		if cs.RestartCount < restarts {
			t.Fatalf("restartCount went down from %d to %d", restarts, cs.RestartCount)
		}
		restarts = cs.RestartCount
		if cs.Ready || cs.State.Waiting == nil || cs.State.Waiting.Reason != "CrashLoopBackOff" {
			t.Fatalf("container status %+v, want not ready and waiting in CrashLoopBackOff", cs)
		}
		return restarts >= 2, fmt.Errorf("restartCount %d", restarts)
	})
}

func TestControlPlaneReadinessAfter(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	node := createNode(t, ns, nil)
	const delay = 2 * time.Second
	began := time.Now()
	pod := createPod(t, ns, "slow", node.Name, readiness(sandbox.ReadinessAfter(delay)))
	waitFor(t, defaultWait, "pod to be Ready", podRunningReady(ns, pod.Name, true))
	if took := time.Since(began); took < delay {
		t.Errorf("pod annotated %s was Ready after %s", sandbox.ReadinessAfter(delay), took)
	}
	p, err := getPod(testContext(t), ns, pod.Name)
	if err != nil {
		t.Fatal(err)
	}
	// Timestamps have a resolution of one second.
	var readyAt time.Time
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			readyAt = c.LastTransitionTime.Time
		}
	}
	if gap := readyAt.Sub(p.Status.StartTime.Time); gap < delay-time.Second {
		t.Errorf("Ready condition changed %s after the pod's start, want about %s", gap, delay)
	}
}

// TestControlPlaneReadinessFlip changes the annotation on a live pod and
// expects the pod's readiness to follow.
func TestControlPlaneReadinessFlip(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	node := createNode(t, ns, nil)
	pod := createPod(t, ns, "flip", node.Name, nil)
	waitFor(t, defaultWait, "pod to be Ready", podRunningReady(ns, pod.Name, true))

	setReadiness(t, ns, pod.Name, sandbox.ReadinessNever)
	waitFor(t, defaultWait, "pod to lose readiness", podRunningReady(ns, pod.Name, false))

	setReadiness(t, ns, pod.Name, sandbox.ReadinessAfter(time.Second))
	waitFor(t, defaultWait, "pod to become Ready a second later", podRunningReady(ns, pod.Name, true))

	setReadiness(t, ns, pod.Name, sandbox.ReadinessCrashLoop)
	waitFor(t, defaultWait, "pod to lose readiness in a crash loop", podRunningReady(ns, pod.Name, false))

	setReadiness(t, ns, pod.Name, sandbox.ReadinessReady)
	waitFor(t, defaultWait, "pod to be Ready again", podRunningReady(ns, pod.Name, true))
}
