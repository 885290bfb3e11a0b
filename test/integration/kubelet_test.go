package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/budgetguard/budgetguard/internal/testenv"
	"github.com/budgetguard/budgetguard/internal/testobj"
	"github.com/budgetguard/budgetguard/sandbox"
)

// These tests cover the simulated kubelet's readiness annotation; see the
// sandbox package documentation.

func readiness(value string) map[string]string {
	return map[string]string{sandbox.ReadinessAnnotation: value}
}

// TestControlPlaneReadinessNotReady: a pod annotated never Ready, or with a
// readiness value the kubelet does not know, runs and stays not Ready.
func TestControlPlaneReadinessNotReady(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, pod, readiness string
		hold                 time.Duration
	}{
		{name: "Never", pod: "never", readiness: sandbox.ReadinessNever, hold: 3 * time.Second},
		{name: "InvalidMeansNotReady", pod: "typo", readiness: "sometimes", hold: 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns, pod := podOnNewNode(t, tc.pod, readiness(tc.readiness), false)
			testenv.Holds(t, tc.hold, "the pod stays Running and not Ready", env.PodRunningReady(ns, pod.Name, false))
		})
	}
}

func TestControlPlaneReadinessCrashLoop(t *testing.T) {
	t.Parallel()
	ns, pod := podOnNewNode(t, "crashy", readiness(sandbox.ReadinessCrashLoop), false)

	// With the default interval of 2s, the restart count reaches 2 after
	// about 4s. The pod must not be Ready at any point on the way.
	var restarts int32
	testenv.WaitFor(t, testenv.DefaultWait, "restartCount to reach 2 while the pod is never Ready", func(ctx context.Context) (bool, error) {
		p, err := cp.Client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if testenv.PodReady(p) {
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
	ns := env.NewNamespace(t)
	node := env.CreateNode(t, ns, testobj.MakeNode())
	const delay = 2 * time.Second
	began := time.Now()
	pod := createPod(t, ns, "slow", node.Name, readiness(sandbox.ReadinessAfter(delay)))
	testenv.WaitFor(t, testenv.DefaultWait, "pod to be Ready", env.PodRunningReady(ns, pod.Name, true))
	if took := time.Since(began); took < delay {
		t.Errorf("pod annotated %s was Ready after %s", sandbox.ReadinessAfter(delay), took)
	}
	p, err := cp.Client.CoreV1().Pods(ns).Get(testenv.Context(t), pod.Name, metav1.GetOptions{})
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
	ns, pod := podOnNewNode(t, "flip", nil, true)

	setReadiness(t, ns, pod.Name, sandbox.ReadinessNever)
	testenv.WaitFor(t, testenv.DefaultWait, "pod to lose readiness", env.PodRunningReady(ns, pod.Name, false))

	setReadiness(t, ns, pod.Name, sandbox.ReadinessAfter(time.Second))
	testenv.WaitFor(t, testenv.DefaultWait, "pod to become Ready a second later", env.PodRunningReady(ns, pod.Name, true))

	setReadiness(t, ns, pod.Name, sandbox.ReadinessCrashLoop)
	testenv.WaitFor(t, testenv.DefaultWait, "pod to lose readiness in a crash loop", env.PodRunningReady(ns, pod.Name, false))

	setReadiness(t, ns, pod.Name, sandbox.ReadinessReady)
	testenv.WaitFor(t, testenv.DefaultWait, "pod to be Ready again", env.PodRunningReady(ns, pod.Name, true))
}
