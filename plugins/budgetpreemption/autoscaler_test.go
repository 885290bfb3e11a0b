package budgetpreemption

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/budgetguard/budgetguard/plugins/budget"
)

// taintedNode is node(name) with a cluster-autoscaler taint.
func taintedNode(name, key string, effect v1.TaintEffect) *v1.Node {
	n := node(name)
	n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: key, Value: "1700000000", Effect: effect})
	return n
}

// tolerateAll makes p tolerate every taint.
func tolerateAll(p *v1.Pod) *v1.Pod {
	p.Spec.Tolerations = []v1.Toleration{{Operator: v1.TolerationOpExists}}
	return p
}

// TestNodeBeingRemovedIsNoCandidate: a node cluster-autoscaler is draining
// is never a preemption candidate, even for a preemptor that tolerates
// every taint and whose victims there would spend nothing; the dry run
// says why, and the preemptor goes to a node where the budget allows it.
func TestNodeBeingRemovedIsNoCandidate(t *testing.T) {
	nodes := []*v1.Node{taintedNode("n1", budget.TaintToBeDeleted, v1.TaintEffectNoSchedule), node("n2")}
	pods := slices.Concat(replicas("batch", "n1", "", true, 0, 0, 0, 0), replicas("web", "n2", "web", true, 3, 2, 1, 0))
	e := newEnv(t, nil, nodes, pods, []*policyv1.PodDisruptionBudget{appPDB("web", 4, 3, 1).Obj()})
	p := tolerateAll(preemptor("1", 100))

	got, best := e.preempt(t, p)
	if diff := cmp.Diff(map[string][]string{"n2": {"web-3"}}, got); diff != "" {
		t.Errorf("victims per candidate node (-want,+got):\n%s", diff)
	}
	if best != "n2" {
		t.Errorf("chosen node = %q, want n2", best)
	}

	state, nodeInfos := e.preFilter(t, p)
	_, statuses, _ := e.pl.Evaluator.DryRunPreemption(e.ctx, state, p, nodeInfos, nil, 0, int32(len(nodeInfos)))
	s := statuses.Get("n1")
	if s.Code() != fwk.UnschedulableAndUnresolvable || !strings.Contains(s.Message(), budget.TaintToBeDeleted) {
		t.Errorf("n1's status = %v %q, want UnschedulableAndUnresolvable naming %s", s.Code(), s.Message(), budget.TaintToBeDeleted)
	}
}

// TestDeletionCandidateNodesComeLast: a node cluster-autoscaler may remove
// soon is chosen last, even when upstream's priority criteria or fewer
// budget-spending victims would prefer it; only a candidate that breaks a
// budget (BestEffort) comes after it.
func TestDeletionCandidateNodesComeLast(t *testing.T) {
	candidate := func() *v1.Node {
		return taintedNode("n1", budget.TaintDeletionCandidate, v1.TaintEffectPreferNoSchedule)
	}
	tests := []struct {
		name     string
		pods     []*v1.Pod
		pdbs     []*policyv1.PodDisruptionBudget
		args     *BudgetAwarePreemptionArgs
		wantBest string
	}{
		{
			// Upstream prefers n1, whose victim has the lower priority.
			name:     "victims that spend nothing on both nodes: the other node",
			pods:     slices.Concat(replicas("low", "n1", "", true, 0, 0, 0, 0), replicas("mid", "n2", "", true, 10, 10, 10, 10)),
			wantBest: "n2",
		},
		{
			name:     "victims that spend a budget only on the other node: the other node",
			pods:     slices.Concat(replicas("low", "n1", "", true, 0, 0, 0, 0), replicas("web", "n2", "web", true, 0, 0, 0, 0)),
			pdbs:     []*policyv1.PodDisruptionBudget{appPDB("web", 4, 0, 4).Obj()},
			wantBest: "n2",
		},
		{
			// BestEffort: n2's victim is under a budget that allows nothing.
			name:     "a victim a budget denies on the other node: the deletion candidate",
			pods:     slices.Concat(replicas("low", "n1", "", true, 0, 0, 0, 0), replicas("web", "n2", "web", true, 0, 0, 0, 0)),
			pdbs:     []*policyv1.PodDisruptionBudget{appPDB("web", 4, 4, 0).Obj()},
			args:     &BudgetAwarePreemptionArgs{Mode: ModeBestEffort},
			wantBest: "n1",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.args, []*v1.Node{candidate(), node("n2")}, tc.pods, tc.pdbs)
			got, best := e.preempt(t, tolerateAll(preemptor("1", 100)))
			if len(got) != 2 {
				t.Fatalf("candidates = %v, want both nodes", got)
			}
			if best != tc.wantBest {
				t.Errorf("chosen node = %q, want %q", best, tc.wantBest)
			}
		})
	}
}
