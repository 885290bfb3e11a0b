package budgetevictor

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/budgetguard/budgetguard/internal/testobj"
	"github.com/budgetguard/budgetguard/plugins/budget"
)

// TestNodeBeingDrainedByAutoscaler: the evictor leaves the pods of a node
// cluster-autoscaler is draining to the autoscaler, at both extension
// points, with its own reason; a node the autoscaler may remove later is
// not being drained.
func TestNodeBeingDrainedByAutoscaler(t *testing.T) {
	tests := []struct {
		name string
		node *v1.Node
		want bool
	}{
		{name: "drained", node: testobj.MakeNode().Name("n1").Taint(budget.TaintToBeDeleted, v1.TaintEffectNoSchedule).Obj()},
		{name: "deletion candidate", node: testobj.MakeNode().Name("n1").Taint(budget.TaintDeletionCandidate, v1.TaintEffectPreferNoSchedule).Obj(), want: true},
		{name: "untainted", node: testobj.MakeNode().Name("n1").Obj(), want: true},
		{name: "unknown node", node: testobj.MakeNode().Name("n2").Taint(budget.TaintToBeDeleted, v1.TaintEffectNoSchedule).Obj(), want: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// The budget allows the eviction: only the node can refuse it.
			p := newPlugin(t, nil, Options{}, []runtime.Object{tc.node, webPDB("web", 1).Obj(), webPod("a").Obj(), webPod("b").Obj(), webPod("c").Obj()}...)
			pod := webPod("a").Obj()
			for _, point := range []string{extensionFilter, extensionPreEvictionFilter} {
				before := counter(t, point, ReasonNodeBeingDrainedByAutoscaler)
				var got bool
				if point == extensionFilter {
					got = p.Filter(pod)
				} else {
					got = p.PreEvictionFilter(pod)
				}
				if got != tc.want {
					t.Errorf("%s() = %v, want %v", point, got, tc.want)
				}
				want := 0.0
				if !tc.want {
					want = 1
				}
				if d := counter(t, point, ReasonNodeBeingDrainedByAutoscaler) - before; d != want {
					t.Errorf("%s refusals with reason %s grew by %v, want %v", point, ReasonNodeBeingDrainedByAutoscaler, d, want)
				}
			}
		})
	}
}
