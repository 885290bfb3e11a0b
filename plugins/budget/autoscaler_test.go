package budget

import (
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/budgetguard/budgetguard/internal/testobj"
)

func TestNodeRemovalTaints(t *testing.T) {
	tests := []struct {
		name                    string
		node                    *v1.Node
		beingRemoved, candidate bool
	}{
		{name: "nil node"},
		{name: "untainted", node: testobj.MakeNode().Name("n").Obj()},
		{name: "other taint", node: testobj.MakeNode().Name("n").Taint("dedicated", v1.TaintEffectNoSchedule).Obj()},
		{name: "being drained", node: testobj.MakeNode().Name("n").Taint(TaintToBeDeleted, v1.TaintEffectNoSchedule).Obj(), beingRemoved: true},
		{name: "matched by key, whatever the effect", node: testobj.MakeNode().Name("n").Taint(TaintToBeDeleted, v1.TaintEffectPreferNoSchedule).Obj(), beingRemoved: true},
		{name: "deletion candidate", node: testobj.MakeNode().Name("n").Taint(TaintDeletionCandidate, v1.TaintEffectPreferNoSchedule).Obj(), candidate: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := NodeBeingRemoved(tc.node); got != tc.beingRemoved {
				t.Errorf("NodeBeingRemoved() = %v, want %v", got, tc.beingRemoved)
			}
			if got := NodeDeletionCandidate(tc.node); got != tc.candidate {
				t.Errorf("NodeDeletionCandidate() = %v, want %v", got, tc.candidate)
			}
		})
	}
}

// TestPodExpendable checks cluster-autoscaler's rule: a set priority below
// the cutoff; an unset priority is never expendable.
func TestPodExpendable(t *testing.T) {
	prio := func(p int32) *v1.Pod { return &v1.Pod{Spec: v1.PodSpec{Priority: &p}} }
	tests := []struct {
		name string
		pod  *v1.Pod
		want bool
	}{
		{name: "unset priority", pod: &v1.Pod{}},
		{name: "below the cutoff", pod: prio(-20), want: true},
		{name: "just below the cutoff", pod: prio(-11), want: true},
		{name: "at the cutoff", pod: prio(-10)},
		{name: "above the cutoff", pod: prio(-5)},
	}
	for _, tc := range tests {
		if got := PodExpendable(tc.pod, DefaultExpendablePodsPriorityCutoff); got != tc.want {
			t.Errorf("%s: PodExpendable = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestAutoscalerScaleUp checks which pending pods cluster-autoscaler counts
// for scale-up: unbound, Unschedulable, not nominated, not expendable.
func TestAutoscalerScaleUp(t *testing.T) {
	unschedulable := func(p *v1.Pod) *v1.Pod {
		p.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: v1.PodReasonUnschedulable}}
		return p
	}
	pending := func() *v1.Pod { return unschedulable(testobj.MakePod().Namespace("ns").Name("p").Priority(100).Obj()) }
	tests := []struct {
		name string
		pod  func() *v1.Pod
		want string
	}{
		{name: "unschedulable and unnominated", pod: pending, want: "Considered"},
		{name: "nominated", pod: func() *v1.Pod { p := pending(); p.Status.NominatedNodeName = "n1"; return p }, want: "Nominated"},
		{name: "no condition yet", pod: func() *v1.Pod { return testobj.MakePod().Namespace("ns").Name("p").Obj() }, want: "NotUnschedulable"},
		{name: "other reason", pod: func() *v1.Pod {
			p := pending()
			p.Status.Conditions[0].Reason = "SchedulingGated"
			return p
		}, want: "NotUnschedulable"},
		{name: "bound", pod: func() *v1.Pod { p := pending(); p.Spec.NodeName = "n1"; return p }, want: "Bound"},
		{name: "expendable", pod: func() *v1.Pod { return unschedulable(testobj.MakePod().Namespace("ns").Name("p").Priority(-20).Obj()) }, want: "Expendable"},
	}
	for _, tc := range tests {
		got := AutoscalerScaleUp(tc.pod(), DefaultExpendablePodsPriorityCutoff)
		if got.Reason != tc.want || got.Considered != (tc.want == "Considered") || got.Message == "" {
			t.Errorf("%s: AutoscalerScaleUp = %+v, want reason %s", tc.name, got, tc.want)
		}
	}
}
