package integration

import (
	"flag"
	"testing"
	"time"

	"github.com/budgetguard/budgetguard/internal/audit"
)

var (
	promiseSeed        = flag.Int64("promise.seed", 0, "seed of TestPromiseAllActors; 0 takes one from the clock (the test logs it)")
	promiseDisruptions = flag.Int("promise.disruptions", 300, "disruptions TestPromiseAllActors must see")
)

// TestPromiseAllActors: every actor that takes pods away, at once, against
// the same budgets, and the independent auditor counts no violation by
// budgetguard's scheduler and descheduler. (Violations by the API server's
// own decisions on the test's direct evictions are logged: see
// splitViolations.) One
// kube-scheduler with two profiles, both BudgetAwarePreemption with Delete
// actuation, preempts in waves; the descheduler (PodLifeTime, which wants
// every pod older than 10 s gone, with BudgetAwareEvictor) runs a loop
// every 2 s; the test posts evictions of
// random pods itself, as kubectl drain would; pods flap to not Ready and
// back; PDB specs change (integers, percentages, every unhealthy-pod
// policy, some allowing nothing); the ReplicaSets replace what is gone.
// 20 applications are under a PDB, 6 under an OpenKruise
// PodUnavailableBudget (by selector or targetRef, its status simulated as
// OpenKruise's controller writes it); the test's own evictions leave those
// alone, as no Kruise webhook runs here to refuse them.
// The run ends once the pods seen disrupted reach -promise.disruptions, and
// the auditor must count at least that many, across at least 20 budgets,
// with every actor among them, and none by budgetguard.
func TestPromiseAllActors(t *testing.T) {
	seed := *promiseSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (run it again with -args -promise.seed=%d)", seed, seed)
	r := runChurn(t, churnConfig{
		seed: seed,
		apps: 26, pubApps: 6, replicas: 4, nodes: 7, podCPU: "250m", nodeCPU: "4",
		waveSize: 3, preemptorCPU: "1", waveHold: 3 * time.Second,
		descheduleEvery: 2 * time.Second, podLifeTime: 10 * time.Second,
		evictEvery: 150 * time.Millisecond, flapEvery: 400 * time.Millisecond, editEvery: 2 * time.Second,
		disruptions: *promiseDisruptions, maxDuration: 150 * time.Second,
	})
	t.Log(r.summary())

	ours, others := r.splitViolations()
	if n := len(ours); n != 0 {
		t.Errorf("the auditor counted %d violations by budgetguard's scheduler and descheduler, want 0", n)
	}
	if n := len(others); n != 0 {
		// The API server's decisions, not budgetguard's (see
		// splitViolations): reported, not failed.
		t.Logf("the auditor counted %d violations by the API server's own decisions on the test's direct evictions and rollouts", n)
	}
	if n := len(r.res.Disruptions); n < *promiseDisruptions {
		t.Errorf("the auditor counted %d disruptions, want at least %d", n, *promiseDisruptions)
	}
	if r.budgets < 20 {
		t.Errorf("the auditor saw %d budgets, want at least 20", r.budgets)
	}
	pubDisruptions := 0
	for _, b := range r.res.Budgets {
		if b.Budget.Kind == audit.KindPUB {
			pubDisruptions += b.Disruptions
		}
	}
	t.Logf("disruptions of pods under a PUB: %d", pubDisruptions)
	if pubDisruptions == 0 {
		t.Error("no pod under a PUB was disrupted")
	}
	by := r.disruptionsBy()
	for _, actor := range []string{"scheduler", "descheduler", "direct-evictor"} {
		if by[actor] == 0 {
			t.Errorf("no disruption by the %s; every actor must take part (disruptions by actor: %s)", actor, sortedMap(by))
		}
	}
}
