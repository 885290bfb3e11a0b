package budget

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Checking a disruption against the live count (live.go): rule 7.

// liveShortfall checks a disruption of pod that the status of budget k
// allows against the live count: it returns a refusal message when the
// covered pods that are healthy now, less those already being disrupted
// (recorded in the status's disrupted or unavailable pods, or held in the
// ledger) and less planned, leave nothing above desired. lc is k's count
// when the caller has it (a PDB's entry), nil to look it up; self is the
// pod's own livePod when the caller has looked it up. pod must be healthy
// for k's kind (a pod that is not takes nothing from the count); when the
// informer has not counted it yet, it counts itself. The caller holds
// c.ledger.mu and c.live.mu (read locks are enough).
func (c *Cache) liveShortfall(pod *v1.Pod, self *livePod, k budgetKey, lc *liveCount, countsPod bool, statusHealthy, desired, planned int32, disrupted, unavailable map[string]metav1.Time, now time.Time) (string, bool) {
	return c.liveMargin(pod, self, k, lc, countsPod, 1, statusHealthy, desired, planned, disrupted, unavailable, now)
}

// liveWhole checks a not-Ready pod that a PDB's status lets go free under
// IfHealthyBudget (rule 3: the application is not disrupted) against the
// live count: the pod takes no healthy pod, but the covered pods healthy
// now, less those being disrupted and less planned, must still reach
// desired. It returns a refusal message when they do not. The caller holds
// c.ledger.mu and c.live.mu (read locks are enough).
func (c *Cache) liveWhole(pod *v1.Pod, k budgetKey, lc *liveCount, statusHealthy, desired, planned int32, disrupted map[string]metav1.Time, now time.Time) (string, bool) {
	return c.liveMargin(pod, nil, k, lc, false, 0, statusHealthy, desired, planned, disrupted, nil, now)
}

// liveMargin is liveShortfall and liveWhole: the live count, less the busy
// pods, desired and planned, must leave takes pods (1: the pod's
// disruption takes a healthy pod; 0: it takes none).
func (c *Cache) liveMargin(pod *v1.Pod, self *livePod, k budgetKey, lc *liveCount, countsPod bool, takes, statusHealthy, desired, planned int32, disrupted, unavailable map[string]metav1.Time, now time.Time) (string, bool) {
	x := c.live
	if lc == nil {
		lc = x.counts[k]
	}
	var healthy int32
	if lc != nil {
		healthy = lc.n
	}
	busy := c.liveBusy(pod, k, disrupted, unavailable, now)
	// The pod itself is counted among the healthy, never among the busy:
	// taking it costs one healthy pod even when the status records it as
	// disrupted already (a record whose disruption has not happened: an
	// eviction that timed out after the API server recorded it) or the
	// ledger holds it (its own reservation, rechecked before it goes).
	if self == nil {
		self = x.selfOf(pod)
	}
	if countsPod && (self == nil || self.uid != pod.UID || !self.counts(k)) {
		healthy++
	}
	if healthy-busy-desired-planned >= takes {
		return "", false
	}
	msg := liveMessage(statusHealthy, healthy, busy, desired, planned)
	if takes == 0 {
		msg = unreadyDisrupted + msg
	}
	return msg, true
}

// liveBusy counts the pods other than pod that the live count has healthy
// against k but that are already being disrupted: recorded in the status's
// disrupted or unavailable pods, or held in the ledger. The caller holds
// c.ledger.mu and c.live.mu (read locks are enough).
func (c *Cache) liveBusy(pod *v1.Pod, k budgetKey, disrupted, unavailable map[string]metav1.Time, now time.Time) int32 {
	x := c.live
	var busy int32
	healthyOther := func(name string) bool {
		p := x.pods[podKey{k.namespace, name}]
		return name != pod.Name && p != nil && p.counts(k)
	}
	for name := range disrupted {
		if healthyOther(name) {
			busy++
		}
	}
	for name := range unavailable {
		if _, dup := disrupted[name]; !dup && healthyOther(name) {
			busy++
		}
	}
	bs := c.ledger.budgets[k]
	if bs == nil {
		return busy
	}
	self := podKey{pod.Namespace, pod.Name}
	for _, e := range bs.entries {
		if e.pod == self || !c.ledger.live(e, now) {
			continue
		}
		if _, dup := disrupted[e.pod.name]; dup {
			continue
		}
		if _, dup := unavailable[e.pod.name]; dup {
			continue
		}
		if p := x.pods[e.pod]; p != nil && p.uid == e.podUID && p.counts(k) {
			busy++
		}
	}
	return busy
}

