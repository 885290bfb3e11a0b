package audit

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"

	"github.com/budgetguard/budgetguard/internal/testobj"
)

// The six histories of an overspend that the judge passed before it
// decided on the API server's own record (each failed on the judge of
// commit f6852f9: 0 violations, or the violation charged to another
// actor). In each, one of budgetguard's components starts more
// disruptions than the budget allows.

// History 1, readiness lag: three pods turn not Ready 9, 8 and 7 ms before
// the scheduler's delete of a is received; the delete leaves 1 of 3, and
// the PDB's status written afterwards says so. No API server checks a
// delete: the decision was the scheduler's, on its own live count, and the
// informers' lag in this run is under a millisecond.
func TestHistoryReadinessLag(t *testing.T) {
	h := newHarness(t, testOptions())
	pods := h.webPods(3, "a", "b", "c", "d", "e")
	h.clock.advance(time.Second)
	for _, n := range []string{"b", "c", "d"} {
		h.updatePod(pods[n].Ready(false).Obj())
	}
	h.clock.advance(6 * time.Millisecond)
	tA := h.log(logged{ua: uaScheduler, action: ActionDelete, pod: "a", code: 200})
	h.updatePod(terminating(pods["a"]))
	h.updatePDB(pdb("web", 3).Status(1, 3, 0).Obj())
	res := h.finish()

	checkViolations(t, []Violation{webDeleteViolation(tA, "a", 1, 3)}, res.Violations)
	checkRaces(t, nil, res.Races)
}

// History 2, a PUB record 4 s old: the descheduler records a in PUB web's
// status, its eviction is answered 504 and not carried out, b turns not
// Ready 0.5 s later, and the retry 4 s after the record evicts a, leaving 1
// of 2. The record was written for the first request, not the retry: the
// retry is judged when the API server received it, and charged. With one
// request 4 s after the record, the record still stood (OpenKruise's
// controller honours it for 20 s, and its webhook lets a recorded pod go
// unchecked): the eviction was decided at the record, on a whole budget,
// and b's change after it makes a race. The same single request 21 s
// after the record, when the record no longer stood, is charged.
func TestHistoryPUBRecordFourSecondsOld(t *testing.T) {
	for _, tc := range []struct {
		name  string
		retry bool
		after time.Duration
		race  bool
	}{
		{"retry after a 504", true, 4 * time.Second, false},
		{"one request", false, 4 * time.Second, true},
		{"one request after the record's life", false, 21 * time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, testOptions())
			web := pub("web", 2).MatchLabels("app", "web")
			h.createPUB(web.Obj())
			a, b := webPod("a"), webPod("b")
			for _, p := range []*testobj.PodWrapper{a, b, webPod("c")} {
				h.createPod(p.Obj())
			}
			h.logPUBWrite(uaDescheduler, "web", 200, "a")
			h.updatePUB(web.Disrupted(time.Now(), "a").Obj())
			if tc.retry {
				h.log(logged{ua: uaDescheduler, action: ActionEvict, pod: "a", code: 504, took: 30 * time.Second})
			}
			h.clock.advance(500 * time.Millisecond)
			h.updatePod(b.Ready(false).Obj())
			h.clock.advance(tc.after - 500*time.Millisecond)
			tA := h.log(logged{ua: uaDescheduler, action: ActionEvict, pod: "a", code: 201})
			h.updatePod(terminating(a))
			res := h.finish()

			if tc.race {
				if len(res.Violations) != 0 {
					t.Errorf("want no violation, got %+v", res.Violations)
				}
				checkRaces(t, []string{"a"}, res.Races)
				return
			}
			if len(res.Violations) != 1 || !res.Violations[0].Disruption.Time.Equal(tA) || res.Violations[0].Disruption.Component != ComponentDescheduler ||
				res.Violations[0].Healthy != 1 || res.Violations[0].Desired != 2 {
				t.Errorf("want the descheduler's eviction of a charged, 1 of 2 left; got %+v", res.Violations)
			}
			checkRaces(t, nil, res.Races)
		})
	}
}

