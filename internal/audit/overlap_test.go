package audit

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/budgetguard/budgetguard/internal/testobj"
)

// uaOther is an actor the options do not name (a kubectl drain): its
// disruptions are ComponentOther.
const uaOther = "sandbox-direct-evictor"

// Two evictions of pods under one PDB overlap: the API server receives a's
// first and b's 6 ms later, both read the PDB with 1 disruption allowed, b's
// decrement wins, and a's, which conflicted, is retried after
// EvictionsRetry's 500 ms on a fresh status, which by then counts the
// replacement of b. The PDB's status writes are the Eviction API's
// decisions, and they order the two: b's first, with 3 healthy left, then
// a's, with 3 healthy left. Ordered by the time the requests were
// received, a would be counted first and b would seem to leave 2.
// (Recorded in TestPromiseAllActors, seed 5150, PDB app-22: ll4p2 by the
// direct evictor received 46.628085, answered 47.183143, terminating seen
// 47.182313; vdgbw by the descheduler received 46.634429, answered
// 46.664985, terminating seen 46.662870; the replacement g5l9r Ready seen
// 46.705498.) The same history with a's write first is an overspend, and
// is charged.
func TestOverlappingEvictionsAreJudgedInTheOrderOfTheirStatusWrites(t *testing.T) {
	for _, aFirst := range []bool{false, true} {
		t.Run(map[bool]string{false: "as recorded", true: "a's write first"}[aFirst], func(t *testing.T) {
			h := newHarness(t, testOptions())
			web := pdb("web", 3).Status(4, 3, 1)
			h.createPDB(web.Obj())
			a, b, e := webPod("a"), webPod("b"), webPod("e").Ready(false)
			for _, p := range []*testobj.PodWrapper{a, b, webPod("c"), webPod("d")} {
				h.createPod(p.Obj())
			}
			// Every pod is there well before the requests, so that the
			// informers' lag before them holds no creation.
			h.clock.advance(time.Second)
			tA := h.log(logged{ua: uaOther, action: ActionEvict, pod: "a", code: 201, took: 60 * time.Millisecond})
			first, second := b, a
			if aFirst {
				first, second = a, b
				// The overspend: a's decision is written, and seen, before
				// b's eviction is received, beyond the informers' lag: the
				// descheduler could have known.
				h.updatePDB(web.Status(3, 3, 0).Disrupted(time.Now(), "a").Obj())
				h.clock.advance(100 * time.Millisecond)
			}
			tB := h.log(logged{ua: uaDescheduler, action: ActionEvict, pod: "b", code: 201, took: 5 * time.Millisecond})
			if aFirst {
				// b's eviction is admitted at once on the status that
				// holds a.
				h.updatePDB(web.Status(3, 3, 0).Disrupted(time.Now(), "a", "b").Obj())
			} else {
				h.updatePDB(web.Status(3, 3, 0).Disrupted(time.Now(), first.Obj().Name).Obj()) // the first decision
			}
			h.updatePod(terminating(first))
			h.deletePod(first.Obj())
			h.createPod(e.Obj()) // the ReplicaSet replaces it
			h.createPod(runningPod("x").Label("app", "other").Obj())
			h.updatePod(e.Ready(true).Obj())
			h.updatePDB(web.Status(4, 3, 1).Disrupted(time.Now()).Obj())
			h.updatePDB(web.Status(3, 3, 0).Disrupted(time.Now(), second.Obj().Name).Obj()) // the second, retried
			h.updatePod(terminating(second))
			h.deletePod(second.Obj())
			res := h.finish()

			webRef := []BudgetRef{ref(KindPDB, "web")}
			dA := Disruption{Time: tA, Component: ComponentOther, UserAgent: uaOther, Action: ActionEvict, Namespace: testNS, Pod: "a", Budgets: webRef, WasHealthy: true}
			dB := Disruption{Time: tB, Component: ComponentDescheduler, UserAgent: uaDescheduler, Action: ActionEvict, Namespace: testNS, Pod: "b", Budgets: webRef, WasHealthy: true}
			if !aFirst {
				checkNoViolation(t, res, []Disruption{dA, dB}, []BudgetSummary{{Budget: ref(KindPDB, "web"), Desired: 3, Met: true, LowestHealthy: 3, Disruptions: 2}})
				return
			}
			// a's write came first, so b, decided second, left c and d.
			checkViolations(t, []Violation{{Budget: ref(KindPDB, "web"), Disruption: dB, Healthy: 2, Desired: 3}}, res.Violations)
		})
	}
}

