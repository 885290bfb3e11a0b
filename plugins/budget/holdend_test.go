package budget

import (
	"fmt"
	"testing"
	"time"
)

// Tests of how a hold on a budget ends (docs/design.md, The ledger): the
// evidence that lets a hold whose pod went end before MaxHold, and the
// OnRelease hooks at each end that frees a budget.

// holdKinds are the budget kinds a hold-end test runs under: budget makes
// the budget (selecting app web) with status st.
var holdKinds = []struct {
	name   string
	kind   BudgetKind
	budget func(st pdbStatus) any
}{
	{"pdb", KindPDB, func(st pdbStatus) any { return webPDB("web", st).Obj() }},
	{"pub", KindPUB, func(st pdbStatus) any { return pub("web", st).MatchLabels("app", "web").Obj() }},
}

func inflightOf(h *harness, kind BudgetKind) int32 {
	h.c.ledger.mu.RLock()
	defer h.c.ledger.mu.RUnlock()
	return h.c.ledger.inflight(budgetKey{kind, ns, "web"}, h.clock.Now())
}

// TestGonePodCountedByAStatusThatCameFirst (D1): the budget's controller
// saw pod a's deletion before this Cache's pod informer delivered it, so
// the status that counts a's going (4 healthy when a was decided, 3 now)
// reaches the Cache before a's delete event. That status counts a's going
// all the same: the hold ends once the settle delay has passed since a
// went, and b, which the status allows, may go. The hold used to wait for a
// status received after a went, which never came, until MaxHold.
func TestGonePodCountedByAStatusThatCameFirst(t *testing.T) {
	for _, k := range holdKinds {
		t.Run(k.name, func(t *testing.T) {
			h := newHarness(t)
			h.add(k.budget(pdbStatus{healthy: 4, desired: 2, allowed: 2}))
			a, b := webPod("a").Obj(), webPod("b").Obj()
			if _, r := h.c.Reserve(a, OperationDelete); r == nil {
				t.Fatal("a's disruption reserved nothing")
			}
			h.clock.Step(100 * time.Millisecond)
			h.add(k.budget(pdbStatus{healthy: 3, desired: 2, allowed: 1}))
			h.clock.Step(10 * time.Millisecond)
			h.podEvent(a, true)
			// The settle delay still applies from when a was seen gone.
			mustDeny(t, h.c.Decide(b, OperationDelete), ReasonInsufficientBudget)
			h.clock.Step(DefaultSettleDelay)
			if got := inflightOf(h, k.kind); got != 0 {
				t.Errorf("in flight = %d once a went and the settle delay passed, after a status that counts its going, want 0", got)
			}
			mustAllow(t, h.c.Decide(b, OperationDelete))
		})
	}
}

// TestGonePodWhoseReplacementIsReadyEnds (D2): pod a went and its
// replacement a2 turned Ready before the budget's controller wrote a
// status, so no status ever shows a's going: the count stays at the 3 a
// was decided on (the disruption controller writes nothing when nothing
// changed, or writes the same count). The live count shows it: a is not
// counted, and the status counts no more healthy pods than are healthy now
// (b, c, a2). The hold ends once the settle delay has passed since a went,
// and b, which the status and the live count allow, may go; it used to be
// refused as "1 in flight" until MaxHold. On the ledger alone, a status
// that counted a Ready pod before it counted a's going (3, then 4, then 3)
// shows the going too.
func TestGonePodWhoseReplacementIsReadyEnds(t *testing.T) {
	oneMore := pdbStatus{healthy: 4, desired: 2, allowed: 2}
	for _, k := range holdKinds {
		for _, tc := range []struct {
			name string
			live bool
			then func(h *harness)
		}{
			{"live/no status", true, func(h *harness) { h.podEvent(webPod("a2").Obj(), false) }},
			{"live/the same count written after", true, func(h *harness) {
				h.podEvent(webPod("a2").Obj(), false)
				h.add(k.budget(oneLeft))
			}},
			{"live/the same count written before", true, func(h *harness) {
				h.add(k.budget(oneLeft))
				h.podEvent(webPod("a2").Obj(), false)
			}},
			{"ledger alone/a Ready pod counted before the going", false, func(h *harness) {
				h.add(k.budget(oneMore))
				h.add(k.budget(oneLeft))
			}},
		} {
			t.Run(k.name+"/"+tc.name, func(t *testing.T) {
				h := newHarness(t)
				h.add(k.budget(oneLeft))
				a, b, c := webPod("a").Obj(), webPod("b").Obj(), webPod("c").Obj()
				if tc.live {
					h.livePods(a, b, c)
				}
				if _, r := h.c.Reserve(a, OperationDelete); r == nil {
					t.Fatal("a's disruption reserved nothing")
				}
				h.clock.Step(100 * time.Millisecond)
				h.podEvent(a, true)
				h.clock.Step(10 * time.Millisecond)
				tc.then(h)
				h.clock.Step(DefaultSettleDelay)
				if got := inflightOf(h, k.kind); got != 0 {
					t.Errorf("in flight = %d once a's going is accounted for, want 0", got)
				}
				mustAllow(t, h.c.Decide(b, OperationDelete))
			})
		}
	}
}

