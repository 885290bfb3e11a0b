package budget

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// TestConcurrentDecidersNeverOverspend runs many goroutines reserving
// different pods of one budget (single reservations and multi-victim plans)
// while status updates and pod events arrive, and checks that exactly the
// budget's allowance is granted. Run it with -race.
func TestConcurrentDecidersNeverOverspend(t *testing.T) {
	const allowed = 7
	for round := 0; round < 20; round++ {
		h := newHarness(t)
		status := pdbStatus{healthy: 100, desired: 100 - allowed, allowed: allowed}
		h.add(webPDB("web", status).Obj())

		var granted atomic.Int32
		var wg sync.WaitGroup
		for g := 0; g < 16; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for i := 0; i < 6; i++ {
					name := fmt.Sprintf("p-%d-%d", g, i)
					if g%2 == 0 {
						d, r := h.c.Reserve(webPod(name).Obj(), OperationEvict)
						if d.Allowed && r != nil {
							granted.Add(1)
						}
						continue
					}
					p := h.c.NewPlan(OperationDelete)
					p.Add(webPod(name + "-x").Obj())
					p.Add(webPod(name + "-y").Obj())
					if r, err := p.Reserve(); err == nil && r != nil {
						granted.Add(int32(len(p.Pods())))
					}
				}
			}(g)
		}
		// Unrelated informer traffic at the same time.
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				h.pdb(webPDB("web", status).Obj())
				h.podEvent(webPod(fmt.Sprintf("other-%d", i)).Obj(), i%2 == 0)
				_ = h.c.Decide(webPod("observer").Obj(), OperationEvict)
			}
		}()
		wg.Wait()
		if got := granted.Load(); got != allowed {
			t.Fatalf("round %d: granted %d disruptions against a budget of %d", round, got, allowed)
		}
		if got := h.c.InFlight(); got != allowed {
			t.Fatalf("round %d: ledger holds %d entries, want %d", round, got, allowed)
		}
	}
}
