package budget

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	h.add(mkPDB("web", appWeb(), pdbStatus{healthy: 4, desired: 2, allowed: 2}))
	p := h.c.NewPlan(OperationDelete)
	mustAllow(t, p.Add(mkPod("a")))
	mustAllow(t, p.Add(mkPod("b")))
	d := p.Add(mkPod("c"))
	mustDeny(t, d, ReasonInsufficientBudget)
	if want := "2 in flight"; !strings.Contains(d.Message(), want) {
		t.Errorf("message %q should count the plan's earlier victims (%q)", d.Message(), want)
	}
	// A plan reserves nothing until Reserve.
	mustAllow(t, h.c.Decide(mkPod("c"), OperationDelete))
	r, err := p.Reserve()
	if err != nil {
		t.Fatal(err)
	}
	if got := h.c.InFlight(); got != 2 {
		t.Fatalf("in flight after Reserve = %d, want 2", got)
	}
	mustDeny(t, h.c.Decide(mkPod("c"), OperationDelete), ReasonInsufficientBudget)
	r.Cancel()
	mustAllow(t, h.c.Decide(mkPod("c"), OperationDelete))
}

func TestPlanReserveRechecksAgainstTheLedger(t *testing.T) {
	h := newHarness(t)
	h.add(mkPDB("web", appWeb(), oneLeft))
	p1, p2 := h.c.NewPlan(OperationEvict), h.c.NewPlan(OperationEvict)
	mustAllow(t, p1.Add(mkPod("a")))
	mustAllow(t, p2.Add(mkPod("b")))
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
	h.add(mkPDB("web", appWeb(), oneLeft))
	d, r := h.c.Reserve(mkPod("a"), OperationEvict)
	mustAllow(t, d)
	if r == nil {
		t.Fatal("an allowed spend must return a reservation")
	}
	mustDeny(t, h.c.Decide(mkPod("b"), OperationEvict), ReasonInsufficientBudget)
	h.clock.Step(DefaultReservationTTL - time.Millisecond)
	mustDeny(t, h.c.Decide(mkPod("b"), OperationEvict), ReasonInsufficientBudget)
	// Deciding again about the pod already reserved spends nothing new.
	d = h.c.Decide(mkPod("a"), OperationEvict)
	if !d.Free() {
		t.Fatalf("the reserved pod itself must be free to decide again, got %+v", d)
	}
}

func TestReservationEndsWhenStatusRecordsTheDisruption(t *testing.T) {
	h := newHarness(t)
	h.add(mkPDB("web", appWeb(), oneLeft))
	_, r := h.c.Reserve(mkPod("a"), OperationEvict)
	if r == nil {
		t.Fatal("no reservation")
	}
	// An unrelated status update keeps it.
	h.pdb(mkPDB("web", appWeb(), oneLeft))
	if h.c.InFlight() != 1 {
		t.Fatal("an update that does not record the pod must not end the reservation")
	}
	// The API server's eviction records the pod and decrements.
	h.pdb(mkPDB("web", appWeb(), pdbStatus{healthy: 3, desired: 2, allowed: 0}, disrupted("a")))
	if got := h.c.InFlight(); got != 0 {
		t.Fatalf("in flight = %d after the status recorded the pod, want 0", got)
	}
	mustDeny(t, h.c.Decide(mkPod("b"), OperationEvict), ReasonInsufficientBudget)
}

func TestReservationOfAnAlreadyRecordedPodWaitsForANewRecord(t *testing.T) {
	h := newHarness(t)
	h.add(mkPDB("web", appWeb(), oneLeft, disrupted("a")))
	_, r := h.c.Reserve(mkPod("a"), OperationEvict)
	if r == nil {
		t.Fatal("an eviction of a recorded pod is charged again and must be reserved")
	}
	h.pdb(mkPDB("web", appWeb(), oneLeft, disrupted("a")))
	if h.c.InFlight() != 1 {
		t.Fatal("the old DisruptedPods record must not end the new reservation")
	}
	again := mkPDB("web", appWeb(), pdbStatus{3, 2, 0})
	again.Status.DisruptedPods = map[string]metav1.Time{"a": metav1.NewTime(epoch.Add(time.Second))}
	h.pdb(again)
	if h.c.InFlight() != 0 {
		t.Fatal("a new DisruptedPods record must end the reservation")
	}
}

