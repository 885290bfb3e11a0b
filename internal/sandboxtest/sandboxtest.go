// Package sandboxtest starts the sandbox's control plane for a test outside
// package sandbox: one helper for the set-up every such test repeats.
package sandboxtest

import (
	"context"
	"testing"

	"github.com/budgetguard/budgetguard/sandbox"
)

// Start starts a control plane with opts and stops it when the test ends; a
// failure to start or to stop fails the test. ctx carries the control
// plane's logger and bounds its start.
func Start(ctx context.Context, t testing.TB, opts sandbox.Options) *sandbox.ControlPlane {
	t.Helper()
	cp, err := sandbox.Start(ctx, opts)
	if err != nil {
		t.Fatalf("start the control plane: %v", err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("stop the control plane: %v", err)
		}
	})
	return cp
}