// RecheckLive checks pod against the live count of every budget that
// protects it, just before it is disrupted: the decision may have been made
// a while before (a preemption reserves all its victims at once, then
// disrupts them one by one), and a covered pod may have turned not Ready
// since. The pod's own reservation does not count against it. It returns a
// *DeniedError (StatusBehindPods) when a budget would be left below its
// desired count, and nil when the pod is not healthy, ignores budgets, or
// the live count is not complete yet. The budgets' statuses are not checked
// again here: the API server (an eviction) or the PUB record does that.
func (c *Cache) RecheckLive(pod *v1.Pod, op Operation) error {
	if !c.liveCounted() || ignoresBudgets(pod) {
		return nil
	}
	var pdbBuf [2]*pdbEntry
	var pubBuf [2]*PUB
	pdbs, pubs, countedPUBs := c.coveringInto(pod, pdbBuf[:0], pubBuf[:0])
	c.ledger.mu.RLock()
	defer c.ledger.mu.RUnlock()
	c.live.mu.RLock()
	defer c.live.mu.RUnlock()
	now := c.clock.Now()
	var denials []Denial
	for _, e := range pdbs {
		pdb := e.pdb.Load()
		st := &pdb.Status
		var msg string
		var short bool
		switch {
		case healthyForPDB(pod):
			msg, short = c.liveShortfall(pod, nil, e.key, e.live, true, st.CurrentHealthy, st.DesiredHealthy, 0, st.DisruptedPods, nil, now)
		case protectsUnhealthy(pdb):
			msg, short = c.liveWhole(pod, e.key, e.live, st.CurrentHealthy, st.DesiredHealthy, 0, st.DisruptedPods, now)
		}
		if short {
			denials = append(denials, *deny(e.spends[0], ReasonStatusBehindPods, "%s", msg).denial)
		}
	}
	if healthyForPUB(pod) {
		for i, pub := range pubs {
			if pubExempts(pod, pub, op) {
				continue
			}
			st := &pub.Status
			k := budgetKey{KindPUB, pub.Namespace, pub.Name}
			if msg, short := c.liveShortfall(pod, nil, k, nil, i < countedPUBs, st.CurrentAvailable, st.DesiredAvailable, 0, st.DisruptedPods, st.UnavailablePods, now); short {
				denials = append(denials, *deny(pubRef(pub), ReasonStatusBehindPods, "%s", msg).denial)
			}
		}
	}
	if len(denials) == 0 {
		return nil
	}
	return &DeniedError{Pod: pod, Decision: Decision{Denials: denials}}
}

func liveMessage(statusHealthy, healthy, busy, desired, planned int32) string {
	msg := fmt.Sprintf("the status counts %d healthy, but %s %s healthy now", statusHealthy, Count(int(healthy), "covered pod"), isAre(healthy))
	if busy > 0 {
		msg += fmt.Sprintf(" (%d of them being disrupted)", busy)
	}
	msg += fmt.Sprintf(" and %d %s desired: the budget's controller has not counted a change yet", desired, isAre(desired))
	if planned > 0 {
		msg += fmt.Sprintf("; needs %d (this pod and %d %s of the same disruption)", planned+1, planned, plural(planned, "other"))
	}
	return msg
}

// isAre is the verb for n things: "is" for 1, "are" otherwise.
func isAre(n int32) string {
	if n == 1 {
		return "is"
	}
	return "are"
}