// History 3, a flap during the request: the scheduler deletes a while 3
// pods are Ready and the budget needs 3; d is Ready for 1 ms after the
// delete is received. Nothing after the API server received a delete
// counts for it.
func TestHistoryFlapDuringTheRequest(t *testing.T) {
	h := newHarness(t, testOptions())
	pods := h.webPods(3, "a", "b", "c")
	d := webPod("d").Ready(false)
	h.createPod(d.Obj())
	tA := h.log(logged{ua: uaScheduler, action: ActionDelete, pod: "a", code: 200, took: 20 * time.Millisecond})
	h.updatePod(d.Ready(true).Obj())
	h.updatePod(d.Ready(false).Obj())
	h.updatePod(terminating(pods["a"]))
	res := h.finish()

	checkViolations(t, []Violation{webDeleteViolation(tA, "a", 2, 3)}, res.Violations)
}

// History 4, whole again before the answer: the deleted pod is seen going 1
// ms after the request, leaving 2 of 3; a replacement turns Ready 200 ms
// later, before the slow answer at 300 ms.
func TestHistoryWholeAgainBeforeTheAnswer(t *testing.T) {
	h := newHarness(t, testOptions())
	pods := h.webPods(3, "a", "b", "c")
	tA := h.log(logged{ua: uaScheduler, action: ActionDelete, pod: "a", code: 200, took: 300 * time.Millisecond})
	h.updatePod(terminating(pods["a"]))
	h.clock.advance(200 * time.Millisecond)
	h.createPod(webPod("e").Obj())
	res := h.finish()

	checkViolations(t, []Violation{webDeleteViolation(tA, "a", 2, 3)}, res.Violations)
}

// History 5, charged to the other actor: the direct evictor's eviction of a
// is admitted (the PDB's status shows 0 allowed and a in disruptedPods);
// 20 ms later the scheduler deletes b, and b's pod goes first. The Eviction
// API decided a first, at its status write: b is the overspend.
func TestHistoryChargedToTheOtherActor(t *testing.T) {
	h := newHarness(t, testOptions())
	pods := h.webPods(3, "a", "b", "c", "d")
	h.log(logged{ua: uaOther, action: ActionEvict, pod: "a", code: 201, took: 60 * time.Millisecond})
	h.updatePDB(pdb("web", 3).Status(3, 3, 0).Disrupted(time.Now(), "a").Obj())
	h.clock.advance(20 * time.Millisecond)
	tB := h.log(logged{ua: uaScheduler, action: ActionDelete, pod: "b", code: 200, took: 5 * time.Millisecond})
	h.updatePod(terminating(pods["b"]))
	h.updatePod(terminating(pods["a"]))
	res := h.finish()

	checkViolations(t, []Violation{webDeleteViolation(tB, "b", 2, 3)}, res.Violations)
}

// History 6, two victims of one component: the scheduler deletes a and b
// with 1 allowed, and a turns not Ready during its request (so its own
// delete took nothing healthy), b's pod going first. The second delete is
// judged with the first already decided, whatever a looked like after.
func TestHistoryTwoVictimsOfOneComponent(t *testing.T) {
	h := newHarness(t, testOptions())
	pods := h.webPods(3, "a", "b", "c", "d")
	a := pods["a"]
	h.log(logged{ua: uaScheduler, action: ActionDelete, pod: "a", code: 200, took: 20 * time.Millisecond})
	tB := h.log(logged{ua: uaScheduler, action: ActionDelete, pod: "b", code: 200, took: 20 * time.Millisecond})
	h.updatePod(terminating(pods["b"]))
	h.updatePod(a.Ready(false).Obj())
	h.updatePod(terminating(a))
	res := h.finish()

	checkViolations(t, []Violation{webDeleteViolation(tB, "b", 2, 3)}, res.Violations)
}

