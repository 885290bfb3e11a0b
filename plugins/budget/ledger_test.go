package budget

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func mustAllow(t *testing.T, d Decision) {
	t.Helper()
	if !d.Allowed {
		t.Fatalf("want allowed, got denied: %s", d.Message())
	}
}

func mustDeny(t *testing.T, d Decision, r Reason) {
	t.Helper()
	if d.Allowed || d.Reason() != r {
		t.Fatalf("want denied with %s, got allowed=%v reason=%q spends=%v", r, d.Allowed, d.Reason(), d.Spends)
	}
}

func TestPlanSpendsCumulatively(t *testing.T) {
	h := newHarness(t)
	h.add(webPDB("web", pdbStatus{healthy: 4, desired: 2, allowed: 2}).Obj())
	p := h.c.NewPlan(OperationDelete)
	mustAllow(t, p.Add(webPod("a").Obj()))
	mustAllow(t, p.Add(webPod("b").Obj()))
	d := p.Add(webPod("c").Obj())
	mustDeny(t, d, ReasonInsufficientBudget)
	// The plan's earlier victims are not in flight: nothing has started.
	if want := "2 disruptions allowed; needs 3"; !strings.Contains(d.Message(), want) || strings.Contains(d.Message(), "in flight") {
		t.Errorf("message %q should count the plan's earlier victims as needed (%q), not in flight", d.Message(), want)
	}
	// A plan reserves nothing until Reserve.
	mustAllow(t, h.c.Decide(webPod("c").Obj(), OperationDelete))
	r, err := p.Reserve()
	if err != nil {
		t.Fatal(err)
	}
	if got := h.c.InFlight(); got != 2 {
		t.Fatalf("in flight after Reserve = %d, want 2", got)
	}
	mustDeny(t, h.c.Decide(webPod("c").Obj(), OperationDelete), ReasonInsufficientBudget)
	r.Cancel()
	mustAllow(t, h.c.Decide(webPod("c").Obj(), OperationDelete))
}

func TestPlanReserveRechecksAgainstTheLedger(t *testing.T) {
	h := newHarness(t)
	h.add(webPDB("web", oneLeft).Obj())
	p1, p2 := h.c.NewPlan(OperationEvict), h.c.NewPlan(OperationEvict)
	mustAllow(t, p1.Add(webPod("a").Obj()))
	mustAllow(t, p2.Add(webPod("b").Obj()))
	if _, err := p1.Reserve(); err != nil {
		t.Fatal(err)
	}
	_, err := p2.Reserve()
	var denied *DeniedError
	if !errors.As(err, &denied) || denied.Pod.Name != "b" {
		t.Fatalf("second plan must be refused for pod b, got %v", err)
	}
	if got := h.c.InFlight(); got != 1 {
		t.Fatalf("a refused plan must reserve nothing: in flight = %d, want 1", got)
	}
}

func TestReservationOutlivesTheCall(t *testing.T) {
	h := newHarness(t)
	h.add(webPDB("web", oneLeft).Obj())
	d, r := h.c.Reserve(webPod("a").Obj(), OperationEvict)
	mustAllow(t, d)
	if r == nil {
		t.Fatal("an allowed spend must return a reservation")
	}
	mustDeny(t, h.c.Decide(webPod("b").Obj(), OperationEvict), ReasonInsufficientBudget)
	h.clock.Step(DefaultReservationTTL - time.Millisecond)
	mustDeny(t, h.c.Decide(webPod("b").Obj(), OperationEvict), ReasonInsufficientBudget)
	// Deciding again about the pod already reserved spends nothing new.
	d = h.c.Decide(webPod("a").Obj(), OperationEvict)
	if !d.Free() {
		t.Fatalf("the reserved pod itself must be free to decide again, got %+v", d)
	}
}

