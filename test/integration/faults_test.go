package integration

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/budgetguard/budgetguard/internal/faults"
)

// The churn's fault mode: every actor's client (the scheduler's, its
// Kruise client, the descheduler's, its Kruise and discovery clients, the
// direct evictor's and the rollouts') goes through one fault injector, at
// rates the seed decides, with discovery failing for the first seconds.
// Budgetguard must refuse or wait under every fault, never decide as if a
// budget did not exist: the auditor's verdict is the same as without
// faults.

// startupDiscoveryErrors is how long discovery fails once the fault mode
// starts, whatever the rates: the scheduler and the descheduler start in
// it.
const startupDiscoveryErrors = 3 * time.Second

// churnInjector is the fault injector of a churn with seed: each kind's
// rate drawn from the seed, within a range that leaves the churn able to
// make progress.
func churnInjector(t *testing.T, seed int64) *faults.Injector {
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(seed), 0xfa17))
	between := func(lo, hi float64) float64 { return lo + rng.Float64()*(hi-lo) }
	rates := map[faults.Kind]float64{
		faults.DiscoveryError:  between(0.1, 0.4),
		faults.WatchDisconnect: between(0.05, 0.2),
		faults.WatchExpired:    between(0.02, 0.1),
		faults.ServerError:     between(0.02, 0.1),
		faults.TimeoutBefore:   between(0.02, 0.08),
		faults.TimeoutAfter:    between(0.02, 0.08),
		faults.TooManyRequests: between(0.02, 0.08),
		faults.Slow:            between(0.05, 0.2),
	}
	inj, err := faults.New(faults.Config{Seed: seed, Rates: rates, MaxDelay: 300 * time.Millisecond, MaxWatchLife: 5 * time.Second, StartupDiscoveryErrors: startupDiscoveryErrors})
	if err != nil {
		t.Fatal(err)
	}
	var desc string
	for _, k := range faults.Kinds() {
		desc += fmt.Sprintf(" %s=%.3f", k, rates[k])
	}
	t.Logf("fault mode: rates%s; discovery fails for the first %s", desc, startupDiscoveryErrors)
	return inj
}

// notSyncedRefusals sums budgetguard's refusals because its budget cache was
// not synced, as its components' metrics count them: the scheduler's
// blocked preemptions and the descheduler's refused evictions.
func notSyncedRefusals(t *testing.T) (scheduler, descheduler float64) {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["reason"] != "CacheNotSynced" {
				continue
			}
			switch f.GetName() {
			case "budgetguard_preemption_blocked_total":
				scheduler += m.GetCounter().GetValue()
			case "budgetguard_evictor_evictions_refused_total":
				descheduler += m.GetCounter().GetValue()
			}
		}
	}
	return scheduler, descheduler
}