// TestHoldsDecidedOnDifferentCountsEndTogether (D3): a was decided on 3
// healthy pods; then a pod turned Ready (4) and b was decided on 4. Once
// both went, the status counts 2: both goings. The holds used to wait for
// a count 2 below the lower of the two (1), which never comes; they end
// now, and c, which the status allows (2 healthy, 1 desired), may go.
func TestHoldsDecidedOnDifferentCountsEndTogether(t *testing.T) {
	for _, k := range holdKinds {
		t.Run(k.name, func(t *testing.T) {
			h := newHarness(t)
			h.add(k.budget(pdbStatus{healthy: 3, desired: 1, allowed: 2}))
			a, b, c := webPod("a").Obj(), webPod("b").Obj(), webPod("c").Obj()
			if _, r := h.c.Reserve(a, OperationDelete); r == nil {
				t.Fatal("a's disruption reserved nothing")
			}
			h.clock.Step(100 * time.Millisecond)
			h.add(k.budget(pdbStatus{healthy: 4, desired: 1, allowed: 3}))
			if _, r := h.c.Reserve(b, OperationDelete); r == nil {
				t.Fatal("b's disruption reserved nothing")
			}
			h.clock.Step(100 * time.Millisecond)
			h.podEvent(a, true)
			h.podEvent(b, true)
			h.clock.Step(100 * time.Millisecond)
			h.add(k.budget(pdbStatus{healthy: 2, desired: 1, allowed: 1}))
			h.clock.Step(DefaultSettleDelay)
			if got := inflightOf(h, k.kind); got != 0 {
				t.Errorf("in flight = %d once a status counted both goings, want 0", got)
			}
			mustAllow(t, h.c.Decide(c, OperationDelete))
		})
	}
}

// TestAnotherPodsDropDoesNotCountAGoing (L1): on the ledger alone (no live
// count), a was decided on 4 healthy pods and went; then b turned not
// Ready, and a status computed before the controller saw a go counts b's
// drop alone (3). That drop is not a's: the hold of a stays, and c is
// refused, whichever of b's event and the status reaches the Cache first
// (within the settle delay). Counting that drop as a's going ended the hold
// after the settle delay, and c went with 2 healthy pods of 2 desired left
// (c and d), leaving 1. Once a status counts both drops (2), the hold ends.
func TestAnotherPodsDropDoesNotCountAGoing(t *testing.T) {
	for _, k := range holdKinds {
		for _, statusFirst := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/status first=%v", k.name, statusFirst), func(t *testing.T) {
				h := newHarness(t)
				h.add(k.budget(pdbStatus{healthy: 4, desired: 2, allowed: 2}))
				a, c := webPod("a").Obj(), webPod("c").Obj()
				for _, p := range []string{"a", "b", "c", "d"} {
					h.podEvent(webPod(p).Obj(), false)
				}
				if h.c.liveCounted() {
					t.Fatal("the live count is on; this test is about the ledger alone")
				}
				if _, r := h.c.Reserve(a, OperationDelete); r == nil {
					t.Fatal("a's disruption reserved nothing")
				}
				h.clock.Step(100 * time.Millisecond)
				h.podEvent(a, true)
				h.clock.Step(10 * time.Millisecond)
				bDrops := func() { h.podEvent(notReady("b"), false) }
				status := func() { h.add(k.budget(pdbStatus{healthy: 3, desired: 2, allowed: 1})) }
				if statusFirst {
					status()
					h.clock.Step(10 * time.Millisecond)
					bDrops()
				} else {
					bDrops()
					h.clock.Step(10 * time.Millisecond)
					status()
				}
				h.clock.Step(DefaultSettleDelay)
				if got := inflightOf(h, k.kind); got != 1 {
					t.Errorf("in flight = %d after a status that counts another pod's drop, want 1", got)
				}
				mustDeny(t, h.c.Decide(c, OperationDelete), ReasonInsufficientBudget)

				h.add(k.budget(pdbStatus{healthy: 2, desired: 2, allowed: 0}))
				if got := inflightOf(h, k.kind); got != 0 {
					t.Errorf("in flight = %d once a status counts both drops, want 0", got)
				}
				h.podEvent(webPod("b").Obj(), false)
				h.add(k.budget(pdbStatus{healthy: 3, desired: 2, allowed: 1}))
				mustAllow(t, h.c.Decide(c, OperationDelete))
			})
		}
	}
}

