package testenv

import (
	"context"
	"testing"
	"time"
)

// A wait longer than Context's 2 minutes gets its own time: the quick
// start's 15-minute wait for its build ended after 2 minutes on a busy
// machine ("context deadline exceeded").
func TestWaitContextOutlastsTwoMinutes(t *testing.T) {
	deadline := time.Now().Add(15 * time.Minute)
	got, ok := waitContext(t, deadline).Deadline()
	if !ok || got.Before(deadline) {
		t.Errorf("the wait's context ends at %v (set: %v), before the wait's deadline %v", got, ok, deadline)
	}
	var seen context.Context
	WaitFor(t, 15*time.Minute, "the condition", func(ctx context.Context) (bool, error) { seen = ctx; return true, nil })
	if d, ok := seen.Deadline(); !ok || time.Until(d) < 14*time.Minute {
		t.Errorf("WaitFor(15m) passed its condition a context ending in %v", time.Until(d).Round(time.Second))
	}
}