func TestReservationEndsWhenStatusRecordsTheDisruption(t *testing.T) {
	h := newHarness(t)
	h.add(webPDB("web", oneLeft).Obj())
	_, r := h.c.Reserve(webPod("a").Obj(), OperationEvict)
	if r == nil {
		t.Fatal("no reservation")
	}
	// An unrelated status update keeps it.
	h.pdb(webPDB("web", oneLeft).Obj())
	if h.c.InFlight() != 1 {
		t.Fatal("an update that does not record the pod must not end the reservation")
	}
	// The API server's eviction records the pod and decrements.
	h.pdb(webPDB("web", pdbStatus{healthy: 3, desired: 2, allowed: 0}).Disrupted(epoch, "a").Obj())
	if got := h.c.InFlight(); got != 0 {
		t.Fatalf("in flight = %d after the status recorded the pod, want 0", got)
	}
	mustDeny(t, h.c.Decide(webPod("b").Obj(), OperationEvict), ReasonInsufficientBudget)
}

func TestReservationOfAnAlreadyRecordedPodWaitsForANewRecord(t *testing.T) {
	h := newHarness(t)
	h.add(webPDB("web", oneLeft).Disrupted(epoch, "a").Obj())
	_, r := h.c.Reserve(webPod("a").Obj(), OperationEvict)
	if r == nil {
		t.Fatal("an eviction of a recorded pod is charged again and must be reserved")
	}
	h.pdb(webPDB("web", oneLeft).Disrupted(epoch, "a").Obj())
	if h.c.InFlight() != 1 {
		t.Fatal("the old DisruptedPods record must not end the new reservation")
	}
	h.pdb(webPDB("web", pdbStatus{3, 2, 0}).Disrupted(epoch.Add(time.Second), "a").Obj())
	if h.c.InFlight() != 0 {
		t.Fatal("a new DisruptedPods record must end the reservation")
	}
}

func TestReservationEndsWhenPodNotDisrupted(t *testing.T) {
	h := newHarness(t)
	h.add(webPDB("web", oneLeft).Obj())
	h.c.Reserve(webPod("a").Obj(), OperationEvict)
	h.clock.Step(DefaultReservationTTL)
	mustAllow(t, h.c.Decide(webPod("b").Obj(), OperationEvict))
}

func TestReservationCancel(t *testing.T) {
	h := newHarness(t)
	h.add(webPDB("web", pdbStatus{4, 2, 2}).Obj())
	p := h.c.NewPlan(OperationEvict)
	p.Add(webPod("a").Obj())
	p.Add(webPod("b").Obj())
	r, err := p.Reserve()
	if err != nil {
		t.Fatal(err)
	}
	mustDeny(t, h.c.Decide(webPod("c").Obj(), OperationEvict), ReasonInsufficientBudget)
	r.CancelPod(ns, "a")
	mustAllow(t, h.c.Decide(webPod("c").Obj(), OperationEvict))
	if h.c.InFlight() != 1 {
		t.Fatalf("CancelPod must end only that pod's entries, in flight = %d", h.c.InFlight())
	}
}

func TestReservationOfGonePodEndsAfterRecomputedStatus(t *testing.T) {
	h := newHarness(t)
	h.add(webPDB("web", oneLeft).Obj())
	h.c.Reserve(webPod("a").Obj(), OperationDelete)
	h.clock.Step(100 * time.Millisecond)
	h.podEvent(webPod("a").Terminating(epoch).Obj(), false)

	// A status computed before the pod went can arrive just after we saw it
	// go: it still counts the pod as healthy. It must not end the entry.
	h.clock.Step(10 * time.Millisecond)
	h.pdb(webPDB("web", oneLeft).Obj())
	mustDeny(t, h.c.Decide(webPod("b").Obj(), OperationDelete), ReasonInsufficientBudget)

	// The recomputed status lands; once the settle delay has passed since
	// the pod went, the status is trusted and the entry ends.
	h.clock.Step(50 * time.Millisecond)
	h.pdb(webPDB("web", pdbStatus{healthy: 2, desired: 2, allowed: 0}).Obj())
	h.clock.Step(DefaultSettleDelay)
	if got := h.c.ledger.inflight(budgetKey{KindPDB, ns, "web"}, h.clock.Now()); got != 0 {
		t.Fatalf("in flight = %d after the recomputed status settled, want 0", got)
	}
	mustDeny(t, h.c.Decide(webPod("b").Obj(), OperationDelete), ReasonInsufficientBudget)
	// The replacement becomes ready: the budget is back.
	h.pdb(webPDB("web", oneLeft).Obj())
	mustAllow(t, h.c.Decide(webPod("b").Obj(), OperationDelete))
}