func TestReservationEndsWhenPodNotDisrupted(t *testing.T) {
	h := newHarness(t)
	h.add(mkPDB("web", appWeb(), oneLeft))
	h.c.Reserve(mkPod("a"), OperationEvict)
	h.clock.Step(DefaultReservationTTL)
	mustAllow(t, h.c.Decide(mkPod("b"), OperationEvict))
}

func TestReservationCancel(t *testing.T) {
	h := newHarness(t)
	h.add(mkPDB("web", appWeb(), pdbStatus{4, 2, 2}))
	p := h.c.NewPlan(OperationEvict)
	p.Add(mkPod("a"))
	p.Add(mkPod("b"))
	r, err := p.Reserve()
	if err != nil {
		t.Fatal(err)
	}
	mustDeny(t, h.c.Decide(mkPod("c"), OperationEvict), ReasonInsufficientBudget)
	r.CancelPod(ns, "a")
	mustAllow(t, h.c.Decide(mkPod("c"), OperationEvict))
	if h.c.InFlight() != 1 {
		t.Fatalf("CancelPod must end only that pod's entries, in flight = %d", h.c.InFlight())
	}
}

func TestReservationOfGonePodEndsAfterRecomputedStatus(t *testing.T) {
	h := newHarness(t)
	h.add(mkPDB("web", appWeb(), oneLeft))
	h.c.Reserve(mkPod("a"), OperationDelete)
	h.clock.Step(100 * time.Millisecond)
	h.podEvent(mkPod("a", terminating), false)

	// A status computed before the pod went can arrive just after we saw it
	// go: it still counts the pod as healthy. It must not end the entry.
	h.clock.Step(10 * time.Millisecond)
	h.pdb(mkPDB("web", appWeb(), oneLeft))
	mustDeny(t, h.c.Decide(mkPod("b"), OperationDelete), ReasonInsufficientBudget)

	// The recomputed status lands; once the settle delay has passed since
	// the pod went, the status is trusted and the entry ends.
	h.clock.Step(50 * time.Millisecond)
	h.pdb(mkPDB("web", appWeb(), pdbStatus{healthy: 2, desired: 2, allowed: 0}))
	h.clock.Step(DefaultSettleDelay)
	if got := h.c.ledger.inflight(budgetKey{KindPDB, ns, "web"}, h.clock.Now()); got != 0 {
		t.Fatalf("in flight = %d after the recomputed status settled, want 0", got)
	}
	mustDeny(t, h.c.Decide(mkPod("b"), OperationDelete), ReasonInsufficientBudget)
	// The replacement becomes ready: the budget is back.
	h.pdb(mkPDB("web", appWeb(), oneLeft))
	mustAllow(t, h.c.Decide(mkPod("b"), OperationDelete))
}

func TestReservationOfGonePodHeldWithoutStatusUntilMaxHold(t *testing.T) {
	h := newHarness(t)
	h.add(mkPDB("web", appWeb(), oneLeft))
	h.c.Reserve(mkPod("a"), OperationDelete)
	h.podEvent(mkPod("a"), true)
	h.clock.Step(DefaultReservationTTL + DefaultSettleDelay)
	mustDeny(t, h.c.Decide(mkPod("b"), OperationDelete), ReasonInsufficientBudget)
	h.clock.Step(DefaultMaxHold)
	mustAllow(t, h.c.Decide(mkPod("b"), OperationDelete))
}

func TestRecreatedPodDoesNotInheritReservation(t *testing.T) {
	h := newHarness(t)
	h.add(mkPDB("web", appWeb(), pdbStatus{4, 2, 2}))
	h.c.Reserve(mkPod("a"), OperationDelete)
	again := mkPod("a")
	again.UID = "uid-a-2"
	// The new pod of the same name is a different pod: it spends.
	d := h.c.Decide(again, OperationDelete)
	if !d.Allowed || len(d.Spends) != 1 {
		t.Fatalf("a recreated pod must spend its own budget, got %+v", d)
	}
}

func TestBudgetDeletionForgetsItsReservations(t *testing.T) {
	h := newHarness(t)
	p := mkPDB("web", appWeb(), oneLeft)
	h.add(p)
	h.c.Reserve(mkPod("a"), OperationDelete)
	h.c.onPDB(p, true)
	if h.c.InFlight() != 0 {
		t.Fatal("deleting a budget must drop its reservations")
	}
	mustAllow(t, h.c.Decide(mkPod("b"), OperationDelete))
}
