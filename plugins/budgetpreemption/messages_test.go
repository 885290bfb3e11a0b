package budgetpreemption

import (
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
)

// TestNodeStatusesReadAfterACount: upstream's Evaluator counts identical
// node statuses and writes each message after its count ("0/7 nodes are
// available: 1 Insufficient cpu, 6 node(s) didn't match ..."), so every
// status SelectVictimsOnNode gives a node that is not a candidate reads
// after a number, "1 node(s) ..." as "6 node(s) ...", and keeps the
// budget's own sentence. PostFilter's message joins the note after upstream's
// full stop, and leaves it out when a node's status names the budget
// already; the event counts the nodes in words.
func TestNodeStatusesReadAfterACount(t *testing.T) {
	for _, msg := range []string{msgNodeBeingRemoved, msgRefusedBefore, msgNoFitWithoutAll, msgAllProtected, msgExceedsBudget, msgNoSetWithinBudgets} {
		if !strings.HasPrefix(msg, "node(s) ") {
			t.Errorf("node status %q does not read after a count: want it to start with \"node(s) \"", msg)
		}
	}

	const needs2 = "needs 2 (this pod and 1 other of the same disruption)"
	tests := []struct {
		name  string
		nodes []*v1.Node
		pods  []*v1.Pod
		pdbs  []*policyv1.PodDisruptionBudget
		cpu   string
		// status is PostFilter's whole message; event, a part of the
		// PreemptionBlockedByBudget event's.
		status, event string
	}{
		{
			name:  "the victims one node needs exceed a budget together",
			nodes: []*v1.Node{node("n1")},
			pods:  replicas("web", "n1", "web", true, 0, 0, 0, 0),
			pdbs:  []*policyv1.PodDisruptionBudget{appPDB("web", 4, 3, 1).Obj()},
			cpu:   "2",
			status: "preemption: 0/1 nodes are available: 1 node(s) whose preemption would exceed a disruption budget: " +
				"pdb shop/web: 4 healthy, 3 desired, 1 disruption allowed; " + needs2 + ".",
			event: "preemption blocked by disruption budgets on 1 node: pdb shop/web: 4 healthy, 3 desired, 1 disruption allowed; " + needs2,
		},
		{
			name:  "the victims two nodes need exceed the same budget",
			nodes: []*v1.Node{node("n1"), node("n2")},
			pods:  slices.Concat(replicas("web", "n1", "web", true, 0, 0, 0, 0), replicas("api", "n2", "web", true, 0, 0, 0, 0)),
			pdbs:  []*policyv1.PodDisruptionBudget{appPDB("web", 8, 7, 1).Obj()},
			cpu:   "2",
			status: "preemption: 0/2 nodes are available: 2 node(s) whose preemption would exceed a disruption budget: " +
				"pdb shop/web: 8 healthy, 7 desired, 1 disruption allowed; " + needs2 + ".",
			event: "preemption blocked by disruption budgets on 2 nodes: pdb shop/web: 8 healthy, 7 desired, 1 disruption allowed; " + needs2,
		},
		{
			name:  "every victim is protected",
			nodes: []*v1.Node{node("n1")},
			pods:  replicas("web", "n1", "web", true, 0, 0, 0, 0),
			pdbs:  []*policyv1.PodDisruptionBudget{appPDB("web", 4, 4, 0).Obj()},
			cpu:   "1",
			status: "preemption: 0/1 nodes are available: 1 node(s) where every preemption victim is protected by a disruption budget: " +
				"pdb shop/web: 4 healthy, 4 desired, 0 disruptions allowed.",
			event: "preemption blocked by disruption budgets on 1 node: pdb shop/web: 4 healthy, 4 desired, 0 disruptions allowed",
		},
		{
			// The free pod is not enough: the node's status is the
			// filter's, and the note names the budget whose pods would
			// have made room.
			name:  "a filter's status, and the budget that kept the pod out",
			nodes: []*v1.Node{node("n1")},
			pods:  slices.Concat(replicas("batch", "n1", "", true, 0), replicas("db", "n1", "db", true, 0, 0), replicas("system", "n1", "", true, 200)),
			pdbs:  []*policyv1.PodDisruptionBudget{appPDB("db", 2, 2, 0).Obj()},
			cpu:   "2",
			status: "preemption: 0/1 nodes are available: 1 Insufficient cpu. " +
				"preemption blocked by disruption budgets on 1 node: pdb shop/db: 2 healthy, 2 desired, 0 disruptions allowed",
			event: "preemption blocked by disruption budgets on 1 node: pdb shop/db: 2 healthy, 2 desired, 0 disruptions allowed",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := preemptor(tc.cpu, 100)
			// The preemptor is served, not in the snapshot: no node
			// without a Node object to count.
			e := buildEnv(t, envSpec{nodes: tc.nodes, pods: tc.pods, served: append(slices.Clone(tc.pods), p), pdbs: tc.pdbs})
			status, evs := e.postFilter(t, p)
			if status.IsSuccess() {
				t.Fatal("PostFilter succeeded; want it blocked by a budget")
			}
			if got := status.Message(); got != tc.status {
				t.Errorf("PostFilter's message\n got %q\nwant %q", got, tc.status)
			}
			var blocked []string
			for _, ev := range evs {
				if strings.Contains(ev, "PreemptionBlockedByBudget") {
					blocked = append(blocked, ev)
				}
			}
			if len(blocked) != 1 || !strings.Contains(blocked[0], tc.event) {
				t.Errorf("PreemptionBlockedByBudget events %q, want one containing %q", blocked, tc.event)
			}
		})
	}
}

// TestAppendNote: a note follows upstream's full stop with a space, any
// other message with "; ".
func TestAppendNote(t *testing.T) {
	for _, tc := range []struct{ msg, note, want string }{
		{"", "b", "b"},
		{"a", "", "a"},
		{"0/1 nodes are available: 1 Insufficient cpu.", "b", "0/1 nodes are available: 1 Insufficient cpu. b"},
		{"no candidate node for preemption", "b", "no candidate node for preemption; b"},
		{" a ", "b", "a; b"},
	} {
		if got := appendNote(tc.msg, tc.note); got != tc.want {
			t.Errorf("appendNote(%q, %q) = %q, want %q", tc.msg, tc.note, got, tc.want)
		}
	}
}