func TestReservationOfGonePodHeldWithoutStatusUntilMaxHold(t *testing.T) {
	h := newHarness(t)
	h.add(webPDB("web", oneLeft).Obj())
	h.c.Reserve(webPod("a").Obj(), OperationDelete)
	h.podEvent(webPod("a").Obj(), true)
	h.clock.Step(DefaultReservationTTL + DefaultSettleDelay)
	mustDeny(t, h.c.Decide(webPod("b").Obj(), OperationDelete), ReasonInsufficientBudget)
	h.clock.Step(DefaultMaxHold)
	mustAllow(t, h.c.Decide(webPod("b").Obj(), OperationDelete))
}

func TestRecreatedPodDoesNotInheritReservation(t *testing.T) {
	h := newHarness(t)
	h.add(webPDB("web", pdbStatus{4, 2, 2}).Obj())
	h.c.Reserve(webPod("a").Obj(), OperationDelete)
	again := webPod("a").UID("uid-a-2").Obj()
	// The new pod of the same name is a different pod: it spends.
	d := h.c.Decide(again, OperationDelete)
	if !d.Allowed || len(d.Spends) != 1 {
		t.Fatalf("a recreated pod must spend its own budget, got %+v", d)
	}
}

func TestBudgetDeletionForgetsItsReservations(t *testing.T) {
	h := newHarness(t)
	p := webPDB("web", oneLeft).Obj()
	h.add(p)
	h.c.Reserve(webPod("a").Obj(), OperationDelete)
	h.c.onPDB(p, true)
	if h.c.InFlight() != 0 {
		t.Fatal("deleting a budget must drop its reservations")
	}
	mustAllow(t, h.c.Decide(webPod("b").Obj(), OperationDelete))
}

// In a dry run the "evicted" pod is deleted from a fake cluster, restored
// after the loop, and no status ever records its disruption: a status
// update, however late, or the pod coming back must not free the budget
// before MaxHold.
func TestDryRunReservationHoldsUntilMaxHold(t *testing.T) {
	h := newHarness(t)
	h.c.ledger = newLedger(LedgerOptions{DryRun: true}, h.clock)
	h.add(webPDB("web", oneLeft).Obj())
	a := webPod("a").Obj()
	mustAllow(t, h.c.Decide(a, OperationEvict))
	h.c.Reserve(a, OperationEvict)
	h.podEvent(a, true)
	h.clock.Step(DefaultReservationTTL + DefaultSettleDelay)
	h.pdb(webPDB("web", oneLeft).Obj())
	h.podEvent(a, false) // restored
	h.clock.Step(time.Second)
	mustDeny(t, h.c.Decide(webPod("b").Obj(), OperationEvict), ReasonInsufficientBudget)
	if got := h.c.HeldBy(a); len(got) != 1 || got[0].String() != "pdb "+ns+"/web" {
		t.Errorf("HeldBy(a) = %v, want [pdb %s/web]", got, ns)
	}
	h.clock.Step(DefaultMaxHold)
	mustAllow(t, h.c.Decide(webPod("b").Obj(), OperationEvict))
	if got := h.c.HeldBy(a); len(got) != 0 {
		t.Errorf("HeldBy(a) = %v after MaxHold, want none", got)
	}
}

