package audit

import (
	"testing"
	"time"

	"github.com/budgetguard/budgetguard/internal/testobj"
)

// The history of TestPromiseAllActorsUnderFaults/seed=13 with -gangs that
// failed once on a fresh clone (PUB app-03, 4 available, 3 desired; here
// PUB web and pods a to d). From the API server's audit log:
//
//  1. the descheduler records a's disruption in the PUB's status (its gate,
//     before an eviction), then takes the record back 60 ms later without
//     sending the eviction (its recheck refused): a stays, Ready;
//  2. 1.17 s later it records b's disruption (a status write answered at
//     .079731) and evicts b 4.5 ms later (received .084285, 201): b is the
//     only pod recorded, 3 of 4 stay available, as the PUB's own
//     controller wrote in its next status;
//  3. seconds later a turns not Ready and the descheduler evicts it with
//     no new record (a pod that is not available spends nothing).
//
// The judge took a's first record as the decision of a's later eviction
// (the descheduler's first request of a after that record, within its
// measured record-to-request delay), so a's eviction ranked before b's and
// a was left out of b's count: 2 of 3, a violation, while a was Ready and
// counted by the PUB. A record taken back is no decision: the request after
// it decides anew. With the record left standing (no take-back), the same
// history is a real overspend, and b's eviction is charged.
func TestPUBRecordTakenBackIsNoDecision(t *testing.T) {
	for _, tc := range []struct {
		name      string
		takenBack bool
		violation bool
	}{
		{"record taken back", true, false},
		{"record left standing", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, testOptions())
			web := func() *testobj.PUBWrapper { return pub("web", 3).MatchLabels("app", "web").Status(4, 3, 1) }
			h.createPUB(web().Obj())
			a, b := webPod("a"), webPod("b")
			for _, p := range []*testobj.PodWrapper{a, b, webPod("c"), webPod("d"), webPod("e").Ready(false), webPod("f").Ready(false)} {
				h.createPod(p.Obj())
			}
			// The descheduler's record-to-request delays: e's record is
			// reused by a retry 4 s later (as after a 504); f's eviction
			// follows its record by 2 ms.
			h.logPUBWrite(uaDescheduler, "web", 200, "e")
			h.clock.advance(4 * time.Second)
			h.log(logged{ua: uaDescheduler, action: ActionEvict, pod: "e", code: 201})
			h.updatePod(terminating(webPod("e").Ready(false)))
			h.logPUBWrite(uaDescheduler, "web", 200, "f")
			h.clock.advance(2 * time.Millisecond)
			h.log(logged{ua: uaDescheduler, action: ActionEvict, pod: "f", code: 201})
			h.updatePod(terminating(webPod("f").Ready(false)))
			h.clock.advance(time.Second)

			// 1. a recorded, then (or not) taken back.
			recA := time.Now()
			h.logPUBWrite(uaDescheduler, "web", 200, "a")
			h.updatePUB(web().Status(4, 3, 0).Disrupted(recA, "a").Obj())
			h.clock.advance(60 * time.Millisecond)
			if tc.takenBack {
				h.logPUBWrite(uaDescheduler, "web", 200)
				h.updatePUB(web().Status(4, 3, 1).Obj())
			}
			h.clock.advance(1170 * time.Millisecond)

			// 2. b recorded and evicted.
			recB := time.Now()
			h.logPUBWrite(uaDescheduler, "web", 200, "b")
			disrupted := []string{"b"}
			if !tc.takenBack {
				disrupted = append(disrupted, "a")
			}
			h.updatePUB(web().Status(4, 3, 0).Disrupted(recB, disrupted...).Obj())
			h.clock.advance(4 * time.Millisecond)
			tB := h.log(logged{ua: uaDescheduler, action: ActionEvict, pod: "b", code: 201, took: 25 * time.Millisecond})
			h.updatePod(terminating(b))
			h.clock.advance(2 * time.Second)

			// 3. a turns not Ready and is evicted with no new record.
			h.updatePod(a.Ready(false).Obj())
			h.log(logged{ua: uaDescheduler, action: ActionEvict, pod: "a", code: 201})
			h.updatePod(terminating(a))

			res := h.finish()
			var viol []string
			for _, v := range res.Violations {
				viol = append(viol, v.Disruption.Pod)
				if v.Disruption.Pod == "b" && (v.Healthy != 2 || v.Desired != 3 || !v.Disruption.Time.Equal(tB)) {
					t.Errorf("violation %+v, want b's eviction at %s leaving 2 of 3", v, tB)
				}
			}
			want := []string(nil)
			if tc.violation {
				want = []string{"b"}
			}
			if len(viol) != len(want) || (len(want) > 0 && viol[0] != want[0]) {
				t.Errorf("violations by pod %v, want %v (%+v)", viol, want, res.Violations)
			}
			checkRaces(t, nil, res.Races)
		})
	}
}