// TestReleaseHooksFollowEveryEndThatFreesABudget (D4): a preemptor refused
// for "N in flight" is retried when a hold ends, whatever ends it: the
// OnRelease hooks run at the moment a hold ends by MaxHold, by the settle
// delay, at once when the status that counts the going comes after the
// settle delay, and at the expiry of a hold made before the hook was
// registered. They used to run only on a cancel and on the expiry of a
// hold made after a hook was registered, and the preemptor waited for an
// unrelated budget event or the scheduling queue's flush. The hooks run
// without the ledger's lock (the hook here reads the ledger).
func TestReleaseHooksFollowEveryEndThatFreesABudget(t *testing.T) {
	counting := pdbStatus{healthy: 3, desired: 2, allowed: 1}
	for _, tc := range []struct {
		name string
		// late registers the hook after the reservation.
		late bool
		// before runs after the reservation, up to a moment before the
		// hold ends; end ends it.
		before, end func(h *harness)
	}{
		{"max hold", false, func(h *harness) {
			h.podEvent(webPod("a").Obj(), true)
			h.clock.Step(DefaultReservationTTL + DefaultSettleDelay)
		}, func(h *harness) { h.clock.Step(DefaultMaxHold) }},
		{"settle delay", false, func(h *harness) {
			h.podEvent(webPod("a").Obj(), true)
			h.clock.Step(10 * time.Millisecond)
			h.pdb(webPDB("web", counting).Obj())
		}, func(h *harness) { h.clock.Step(DefaultSettleDelay) }},
		{"counted after the settle delay", false, func(h *harness) {
			h.podEvent(webPod("a").Obj(), true)
			h.clock.Step(DefaultSettleDelay + time.Second)
		}, func(h *harness) { h.pdb(webPDB("web", counting).Obj()) }},
		{"expiry of a hold made before the hook", true, func(*harness) {}, func(h *harness) { h.clock.Step(DefaultReservationTTL) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.pdb(webPDB("web", pdbStatus{healthy: 4, desired: 2, allowed: 2}).Obj())
			released := make(chan int, 10)
			hook := func() { released <- h.c.InFlight() }
			if !tc.late {
				h.c.OnRelease(hook)
			}
			if _, r := h.c.Reserve(webPod("a").Obj(), OperationDelete); r == nil {
				t.Fatal("a's disruption reserved nothing")
			}
			if tc.late {
				h.c.OnRelease(hook)
			}
			tc.before(h)
			select {
			case <-released:
				t.Fatal("a release hook ran while the hold was live")
			case <-time.After(100 * time.Millisecond):
			}
			tc.end(h)
			select {
			case n := <-released:
				if n != 0 {
					t.Errorf("the hook saw %d holds, want 0", n)
				}
			case <-time.After(2 * time.Second):
				t.Fatal("no release hook ran when the hold ended")
			}
		})
	}
}

// TestPlanVictimGoingLaterNeedsItsOwnDrop: a and b, victims of one plan,
// were decided on 4 healthy pods. a went first and a status counted it (3);
// b went later, and a status that still counts 3 (computed before b went)
// shows a's going, not b's: b's hold stays, and c is refused. Held against
// the count of b's decision less b alone, b's hold ended on it, and c went
// with 2 healthy pods of 2 desired left (c and d), leaving 1.
func TestPlanVictimGoingLaterNeedsItsOwnDrop(t *testing.T) {
	h := newHarness(t)
	h.add(webPDB("web", pdbStatus{healthy: 4, desired: 2, allowed: 2}).Obj())
	a, b, c := webPod("a").Obj(), webPod("b").Obj(), webPod("c").Obj()
	p := h.c.NewPlan(OperationDelete)
	mustAllow(t, p.Add(a))
	mustAllow(t, p.Add(b))
	if _, err := p.Reserve(); err != nil {
		t.Fatal(err)
	}
	h.clock.Step(100 * time.Millisecond)
	h.podEvent(a, true)
	h.pdb(webPDB("web", pdbStatus{healthy: 3, desired: 2, allowed: 1}).Obj())
	h.clock.Step(DefaultSettleDelay)
	if got := inflightOf(h, KindPDB); got != 1 {
		t.Fatalf("in flight = %d once a's going was counted, want 1 (b)", got)
	}
	h.podEvent(b, true)
	h.clock.Step(10 * time.Millisecond)
	h.pdb(webPDB("web", pdbStatus{healthy: 3, desired: 2, allowed: 1}).Obj())
	h.clock.Step(DefaultSettleDelay)
	if got := inflightOf(h, KindPDB); got != 1 {
		t.Errorf("in flight = %d after a status that counts a's going alone, want 1 (b)", got)
	}
	mustDeny(t, h.c.Decide(c, OperationDelete), ReasonInsufficientBudget)
	h.pdb(webPDB("web", pdbStatus{healthy: 2, desired: 2, allowed: 0}).Obj())
	if got := inflightOf(h, KindPDB); got != 0 {
		t.Errorf("in flight = %d once a status counts both goings, want 0", got)
	}
}