// TestGonePodHeldUntilAStatusCountsItsGoing: a status update computed before
// pod a went (a still counted healthy, not in disruptedPods, 1 allowed) can
// reach the Cache after a is seen gone, and the status that counts a's going
// can take longer than the settle delay (a slow budget controller, a watch
// that dropped). The entry of a must hold until a status counts a's going,
// however long that takes; the settle delay alone ended it, and a second
// disruption went on a budget that allowed one. With the pod informer's
// live count the second disruption was refused all the same (the live count
// has a gone), but only as StatusBehindPods: without it, it was allowed.
func TestGonePodHeldUntilAStatusCountsItsGoing(t *testing.T) {
	type budgetOf func(st pdbStatus) any
	kinds := []struct {
		name   string
		kind   BudgetKind
		budget budgetOf
	}{
		{"pdb", KindPDB, func(st pdbStatus) any { return webPDB("web", st).Obj() }},
		{"pub", KindPUB, func(st pdbStatus) any { return pub("web", st).MatchLabels("app", "web").Obj() }},
	}
	for _, k := range kinds {
		for _, live := range []bool{false, true} {
			for _, plan := range []bool{false, true} {
				name := fmt.Sprintf("%s/live=%v/plan=%v", k.name, live, plan)
				t.Run(name, func(t *testing.T) {
					h := newHarness(t)
					h.add(k.budget(oneLeft))
					a, b, c := webPod("a").Obj(), webPod("b").Obj(), webPod("c").Obj()
					if live {
						h.livePods(a, b, c)
					}
					decideB := func() Decision {
						if plan {
							return h.c.NewPlan(OperationEvict).Add(b)
						}
						return h.c.Decide(b, OperationEvict)
					}
					key := budgetKey{k.kind, ns, "web"}
					if _, r := h.c.Reserve(a, OperationEvict); r == nil {
						t.Fatal("a's disruption reserved nothing")
					}
					h.clock.Step(100 * time.Millisecond)
					h.podEvent(a, true)
					// Computed before a went, delivered after it was seen gone.
					h.clock.Step(10 * time.Millisecond)
					h.add(k.budget(oneLeft))
					h.clock.Step(DefaultSettleDelay + time.Second)
					mustDeny(t, decideB(), ReasonInsufficientBudget)
					h.clock.Step(30 * time.Second)
					mustDeny(t, decideB(), ReasonInsufficientBudget)
					if got := h.c.ledger.inflight(key, h.clock.Now()); got != 1 {
						t.Fatalf("in flight = %d before any status counted a's going, want 1", got)
					}

					// The status that counts a's going: a is no longer healthy.
					h.clock.Step(time.Second)
					h.add(k.budget(pdbStatus{healthy: 2, desired: 2, allowed: 0}))
					if got := h.c.ledger.inflight(key, h.clock.Now()); got != 0 {
						t.Fatalf("in flight = %d after a status counted a's going, want 0", got)
					}
					mustDeny(t, decideB(), ReasonInsufficientBudget)
					// A replacement is ready and counted: the budget is back.
					if live {
						h.podEvent(webPod("a2").Obj(), false)
					}
					h.add(k.budget(oneLeft))
					mustAllow(t, decideB())
				})
			}
		}
	}
}

// TestGonePlanVictimsHeldUntilTheStatusCountsEveryGoing: two victims of one
// plan went unrecorded; a status that counts one of them (3 healthy of the
// 4 they were decided on) still counts the other healthy, so neither entry
// ends on it, and no third disruption goes while that status allows one.
func TestGonePlanVictimsHeldUntilTheStatusCountsEveryGoing(t *testing.T) {
	h := newHarness(t)
	h.add(webPDB("web", pdbStatus{healthy: 4, desired: 2, allowed: 2}).Obj())
	p := h.c.NewPlan(OperationDelete)
	a, b := webPod("a").Obj(), webPod("b").Obj()
	mustAllow(t, p.Add(a))
	mustAllow(t, p.Add(b))
	if _, err := p.Reserve(); err != nil {
		t.Fatal(err)
	}
	h.clock.Step(100 * time.Millisecond)
	h.podEvent(a, true)
	h.podEvent(b, true)
	h.clock.Step(100 * time.Millisecond)
	h.pdb(webPDB("web", pdbStatus{healthy: 3, desired: 2, allowed: 1}).Obj())
	h.clock.Step(DefaultSettleDelay)
	mustDeny(t, h.c.Decide(webPod("c").Obj(), OperationDelete), ReasonInsufficientBudget)
	h.pdb(webPDB("web", pdbStatus{healthy: 2, desired: 2, allowed: 0}).Obj())
	if got := h.c.ledger.inflight(budgetKey{KindPDB, ns, "web"}, h.clock.Now()); got != 0 {
		t.Fatalf("in flight = %d once a status counted both goings, want 0", got)
	}
}
