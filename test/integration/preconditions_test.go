package integration

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/budgetguard/budgetguard/internal/testenv"
	"github.com/budgetguard/budgetguard/internal/testobj"
	"github.com/budgetguard/budgetguard/plugins/budget"
	"github.com/budgetguard/budgetguard/sandbox"
)

// TestEvictionOfAStaleDecisionIsRefused: the race behind
// budget.DisruptionPreconditions, on the real API server. A pod decided on
// while it was not Ready (it spends no budget then) turns Ready before the
// eviction lands. With the UID alone as precondition, as budgetguard's
// evictions were sent before, the API server evicts it: the disruption
// goes unaccounted (a PodUnavailableBudget, which no API server checks,
// is broken). With the decided resourceVersion, it answers 409 and the pod
// stays.
func TestEvictionOfAStaleDecisionIsRefused(t *testing.T) {
	ns := env.NewNamespace(t)
	node := env.ReadyNode(t, ns, "4")
	ctx := testenv.Context(t)
	for _, tc := range []struct {
		name      string
		uidOnly   bool
		wantGoing bool
	}{{"decided", false, false}, {"uid-only", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			env.CreatePod(t, ns, testobj.BoundPod(node).Name(tc.name).Label("app", tc.name).
				Annotations(map[string]string{sandbox.ReadinessAnnotation: sandbox.ReadinessNever}))
			testenv.WaitFor(t, testenv.DefaultWait, tc.name+" running, not Ready", env.PodRunningReady(ns, tc.name, false))
			decided, err := cp.Client.CoreV1().Pods(ns).Get(ctx, tc.name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, sandbox.ReadinessAnnotation, sandbox.ReadinessReady)
			if _, err := cp.Client.CoreV1().Pods(ns).Patch(ctx, tc.name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			testenv.WaitFor(t, testenv.DefaultWait, tc.name+" Ready", env.PodRunningReady(ns, tc.name, true))

			pre := budget.DisruptionPreconditions(decided)
			if tc.uidOnly {
				pre = &metav1.Preconditions{UID: &decided.UID}
			} else if pre.ResourceVersion == nil {
				t.Fatal("no resourceVersion precondition for a pod decided on while not Ready")
			}
			err = cp.Client.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{
				ObjectMeta:    metav1.ObjectMeta{Namespace: ns, Name: tc.name},
				DeleteOptions: &metav1.DeleteOptions{Preconditions: pre},
			})
			if tc.wantGoing {
				if err != nil {
					t.Fatalf("eviction with the UID alone: %v, want it to go through (the race this precondition closes)", err)
				}
				return
			}
			if !apierrors.IsConflict(err) {
				t.Fatalf("eviction with the decided resourceVersion: %v, want 409 Conflict", err)
			}
			pod, err := cp.Client.CoreV1().Pods(ns).Get(ctx, tc.name, metav1.GetOptions{})
			if err != nil || pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning {
				t.Errorf("after the refused eviction the pod is %v (err %v), want it Running and not terminating", pod.Status.Phase, err)
			}
		})
	}
}
