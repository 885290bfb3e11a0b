package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

func TestQuietLoggingKeepsErrorsOnly(t *testing.T) {
	state := klog.CaptureState()
	defer state.Restore()
	var out strings.Builder
	ctx := quietLogging(context.Background(), &out)
	logger := klog.FromContext(ctx).WithName("pub-status").WithValues("k", "v")
	logger.Info("Waiting for caches to sync")
	logger.V(0).Info("also dropped")
	logger.Error(errors.New("boom"), "PodUnavailableBudget cannot be simulated")
	klog.Info("global klog is discarded")
	klog.Flush()
	got := out.String()
	if strings.Contains(got, "Waiting") || strings.Contains(got, "dropped") || strings.Contains(got, "global") {
		t.Errorf("info lines were written:\n%s", got)
	}
	for _, want := range []string{"PodUnavailableBudget cannot be simulated", "boom", "pub-status", `k="v"`} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}
