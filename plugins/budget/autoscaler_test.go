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
