package budgetpreemption

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/budgetguard/budgetguard/internal/sandboxtest"
	"github.com/budgetguard/budgetguard/sandbox"
)

// holdFinalizer keeps a deleted test pod terminating, as a delete that
// wrote its deletionTimestamp and was cancelled before its second write
// leaves a pod with no kubelet to finish it.
const holdFinalizer = "budgetguard.test/hold"

// TestVictimTakenByAnotherDisruptorFirst, on the real API server: a victim
// decided on while not Ready (so its eviction carries the decided
// resourceVersion, and a delete always does) is changed by another
// disruptor before this preemption's request lands, as when concurrent
// preemptions share a victim. A victim that the other disruptor only marked
// (DisruptionTarget) still goes; one already terminating counts as gone.
// Neither 409 aborts the candidate (an abort makes upstream's Executor
// cancel the candidate's other requests in flight). A victim that
// was marked and also turned Ready, or was relabelled, is not the pod
// decided on: the conflict stands and the pod stays.
func TestVictimTakenByAnotherDisruptorFirst(t *testing.T) {
	ctx := t.Context()
	// Verbose: a quiet control plane swaps klog's global logger, which
	// the informers that this package's other tests leave running read.
	cp := sandboxtest.Start(ctx, t, sandbox.Options{Verbose: true})
	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := cp.Client.CoreV1().Pods(ns)

	mark := func(t *testing.T, name string) {
		t.Helper()
		// With its lastTransitionTime, as the Eviction API writes it: the
		// disruption controller drops a DisruptionTarget from a pod not
		// deleted within 2 minutes of it.
		patch := fmt.Sprintf(`{"status":{"conditions":[{"type":"DisruptionTarget","status":"True","reason":"EvictionByEvictionAPI","message":"Eviction API: evicting","lastTransitionTime":%q}]}}`,
			time.Now().UTC().Format(time.RFC3339))
		if _, err := pods.Patch(ctx, name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		// change is what another actor does between the decision and
		// the disruption.
		change func(t *testing.T, name string)
		// wantConflict: the disruption must fail with the conflict and
		// leave the pod as it is; otherwise it must succeed.
		wantConflict bool
		// wantGone: the pod must be gone after it; otherwise it stays
		// (terminating, or untouched).
		wantGone bool
	}{
		{name: "marked", change: mark, wantGone: true},
		{name: "terminating", change: func(t *testing.T, name string) {
			t.Helper()
			if err := pods.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "marked-and-ready", change: func(t *testing.T, name string) {
			t.Helper()
			mark(t, name)
			p, err := pods.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			p.Status.Phase = v1.PodRunning
			p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionTrue})
			if _, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}, wantConflict: true},
		{name: "marked-and-relabelled", change: func(t *testing.T, name string) {
			t.Helper()
			mark(t, name)
			if _, err := pods.Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"labels":{"app":"other"}}}`), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}, wantConflict: true},
	} {
		for _, actuation := range []Actuation{ActuationEvict, ActuationDelete} {
			name := tc.name + "-" + string(actuation)
			t.Run(name, func(t *testing.T) {
				victimName := "victim-" + strings.ToLower(name)
				// Not bound to a node: the sandbox's simulated kubelet
				// leaves it Pending and not Ready, as the test writes it.
				created, err := pods.Create(ctx, &v1.Pod{
					ObjectMeta: metav1.ObjectMeta{Name: victimName, Labels: map[string]string{"app": "web"}, Finalizers: []string{holdFinalizer}},
					Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
				}, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { release(t, cp.Client, victimName) })

				args := DefaultArgs()
				args.Actuation = actuation
				e := buildEnv(t, envSpec{args: args, served: []*v1.Pod{created}})
				e.pl.fh = &evictionHandle{Handle: e.fw, cs: cp.Client}
				decided := e.pl.current(created)
				if decided == nil {
					t.Fatal("the victim is not in the plugin's pod informer")
				}

				tc.change(t, victimName)
				before, err := pods.Get(ctx, victimName, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				err = e.pl.preemptPod(e.ctx, &testCandidate{"n1", []*v1.Pod{decided}}, testPreemptor{preemptor("1", 100)}, decided, Name)
				if tc.wantConflict != apierrors.IsConflict(err) || (!tc.wantConflict && err != nil) {
					t.Fatalf("preemptPod = %v, want a conflict: %v", err, tc.wantConflict)
				}

				after, err := pods.Get(ctx, victimName, metav1.GetOptions{})
				switch {
				case err != nil:
					t.Fatal(err)
				case tc.wantGone && after.DeletionTimestamp == nil:
					t.Errorf("victim is not being deleted, want it gone: %+v", after.Status)
				case !tc.wantGone && after.ResourceVersion != before.ResourceVersion:
					t.Errorf("victim changed from resourceVersion %s to %s (deletionTimestamp %v), want it left as the other actor left it",
						before.ResourceVersion, after.ResourceVersion, after.DeletionTimestamp)
				}
			})
		}
	}
}

// release takes the test's finalizer off pod name, so that a deleted pod
// goes.
func release(t *testing.T, client kubernetes.Interface, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	patch := `{"metadata":{"finalizers":null}}`
	if _, err := client.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("release %s: %v", name, err)
	}
}
