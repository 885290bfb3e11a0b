//go:build soak

package integration

import (
	"flag"
	"fmt"
	"testing"
	"time"
)

var (
	soakDuration = flag.Duration("soak.duration", 10*time.Minute, "how long TestSoak churns")
	soakSeed     = flag.Int64("soak.seed", 0, "seed of TestSoak; 0 takes one from the clock (the test prints it)")
	soakFaults   = flag.Bool("soak.faults", false, "run TestSoak in the churn's fault mode (faults_test.go)")
)

// TestSoak is the churn of TestPromiseAllActors for -soak.duration, with
// rolling updates on top: preemption waves from two Delete-actuation
// profiles, a descheduling loop every 3 s, direct evictions, readiness
// flaps, PDB edits, and rollouts that replace an application's pods one
// eviction at a time. It prints the disruptions by actor, the refusals,
// the 429s and the violations at the end, and fails on any violation.
// Run it with `make soak` (build tag soak; not part of make test);
// SOAK_FAULTS=1 runs it in the fault mode, and prints the faults injected.
func TestSoak(t *testing.T) {
	seed := *soakSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	fmt.Printf("soak: seed %d (run it again with SOAK_SEED=%d), duration %s, faults %v\n", seed, seed, *soakDuration, *soakFaults)
	r := runChurn(t, churnConfig{
		seed: seed,
		apps: 26, pubApps: 6, replicas: 4, nodes: 7, podCPU: "250m", nodeCPU: "4",
		waveSize: 3, preemptorCPU: "1", waveHold: 3 * time.Second,
		descheduleEvery: 3 * time.Second, podLifeTime: 15 * time.Second,
		evictEvery: 300 * time.Millisecond, flapEvery: 500 * time.Millisecond, editEvery: 3 * time.Second,
		rollEvery:   5 * time.Second,
		minDuration: *soakDuration, maxDuration: *soakDuration,
		faults: *soakFaults,
	})
	fmt.Println("soak: " + r.summary())
	r.check(t)
	by := r.disruptionsBy()
	for _, actor := range []string{"scheduler", "descheduler", "direct-evictor", "rollout"} {
		if by[actor] == 0 {
			t.Errorf("no disruption by the %s (disruptions by actor: %s)", actor, sortedMap(by))
		}
	}
}
