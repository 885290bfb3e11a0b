package runner

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/budgetguard/budgetguard/internal/report"
	"github.com/budgetguard/budgetguard/internal/testobj"
)

// A refused preemptor: Pending, Unschedulable, not nominated. Its last
// scheduling event is the repeated PreemptionBlockedByBudget; a Preempted
// event that names its UID counts as a victim; other pods' events and
// other reasons do not count.
func TestPodOutcome(t *testing.T) {
	big := testobj.MakePod().Namespace("shop").Name("big").UID("uid-big").Priority(1000).Obj()
	big.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
	blocked := "preemption blocked by disruption budgets on 1 node: pdb shop/web: 3 healthy, 3 desired, 0 disruptions allowed"
	events := []podEvent{
		{namespace: "shop", name: "big", reason: "FailedScheduling", note: "0/1 nodes are available"},
		{namespace: "shop", name: "web-1", reason: "Preempted", note: "Preempted by pod uid-big on node node-a (evicted)"},
		{namespace: "shop", name: "big", reason: "PreemptionBlockedByBudget", note: blocked},
		{namespace: "shop", name: "other", reason: "PreemptionBlockedByBudget", note: "x"},
		{namespace: "shop", name: "big", reason: "Scheduled", note: "ignored"},
		{namespace: "shop", name: "big", reason: "PreemptionBlockedByBudget", note: blocked},
	}
	want := report.Pod{
		Namespace: "shop", Name: "big", Unschedulable: true, Blocked: 2, BlockedMessage: blocked, Victims: 1,
		Event:             &report.Event{Reason: "PreemptionBlockedByBudget", Message: blocked, Count: 2},
		AutoscalerScaleUp: true, AutoscalerReason: "Considered",
	}
	if diff := cmp.Diff(want, podOutcome(big, events)); diff != "" {
		t.Errorf("pending preemptor (-want,+got):\n%s", diff)
	}

	big.Spec.NodeName = "node-a"
	got := podOutcome(big, nil)
	if got.Node != "node-a" || got.AutoscalerScaleUp || got.AutoscalerReason != "Bound" || got.Event != nil {
		t.Errorf("bound pod: %+v, want node-a, no scale-up (Bound), no event", got)
	}
}
