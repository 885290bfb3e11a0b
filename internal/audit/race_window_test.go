package audit

import (
	"testing"
	"time"

	"github.com/budgetguard/budgetguard/internal/testobj"
)

// The history of TestPromiseAllActorsUnderFaults/seed=13 that failed CI
// once (PDB app-11, maxUnavailable 1: 4 pods, 3 desired; here PDB web and
// pods a, b, c, d, and r, d's replacement):
//
//  1. d is evicted and goes; its replacement r turns Ready 15 ms before the
//     descheduler's eviction of b is received (the PDB then counts 4
//     healthy, 1 allowed);
//  2. c turns not Ready (a readiness flap) 4 ms after that eviction is
//     received, before the Eviction API writes b into the PDB's status;
//  3. the informers' lag measured in the run is 30 ms.
//
// At the decision c is not Ready: 2 of 3 without b. The component's view
// at the request is the cluster as it was at some moment of the lag
// before it; the judge looked only at the first moment, when r was not
// Ready yet, found 2 of 3 there too, and charged a violation. In most of
// that window (r Ready, c still Ready) the application was whole, and the
// descheduler's live count refuses b unless it has seen r Ready: a race.
// With r Ready only after the request, the application is short through
// the whole window, and the same eviction is a violation.
func TestRaceWindowIsTheWholeLag(t *testing.T) {
	for _, tc := range []struct {
		name      string
		readyLate bool
		violation bool
		healthy   int32 // b's count at the decision
	}{
		{"replacement ready inside the lag", false, false, 2},
		{"replacement ready after the request", true, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, testOptions())
			pods := h.webPods(3, "a", "b", "c", "d", "e")
			web := func() *testobj.PDBWrapper { return pdb("web", 3) }
			// e's eviction measures the lag: its pod is seen going 30 ms
			// after the answer.
			h.updatePDB(web().Status(5, 3, 2).Obj())
			h.log(logged{ua: uaOther, action: ActionEvict, pod: "e", code: 201})
			h.clock.advance(30 * time.Millisecond)
			h.updatePod(terminating(pods["e"]))
			h.deletePod(pods["e"].Obj())
			h.clock.advance(time.Second)

			// 1. d evicted and gone; r created, not Ready.
			h.updatePDB(web().Status(4, 3, 1).Obj())
			h.log(logged{ua: uaOther, action: ActionEvict, pod: "d", code: 201})
			h.updatePod(terminating(pods["d"]))
			h.deletePod(pods["d"].Obj())
			h.updatePDB(web().Status(3, 3, 0).Obj())
			r := webPod("r").Ready(false)
			h.createPod(r.Obj())
			h.clock.advance(500 * time.Millisecond)
			if !tc.readyLate {
				h.updatePod(r.Ready(true).Obj())
				h.updatePDB(web().Status(4, 3, 1).Obj())
			}
			h.clock.advance(15 * time.Millisecond)

			// 2. b's eviction; c turns not Ready; the Eviction API's write.
			tB := h.log(logged{ua: uaDescheduler, action: ActionEvict, pod: "b", code: 201, took: 20 * time.Millisecond})
			h.clock.advance(3 * time.Millisecond)
			h.updatePod(pods["c"].Ready(false).Obj())
			h.updatePDB(web().Status(4, 3, 0).Disrupted(time.Now(), "b").Obj())
			h.updatePod(terminating(pods["b"]))
			if tc.readyLate {
				h.updatePod(r.Ready(true).Obj())
			}
			res := h.finish()

			var viol []string
			for _, v := range res.Violations {
				viol = append(viol, v.Disruption.Pod)
				if !v.Disruption.Time.Equal(tB) || v.Healthy != tc.healthy || v.Desired != 3 {
					t.Errorf("violation %+v, want b's eviction at %s leaving %d of 3", v, tB, tc.healthy)
				}
			}
			if tc.violation {
				if len(viol) != 1 || viol[0] != "b" {
					t.Errorf("violations by pod %v, want [b]", viol)
				}
				checkRaces(t, nil, res.Races)
				return
			}
			if len(viol) != 0 {
				t.Errorf("violations by pod %v, want none (%+v)", viol, res.Violations)
			}
			checkRaces(t, []string{"b"}, res.Races)
			if res.Windows.InformerLag.Duration < 30*time.Millisecond {
				t.Errorf("informer lag %v, want at least 30ms", res.Windows.InformerLag.Duration)
			}
		})
	}
}