// A disruption that OpenKruise's webhook lets go free is never charged to
// the PUB: the pod annotated pub.kruise.io/no-protect, an operation the PUB
// does not protect (spec.protectOperations), a pod that
// spec.ignoredPodSelector selects, and a pod with an
// unavailable-pod.kruise.io/ label, which the PUB never counts available.
// The same disruption without the exemption is charged.
func TestPUBExemptionsAreNeverCharged(t *testing.T) {
	type spec = map[string]any
	for _, tc := range []struct {
		name    string
		pod     *testobj.PodWrapper
		action  Action
		extra   func(map[string]any)
		charged bool
	}{
		{"protected", webPod("a"), ActionDelete, nil, true},
		{"no-protect", webPod("a").Annotation("pub.kruise.io/no-protect", "true"), ActionDelete, nil, false},
		{"delete not protected", webPod("a"), ActionDelete, func(o map[string]any) { o["spec"].(spec)["protectOperations"] = []any{"EVICT"} }, false},
		{"evict protected", webPod("a"), ActionEvict, func(o map[string]any) { o["spec"].(spec)["protectOperations"] = []any{"EVICT"} }, true},
		{"ignored pod", webPod("a").Label("track", "canary"), ActionEvict, func(o map[string]any) {
			o["spec"].(spec)["ignoredPodSelector"] = spec{"matchLabels": spec{"track": "canary"}}
		}, false},
		{"not ignored", webPod("a").Label("track", "stable"), ActionEvict, func(o map[string]any) {
			o["spec"].(spec)["ignoredPodSelector"] = spec{"matchLabels": spec{"track": "canary"}}
		}, true},
		{"unavailable label", webPod("a").Label("unavailable-pod.kruise.io/upgrade", "true"), ActionEvict, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, testOptions())
			var extra []func(map[string]any)
			if tc.extra != nil {
				extra = append(extra, tc.extra)
			}
			h.createPUB(pub("web", 2).MatchLabels("app", "web").Obj(), extra...)
			h.createPod(tc.pod.Obj())
			h.createPod(webPod("b").Obj())
			h.createPod(webPod("c").Obj())
			h.updatePod(webPod("b").Ready(false).Obj())
			h.clock.advance(time.Second)
			h.log(logged{ua: uaScheduler, action: tc.action, pod: "a", code: 200})
			h.updatePod(terminating(tc.pod))
			res := h.finish()
			if got := len(res.Violations) + len(res.Races); (got == 1) != tc.charged || got > 1 {
				t.Errorf("charged %v, want %v: violations %+v, races %+v", got, tc.charged, res.Violations, res.Races)
			}
		})
	}
}

// A disruption by budgetguard that the judge finds clean, after which the
// budget's own status counts fewer healthy pods than it desires with no
// other pod of the budget going in between, is a disagreement: the judge
// counted b healthy, the disruption controller did not. When b is seen
// turning not Ready between the decision and the status, the status is
// explained.
func TestStatusShortAfterACleanDisruptionIsADisagreement(t *testing.T) {
	for _, explained := range []bool{false, true} {
		t.Run(map[bool]string{false: "unexplained", true: "another pod went"}[explained], func(t *testing.T) {
			h := newHarness(t, testOptions())
			pods := h.webPods(3, "a", "b", "c", "d")
			h.log(logged{ua: uaScheduler, action: ActionDelete, pod: "a", code: 200})
			h.updatePod(terminating(pods["a"]))
			if explained {
				h.updatePod(pods["b"].Ready(false).Obj())
			}
			h.updatePDB(pdb("web", 3).Status(2, 3, 0).Obj())
			res := h.finish()
			if len(res.Violations) != 0 || len(res.Races) != 0 {
				t.Errorf("want a clean disruption, got violations %+v, races %+v", res.Violations, res.Races)
			}
			if got := len(res.Disagreements); got != map[bool]int{false: 1, true: 0}[explained] {
				t.Errorf("disagreements %+v", res.Disagreements)
			} else if got == 1 && (res.Disagreements[0].StatusHealthy != 2 || res.Disagreements[0].Healthy != 3 || res.Disagreements[0].Disruption.Pod != "a") {
				t.Errorf("disagreement %+v, want a's delete, judged 3 of 3, status 2 of 3", res.Disagreements[0])
			}
		})
	}
}

