package budget

import (
	"context"
	"testing"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
)

// TestReleaseHooksFollowReservationsThatEndUnused: a reservation that is
// cancelled (the API server refused the disruption), or that ends because
// its disruption never happened, frees its budget with no budget event; the
// OnRelease hooks say so, so that a preemptor the reservation blocked is
// retried at once rather than at the scheduling queue's 5-minute flush. A
// reservation whose pod went holds until its going is counted: no hook
// meanwhile (the other ends: TestReleaseHooksFollowEveryEndThatFreesABudget).
func TestReleaseHooksFollowReservationsThatEndUnused(t *testing.T) {
	ctx := klog.NewContext(context.Background(), ktesting.NewLogger(t, ktesting.NewConfig()))
	const ttl = 50 * time.Millisecond
	c, err := New(ctx, informers.NewSharedInformerFactory(fake.NewClientset(), 0), Options{Ledger: LedgerOptions{ReservationTTL: ttl}})
	if err != nil {
		t.Fatal(err)
	}
	c.onPDB(webPDB("web", pdbStatus{healthy: 6, desired: 3, allowed: 3}).Obj(), false)
	released := make(chan struct{}, 10)
	c.OnRelease(func() { released <- struct{}{} })
	expect := func(what string, want bool) {
		t.Helper()
		select {
		case <-released:
			if !want {
				t.Errorf("%s: a release hook was called, want none", what)
			}
		case <-time.After(10 * ttl):
			if want {
				t.Errorf("%s: no release hook was called", what)
			}
		}
	}

	d, r := c.Reserve(webPod("a").Obj(), OperationEvict)
	mustAllow(t, d)
	r.Cancel()
	expect("cancelled", true)
	expect("cancelled, then its time passed", false)

	d, _ = c.Reserve(webPod("b").Obj(), OperationEvict)
	mustAllow(t, d)
	expect("unused until it ended", true)
	if n := c.InFlight(); n != 0 {
		t.Errorf("after the unused reservation ended: %d reservations held, want 0", n)
	}

	d, _ = c.Reserve(webPod("c").Obj(), OperationEvict)
	mustAllow(t, d)
	c.onPod(webPod("c").Terminating(time.Now()).Obj(), false)
	expect("its pod went", false)
}
