package budget

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kruisebeta "github.com/budgetguard/budgetguard/apis/kruise/policy/v1beta1"
	"github.com/budgetguard/budgetguard/internal/testobj"
)

// TestDecideUnderOneBudgetAllocatesNothing: deciding for a pod under one
// budget, with other pods' disruptions in flight and PUB support on,
// allocates nothing (a preemption decides every potential victim of every
// candidate node). It counts allocations, not time.
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

// TestCoveredAnswersAsDecide: Covered finds the budgets decide finds, from
// the memo of a counted pod or from the indexes, and leaves out the pods
// rule 1 exempts; a pod it calls uncovered is decided free under every
// operation, alone and in a plan. It allocates nothing.
func TestCoveredAnswersAsDecide(t *testing.T) {
	h := newHarness(t)
	canary := betaPUB(t, pub("canary", oneLeft).MatchLabels("app", "canary"), func(s *kruisebeta.PodUnavailableBudgetSpec) {
		s.IgnoredPodSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"track": "canary"}}
	})
	h.add(webPDB("web", oneLeft).Obj(), pub("guard", oneLeft).MatchLabels("app", "guard").Obj(), pub("related", oneLeft).Obj(), canary)
	counted := webPod("counted").Obj()
	countedFree := testobj.RunningPod(ns, "counted-free").Label("app", "cache").Obj()
	h.livePods(counted, countedFree)
	cases := []struct {
		name string
		pod  *v1.Pod
		want bool
	}{
		{"under no budget", testobj.RunningPod(ns, "a").Label("app", "cache").Obj(), false},
		{"under no budget, counted (the memo answers)", countedFree, false},
		{"under a PDB", webPod("b").Obj(), true},
		{"under a PDB, counted (the memo answers)", counted, true},
		{"under a PDB, Pending (rule 1)", webPod("c").Phase(v1.PodPending).Obj(), false},
		{"under a PDB, terminating (rule 1)", webPod("d").Terminating(epoch).Obj(), false},
		{"under a PUB by selector", testobj.RunningPod(ns, "e").Label("app", "guard").Obj(), true},
		{"tied to a PUB by its related-pub annotation", testobj.RunningPod(ns, "f").Annotation(AnnotationPodRelatedPUB, "related").Obj(), true},
		{"selected by a PUB that ignores it", testobj.RunningPod(ns, "g").Label("app", "canary").Label("track", "canary").Obj(), true},
		{"in another namespace", testobj.RunningPod("other", "h").Label("app", "web").Obj(), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := h.c.Covered(tc.pod); got != tc.want {
				t.Fatalf("Covered = %v, want %v", got, tc.want)
			}
			if !tc.want {
				for _, op := range []Operation{OperationEvict, OperationDelete, OperationDeleteOrEvict} {
					if d := h.c.Decide(tc.pod, op); !d.Free() {
						t.Errorf("%s: Decide = %+v for a pod Covered calls uncovered, want free", op, d)
					}
					plan := h.c.NewPlan(op)
					plan.Add(webPod("b").Obj())
					if d := plan.Add(tc.pod); !d.Free() {
						t.Errorf("%s: Plan.Add = %+v for a pod Covered calls uncovered, want free", op, d)
					}
				}
			}
			if n := testing.AllocsPerRun(100, func() { h.c.Covered(tc.pod) }); n != 0 {
				t.Errorf("Covered allocates %v times per call, want 0", n)
			}
		})
	}
}