// Two disruptions in flight at once that together leave the budget short
// are still found: the one decided second is the violation, whichever pod
// went first (here a delete received first, and an eviction with no
// status write seen, judged when it was received).
func TestOverlappingDisruptionsThatLeaveTheBudgetShort(t *testing.T) {
	h := newHarness(t, testOptions())
	pods := h.webPods(3, "a", "b", "c", "d")
	a, b := pods["a"], pods["b"]
	h.log(logged{ua: uaScheduler, action: ActionDelete, pod: "a", code: 200, took: 60 * time.Millisecond})
	tB := h.log(logged{ua: uaOther, action: ActionEvict, pod: "b", code: 201, took: 5 * time.Millisecond})
	h.updatePod(terminating(b))
	h.updatePod(terminating(a))
	res := h.finish()

	web := []BudgetRef{ref(KindPDB, "web")}
	checkViolations(t, []Violation{{Budget: ref(KindPDB, "web"),
		Disruption: Disruption{Time: tB, Component: ComponentOther, UserAgent: uaOther, Action: ActionEvict, Namespace: testNS, Pod: "b", Budgets: web, WasHealthy: true},
		Healthy:    2, Desired: 3}}, res.Violations)
}

// A delete is decided before the API server receives it. A covered pod
// that turns not Ready while the delete is under way (after it was
// received, before the pod is seen terminating) does not make it a
// violation: when it was sent, it left enough. (Recorded in
// TestPromiseAllActors, seed 5150, PUB app-01: the scheduler's delete of
// ptvt8 received 06.138964, app-01-shmrx seen not Ready 06.150943,
// ptvt8 seen terminating 06.172218, answered 06.172180.)
func TestPodTurningUnreadyWhileADeleteIsUnderWay(t *testing.T) {
	h := newHarness(t, testOptions())
	pods := h.webPods(2, "a", "b", "c")
	a, b := pods["a"], pods["b"]
	h.log(logged{ua: uaScheduler, action: ActionDelete, pod: "a", code: 200, took: 20 * time.Millisecond})
	h.updatePod(b.Ready(false).Obj())
	h.updatePod(terminating(a))
	res := h.finish()
	if len(res.Violations) != 0 {
		t.Errorf("want no violation, got %+v", res.Violations)
	}
}

