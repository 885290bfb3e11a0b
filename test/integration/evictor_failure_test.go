package integration

import (
	"net/http"
	"testing"
)

// An eviction that fails does not lose the budget it reserved: a later loop
// of the same descheduler evicts (the same pod, whose live reservation
// spends nothing new, or another once the reservation has expired after the
// ledger's ReservationTTL), exactly once, and the API server sends no 429.
func TestEvictorFailedEvictionDoesNotHoldBudget(t *testing.T) {
	ns, sel := setupUnderutilized(t)
	got := runDeschedulerWith(t, highUtilizationPolicy(ns, sel, true), false, func(c *evictionCounter) bool {
		return c.Count(http.StatusCreated) >= 1
	}, 1)
	if got.Injected() != 1 {
		t.Fatalf("injected eviction failures = %d, want 1", got.Injected())
	}
	if n := got.Count(http.StatusCreated); n != 1 {
		t.Errorf("evictions after the failed one = %d, want 1 (answers: %s)", n, got)
	}
	if n := got.Count(http.StatusTooManyRequests); n != 0 {
		t.Errorf("429s = %d, want 0 (answers: %s)", n, got)
	}
}
