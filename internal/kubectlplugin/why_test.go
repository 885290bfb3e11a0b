package kubectlplugin

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/budgetguard/budgetguard/internal/testobj"
	"github.com/budgetguard/budgetguard/plugins/budget"
)

// TestPendingInfo: the last refusal is the latest event with a refusal
// reason about this pod (not another pod's, not an earlier pod's of the
// same name, not another reason), and the budgets named are those of the
// event and the PodScheduled message.
func TestPendingInfo(t *testing.T) {
	pod := testobj.MakePod().Namespace("shop").Name("pre").UID("uid-pre").Obj()
	pod.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: v1.PodReasonUnschedulable,
		Message: "0/3 nodes are available; preemption blocked by disruption budgets on 3 node(s): pub shop/guard: 2 available, 2 desired, 0 unavailable allowed"}}
	at := func(min int) metav1.Time { return metav1.NewTime(time.Date(2026, 1, 1, 0, min, 0, 0, time.UTC)) }
	ev := func(name string, uid string, reason, msg string, when metav1.Time) v1.Event {
		return v1.Event{InvolvedObject: v1.ObjectReference{Kind: "Pod", Name: name, UID: types.UID(uid)}, Reason: reason, Message: msg, LastTimestamp: when}
	}
	events := []v1.Event{
		ev("pre", "uid-pre", "PreemptionBlockedByBudget", "preemption blocked by disruption budgets on 1 node(s): pdb shop/old: ...", at(1)),
		ev("pre", "uid-pre", "PreemptionBlockedByBudget", "preemption blocked by disruption budgets on 1 node(s): pdb shop/web: 2 healthy, 2 desired, 0 disruptions allowed", at(3)),
		ev("pre", "uid-pre", "FailedScheduling", "pdb shop/other", at(5)),
		ev("pre", "uid-earlier", "PreemptionEvictionFailed", "pdb shop/earlier", at(6)),
		ev("other", "uid-other", "PreemptionEvictionFailed", "pdb shop/another", at(7)),
	}
	got := pendingInfo(pod, events)
	want := &PendingInfo{
		PodScheduled: &ConditionInfo{Status: "False", Reason: "Unschedulable", Message: pod.Status.Conditions[0].Message},
		LastRefusal:  &EventInfo{Reason: "PreemptionBlockedByBudget", Message: events[1].Message, Count: 1},
		NamedBudgets: []string{"pdb shop/web", "pub shop/guard"},
		ScaleUp:      ScaleUpInfo{Considered: true, Reason: "Considered", Message: budget.AutoscalerScaleUp(pod, budget.DefaultExpendablePodsPriorityCutoff).Message},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pending (-want,+got):\n%s", diff)
	}
}

// TestBuildWhyNode: the node's taints and cluster-autoscaler's view of them
// and the pod's safe-to-evict annotation are reported.
func TestBuildWhyNode(t *testing.T) {
	pod := testobj.RunningPod("shop", "web-0").Node("n1").Annotation(budget.AnnotationSafeToEvict, "false").Obj()
	node := testobj.MakeNode().Name("n1").Taint(budget.TaintToBeDeleted, v1.TaintEffectNoSchedule).Obj()
	got := buildWhy(pod, node, nil, budget.Explanation{Ready: true}).Autoscaler
	want := AutoscalerInfo{SafeToEvict: "false", NodeTaints: []string{"ToBeDeletedByClusterAutoscaler:NoSchedule"}, NodeBeingRemoved: true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("autoscaler (-want,+got):\n%s", diff)
	}
}