// An eviction answered 504 (its client went away, or it timed out) that the
// API server carried out all the same is a disruption, judged as any other:
// its pod is seen terminating while it was under way or just after, and no
// accepted request explains it. Before, it counted as a refusal and its
// disruption was never judged. (Seen in TestPromiseAllActors: three
// concurrent evictions of one pod by the scheduler, all logged 504
// "context canceled", and the pod deleted with no 2xx request in the log.)
// A 504 whose pod stays, or whose pod another accepted request took, is a
// refusal.
func TestRequestAnsweredWithAServerErrorButCarriedOut(t *testing.T) {
	h := newHarness(t, testOptions())
	pods := h.webPods(3, "a", "b", "c")
	a, c := pods["a"], pods["c"]
	tA := h.log(logged{ua: uaScheduler, action: ActionEvict, pod: "a", code: 504, took: 5 * time.Millisecond})
	h.updatePod(terminating(a)) // after the answer: the server went on
	h.log(logged{ua: uaScheduler, action: ActionEvict, pod: "b", code: 504, took: 5 * time.Millisecond})
	h.log(logged{ua: uaOther, action: ActionEvict, pod: "c", code: 504, took: 5 * time.Millisecond})
	tC := h.log(logged{ua: uaOther, action: ActionEvict, pod: "c", code: 201, took: 5 * time.Millisecond})
	h.updatePod(terminating(c))
	res := h.finish()

	web := []BudgetRef{ref(KindPDB, "web")}
	wantViolations := []Violation{{
		Budget:     ref(KindPDB, "web"),
		Disruption: Disruption{Time: tA, Component: ComponentScheduler, UserAgent: uaScheduler, Action: ActionEvict, Namespace: testNS, Pod: "a", Budgets: web, WasHealthy: true},
		Healthy:    2, Desired: 3,
	}, {
		Budget:     ref(KindPDB, "web"),
		Disruption: Disruption{Time: tC, Component: ComponentOther, UserAgent: uaOther, Action: ActionEvict, Namespace: testNS, Pod: "c", Budgets: web, WasHealthy: true},
		Healthy:    1, Desired: 3,
	}}
	if diff := cmp.Diff(wantViolations, res.Violations); diff != "" {
		t.Errorf("violations (-want,+got):\n%s", diff)
	}
	var refused []string
	for _, f := range res.Refusals {
		refused = append(refused, f.Pod)
	}
	if diff := cmp.Diff([]string{"b", "c"}, refused); diff != "" {
		t.Errorf("refusals (-want,+got):\n%s", diff)
	}
}

// A PUB disruption is decided when its record is written into the PUB's
// status (no API server checks a PUB; OpenKruise's webhook records at
// admission, and so does budgetguard before it sends the request), when
// the component that sends the request wrote the record for it, and the
// record still stands (here two earlier records of the descheduler, each
// followed by its request 3 ms later, are its other delays). A covered pod
// that turns not Ready just after the record still counts against the
// disruption, as it is then; but the disruption was right on what the
// descheduler could know when it decided, and is a race, counted and
// shown, not a violation. (Recorded in TestPromiseAllActorsUnderFaults,
// seed 13, PUB app-02: the descheduler's record of hj2hx seen at 43.877,
// lthf9 seen not Ready at 43.948, the eviction, slowed by an injected
// delay, received at 43.958.) Without a record that qualifies (none, one
// written by another component, or one the PUB's controller no longer
// honoured when the request came, 20 s on), the same history is a
// violation. A request 50 ms after the record, longer than the
// descheduler's other delays (3 ms), is still decided at the record: how
// long a component's client takes is no new decision.
func TestPUBDisruptionDecidedAtItsRecord(t *testing.T) {
	for _, tc := range []struct {
		name     string
		recorder string // "": no record
		late     time.Duration
		race     bool
	}{
		{"recorded by the descheduler", uaDescheduler, 0, true},
		{"unrecorded", "", 0, false},
		{"recorded by the scheduler", uaScheduler, 0, false},
		{"recorded, request later than the others", uaDescheduler, 50 * time.Millisecond, true},
		{"recorded, request after the record's life", uaDescheduler, 21 * time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, testOptions())
			web := pub("web", 2).MatchLabels("app", "web")
			h.createPUB(web.Obj())
			a, b := webPod("a"), webPod("b")
			for _, p := range []*testobj.PodWrapper{a, b, webPod("c"), webPod("d"), webPod("e").Ready(false)} {
				h.createPod(p.Obj())
			}
			// Two earlier disruptions of unready pods measure the
			// descheduler's record-to-request delay: 3 ms.
			for _, n := range []string{"d", "e"} {
				h.logPUBWrite(uaDescheduler, "web", 200, n)
				h.clock.advance(2 * time.Millisecond)
				h.log(logged{ua: uaDescheduler, action: ActionEvict, pod: n, code: 201})
				if n == "d" {
					h.updatePod(terminating(webPod("d"))) // the informers' lag: under 1 ms
				}
			}
			if tc.recorder != "" {
				h.logPUBWrite(tc.recorder, "web", 200, "a")
				h.updatePUB(web.Disrupted(time.Now(), "a").Obj())
			}
			h.updatePod(b.Ready(false).Obj())
			h.clock.advance(tc.late)
			h.log(logged{ua: uaDescheduler, action: ActionEvict, pod: "a", code: 201, took: 5 * time.Millisecond})
			h.updatePod(terminating(a))
			res := h.finish()
			var viol []string
			for _, v := range res.Violations {
				viol = append(viol, v.Disruption.Pod)
			}
			if tc.race {
				checkRaces(t, []string{"a"}, res.Races)
				if len(viol) != 0 {
					t.Errorf("want no violation, got %+v", res.Violations)
				}
				return
			}
			checkRaces(t, nil, res.Races)
			if diff := cmp.Diff([]string{"a"}, viol); diff != "" {
				t.Errorf("violations by pod (-want,+got):\n%s", diff)
			}
		})
	}
}

