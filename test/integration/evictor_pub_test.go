package integration

import (
	"net/http"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/budgetguard/budgetguard/internal/testobj"
)

// A PodUnavailableBudget that allows 1 unavailable pod limits the
// descheduler to 1 eviction. There is no PDB, and the pods exist before the
// PUB, so the sandbox's stand-in for Kruise's webhook, which ties a pod to
// its PUB when the pod is created, does not protect them (nor would
// Kruise's): the API server lets the stock descheduler evict all 3.
func TestEvictorPodUnavailableBudget(t *testing.T) {
	ns, sel, _ := setupUnderutilizedWith(t, nil, -1)
	pub := env.CreatePUB(t, ns, testobj.MakePUB().Name("web").MatchLabels("app", "web").MaxUnavailable(intstr.FromInt32(1)))
	// No Kruise controller runs here: write the status it would compute.
	env.SetPUBStatus(t, pub, 3, 2, 1)

	got := runDescheduler(t, highUtilizationPolicy(ns, sel, true), false)
	if n := got.Count(http.StatusCreated); n != 1 {
		t.Errorf("evictions = %d, want 1, the PUB's budget (answers: %s)", n, got)
	}
	if n := got.Total(); n != 1 {
		t.Errorf("eviction requests = %d, want 1 (answers: %s)", n, got)
	}
}

// The reference for TestEvictorPodUnavailableBudget: DefaultEvictor knows
// nothing of PUBs, and no webhook protects pods created before their PUB.
func TestDeschedulerDefaultEvictorIgnoresPUB(t *testing.T) {
	ns, sel, _ := setupUnderutilizedWith(t, nil, -1)
	env.CreatePUB(t, ns, testobj.MakePUB().Name("web").MatchLabels("app", "web").MaxUnavailable(intstr.FromInt32(1)))
	got := runDescheduler(t, highUtilizationPolicy(ns, sel, false), false)
	if n := got.Count(http.StatusCreated); n != 3 {
		t.Errorf("evictions = %d, want 3 (answers: %s)", n, got)
	}
}