// An eviction answered 504 whose pod the API server deleted all the same
// is attributed by the pod's own deletion write, however late the
// informers show it (5 s here; a fixed 2 s cut-off counted it a refusal
// before), unless another accepted request of the pod, or a collection
// delete in its namespace, came in between.
func TestServerErrorAttributedByThePodsDeletionWithNoCutOff(t *testing.T) {
	for _, tc := range []struct {
		name    string
		between func(h *harness)
		carried bool
	}{
		{"nothing between", func(*harness) {}, true},
		{"a delete between", func(h *harness) { h.log(logged{ua: uaRunner, action: ActionDelete, pod: "a", code: 200}) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, testOptions())
			pods := h.webPods(3, "a", "b", "c")
			h.log(logged{ua: uaDescheduler, action: ActionEvict, pod: "a", code: 504, took: time.Second})
			h.clock.advance(5 * time.Second)
			tc.between(h)
			h.updatePod(terminating(pods["a"]))
			res := h.finish()
			if carried := len(res.Disruptions) == 1 && len(res.Violations) == 1; carried != tc.carried {
				t.Errorf("carried out: %v, want %v: disruptions %+v, refusals %+v, violations %+v", carried, tc.carried, res.Disruptions, res.Refusals, res.Violations)
			}
		})
	}
}

// A running pod that is not Ready is protected by its PDB's unhealthy-pod
// eviction policy: under IfHealthyBudget (also when unset) it may go only
// while the budget is whole without it (KEP-3017; the Eviction API answers
// 429 otherwise), under AlwaysAllow at any time. A pod not yet running
// (Pending) or already terminating is the Eviction API's to let go without
// the PDB. Each case: PDB web requires desired of a, b, c; b turned not
// Ready a second before; the scheduler deletes a, made not Ready too, or
// Pending.
func TestUnhealthyPodEvictionPolicyIsCharged(t *testing.T) {
	ifHealthy, always := policyv1.IfHealthyBudget, policyv1.AlwaysAllow
	for _, tc := range []struct {
		name    string
		policy  *policyv1.UnhealthyPodEvictionPolicyType
		desired int32
		pending bool
		charged bool
	}{
		{name: "policy unset, budget short", desired: 2, charged: true},
		{name: "IfHealthyBudget, budget short", policy: &ifHealthy, desired: 2, charged: true},
		{name: "IfHealthyBudget, budget whole", policy: &ifHealthy, desired: 1},
		{name: "AlwaysAllow, budget short", policy: &always, desired: 2},
		{name: "Pending pod, budget short", desired: 2, pending: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, testOptions())
			web := pdb("web", tc.desired)
			if tc.policy != nil {
				web = web.UnhealthyPodEvictionPolicy(*tc.policy)
			}
			h.createPDB(web.Obj())
			a, b := webPod("a"), webPod("b")
			for _, p := range []*testobj.PodWrapper{a, b, webPod("c")} {
				h.createPod(p.Obj())
			}
			h.updatePod(b.Ready(false).Obj())
			a = a.Ready(false)
			if tc.pending {
				a = a.Phase(corev1.PodPending)
			}
			h.updatePod(a.Obj())
			h.clock.advance(time.Second)
			tA := h.log(logged{ua: uaScheduler, action: ActionDelete, pod: "a", code: 200})
			h.updatePod(terminating(a))
			res := h.finish()

			if tc.charged {
				v := webDeleteViolation(tA, "a", 1, 2)
				v.Disruption.WasHealthy = false
				checkViolations(t, []Violation{v}, res.Violations)
			} else if len(res.Violations) != 0 {
				t.Errorf("want no violation, got %+v", res.Violations)
			}
			checkRaces(t, nil, res.Races)
		})
	}
}
