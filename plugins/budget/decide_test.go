package budget

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/budgetguard/budgetguard/internal/testobj"
)

// TestDecideUnderOneBudgetAllocatesNothing holds the decision path to what
// issue 14 asked of it: deciding for a pod under one budget, with other
// pods' disruptions in flight and PUB support on, allocates nothing. It
// counts allocations, not time.
func TestDecideUnderOneBudgetAllocatesNothing(t *testing.T) {
	h := newHarness(t)
	h.add(webPDB("web", pdbStatus{healthy: 10, desired: 5, allowed: 5}).Obj(),
		webPDB("db", oneLeft).MatchLabels("app", "db").Obj(),
		pub("other", oneLeft).Obj())
	// The 10 healthy pods the web PDB's status counts, so that decisions
	// check the live count too.
	h.livePods(webPod("a").Obj(), webPod("held").Obj())
	for i := range 8 {
		h.livePods(webPod(fmt.Sprintf("web-%d", i)).Obj())
	}
	if _, r := h.c.Reserve(webPod("held").Obj(), OperationEvict); r == nil {
		t.Fatal("setup: no reservation for another pod of the budget")
	}
	cases := []struct {
		name   string
		pod    *v1.Pod
		op     Operation
		spends int
	}{
		{"evict, under one PDB", webPod("a").Obj(), OperationEvict, 1},
		{"delete, under one PDB", webPod("a").Obj(), OperationDelete, 1},
		{"a pod that holds a reservation", webPod("held").Obj(), OperationEvict, 0},
		{"under no budget", testobj.RunningPod(ns, "b").Label("app", "cache").Obj(), OperationEvict, 0},
		{"a pending pod", testobj.MakePod().Namespace(ns).Name("c").Label("app", "web").Phase(v1.PodPending).Obj(), OperationEvict, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if d := h.c.Decide(tc.pod, tc.op); !d.Allowed || len(d.Spends) != tc.spends {
				t.Fatalf("decision %+v, want allowed with %d spends", d, tc.spends)
			}
			if n := testing.AllocsPerRun(100, func() { h.c.Decide(tc.pod, tc.op) }); n != 0 {
				t.Errorf("Decide allocates %v times per call, want 0", n)
			}
		})
	}
}
