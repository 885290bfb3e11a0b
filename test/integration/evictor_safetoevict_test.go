package integration

import (
	"net/http"
	"testing"

	"github.com/budgetguard/budgetguard/plugins/budget"
)

// Pods annotated safe-to-evict "false" are never evicted, even under no
// budget at all, so the descheduler agrees with cluster-autoscaler.
func TestEvictorSafeToEvictFalseIsNeverEvicted(t *testing.T) {
	ns, sel, _ := setupUnderutilizedWith(t, map[string]string{budget.AnnotationSafeToEvict: "false"}, -1)
	got := runDescheduler(t, highUtilizationPolicy(ns, sel, true), false)
	if n := got.Total(); n != 0 {
		t.Errorf("eviction requests = %d, want 0 (answers: %s)", n, got)
	}
	// The reference shows the strategy did want them: DefaultEvictor alone
	// evicts all 3.
	ref := runDescheduler(t, highUtilizationPolicy(ns, sel, false), false)
	if n := ref.Count(http.StatusCreated); n != 3 {
		t.Errorf("reference evictions = %d, want 3 (answers: %s)", n, ref)
	}
}