// A covered pod that turns not Ready a moment before an eviction is
// received, inside the informers' lag measured in the run (here the pod
// of an earlier disruption was seen going 5 ms after its answer), may not
// have reached the component when it decided: the eviction is a race,
// counted and shown. A pod that turned not Ready well before the request
// (50 ms, beyond the lag) was in every view: the same eviction is then a
// violation. Before, a fixed 10 ms forgave both the first case and any
// overspend that fitted in it, uncounted.
func TestPodTurningUnreadyJustBeforeARequest(t *testing.T) {
	for _, tc := range []struct {
		name      string
		before    time.Duration
		violation bool
	}{{"inside the lag", 0, false}, {"50ms", 50 * time.Millisecond, true}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, testOptions())
			pods := h.webPods(3, "a", "b", "c", "d", "e")
			// e's eviction measures the lag: its pod is seen going 5 ms
			// after the answer.
			h.log(logged{ua: uaOther, action: ActionEvict, pod: "e", code: 201})
			h.clock.advance(5 * time.Millisecond)
			h.updatePod(terminating(pods["e"]))
			h.clock.advance(time.Second)
			h.updatePod(pods["b"].Ready(false).Obj())
			h.clock.advance(tc.before)
			h.log(logged{ua: uaDescheduler, action: ActionEvict, pod: "a", code: 201, took: 5 * time.Millisecond})
			h.updatePod(terminating(pods["a"]))
			res := h.finish()
			if got := len(res.Violations) == 1; got != tc.violation {
				t.Errorf("violations %+v, want a violation: %v", res.Violations, tc.violation)
			}
			if tc.violation {
				checkRaces(t, nil, res.Races)
			} else {
				checkRaces(t, []string{"a"}, res.Races)
			}
			if res.Windows.LagSamples != 2 || res.Windows.InformerLag.Duration < 5*time.Millisecond {
				t.Errorf("windows %+v, want 2 samples and a lag of at least 5ms", res.Windows)
			}
		})
	}
}

// Two deletes of pods with no grace period overlap: the first is carried
// out and its pod is gone before the second takes effect. The pod that went
// first still counts as disrupted when the second is judged, though it has
// left the informers' view: together they leave 2 of 3. Before, a pod seen
// gone was forgotten as disrupted, so the second delete was judged on a
// snapshot that still held it healthy, and no violation was found. (CI:
// TestScenarioPreemptionUnderPDB, upstream run: DefaultPreemption deleted
// two web pods at once, the report showed PDB web at 2/3 and no
// violation.)
func TestOverlappingDeletesOfPodsThatGoAtOnce(t *testing.T) {
	h := newHarness(t, testOptions())
	pods := h.webPods(3, "a", "b", "c", "d")
	a, b := pods["a"], pods["b"]
	h.log(logged{ua: uaScheduler, action: ActionDelete, pod: "a", code: 200, took: 2 * time.Millisecond})
	tB := h.log(logged{ua: uaScheduler, action: ActionDelete, pod: "b", code: 200, took: 60 * time.Millisecond})
	h.deletePod(a.Obj())
	h.deletePod(b.Obj())
	res := h.finish()

	checkViolations(t, []Violation{webDeleteViolation(tB, "b", 2, 3)}, res.Violations)
}
