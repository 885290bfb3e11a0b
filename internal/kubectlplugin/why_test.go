package kubectlplugin

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

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
		Message: "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 node(s) where every preemption victim is protected by a disruption budget: pub shop/guard: 2 available, 2 desired, 0 unavailable allowed."}}
	at := func(min int) metav1.Time { return metav1.NewTime(time.Date(2026, 1, 1, 0, min, 0, 0, time.UTC)) }
	ev := func(name string, uid string, reason, msg string, when metav1.Time) v1.Event {
		return v1.Event{InvolvedObject: v1.ObjectReference{Kind: "Pod", Name: name, UID: types.UID(uid)}, Reason: reason, Message: msg, LastTimestamp: when}
	}
	events := []v1.Event{
		ev("pre", "uid-pre", "PreemptionBlockedByBudget", "preemption blocked by disruption budgets on 1 node: pdb shop/old: ...", at(1)),
		ev("pre", "uid-pre", "PreemptionBlockedByBudget", "preemption blocked by disruption budgets on 1 node: pdb shop/web: 2 healthy, 2 desired, 0 disruptions allowed", at(3)),
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
	got := buildWhy(pod, node, "", nil, budget.Explanation{Ready: true}).Autoscaler
	want := AutoscalerInfo{SafeToEvict: "false", NodeTaints: []string{"ToBeDeletedByClusterAutoscaler:NoSchedule"}, NodeBeingRemoved: ptr.To(true), NodeDeletionCandidate: ptr.To(false)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("autoscaler (-want,+got):\n%s", diff)
	}
}

// TestPreemptionInfo: budgetguard's preemption takes no victims on a node
// cluster-autoscaler is removing, whatever the budgets say; when the node
// could not be read, an allowed delete is unknown and a denial stands.
func TestPreemptionInfo(t *testing.T) {
	bound := testobj.RunningPod("shop", "web-0").Node("n1").Obj()
	unbound := testobj.MakePod().Namespace("shop").Name("pre").Obj()
	removed := testobj.MakeNode().Name("n1").Taint(budget.TaintToBeDeleted, v1.TaintEffectNoSchedule).Obj()
	candidate := testobj.MakeNode().Name("n1").Taint(budget.TaintDeletionCandidate, v1.TaintEffectPreferNoSchedule).Obj()
	allowed := budget.Decision{Allowed: true}
	denied := budget.Decision{Denials: []budget.Denial{{Reason: budget.ReasonInsufficientBudget, Message: "pdb shop/web: 2 healthy, 2 desired, 0 disruptions allowed"}}}
	cases := []struct {
		name        string
		pod         *v1.Pod
		node        *v1.Node
		nodeUnknown string
		d           budget.Decision
		want        DecisionInfo
	}{
		{"allowed on a node staying", bound, candidate, "", allowed,
			DecisionInfo{Operation: "preemption-delete", Allowed: true, Result: ResultAllowed}},
		{"allowed on a node being removed", bound, removed, "", allowed,
			DecisionInfo{Operation: "preemption-delete", Result: ResultNotCandidate, Reason: ReasonNodeBeingRemoved,
				Message: "node n1 is being removed by cluster-autoscaler (taint ToBeDeletedByClusterAutoscaler): budgetguard's preemption takes no victims there"}},
		{"denied on a node being removed", bound, removed, "", denied,
			DecisionInfo{Operation: "preemption-delete", Result: ResultNotCandidate, Reason: ReasonNodeBeingRemoved,
				Message: "node n1 is being removed by cluster-autoscaler (taint ToBeDeletedByClusterAutoscaler): budgetguard's preemption takes no victims there"}},
		{"allowed on a node not read", bound, nil, "no permission to get nodes", allowed,
			DecisionInfo{Operation: "preemption-delete", Result: ResultUnknown, Reason: ReasonNodeUnknown,
				Message: "the budgets allow it, spending none, but budgetguard's preemption takes no victims on a node cluster-autoscaler is removing, and node n1 could not be read: no permission to get nodes"}},
		{"denied on a node not read", bound, nil, "no permission to get nodes", denied,
			DecisionInfo{Operation: "preemption-delete", Result: ResultDenied, Reason: string(budget.ReasonInsufficientBudget), Message: denied.Message()}},
		{"unbound", unbound, nil, "", allowed,
			DecisionInfo{Operation: "preemption-delete", Allowed: true, Result: ResultAllowed}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, preemptionInfo(tc.pod, tc.node, tc.nodeUnknown, tc.d)); diff != "" {
				t.Errorf("decision (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestBuildWhyNodeUnknown: a node that could not be read leaves its taints
// and cluster-autoscaler's view of them unknown (null), with the reason.
func TestBuildWhyNodeUnknown(t *testing.T) {
	pod := testobj.RunningPod("shop", "web-0").Node("n1").Obj()
	got := buildWhy(pod, nil, "no permission to get nodes", nil, budget.Explanation{Ready: true}).Autoscaler
	want := AutoscalerInfo{NodeUnknown: "no permission to get nodes"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("autoscaler (-want,+got):\n%s", diff)
	}
}
