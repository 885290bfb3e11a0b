package budget

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Checking a disruption against the live count (live.go): rule 7.

// liveAsk is one question to the live count: may pod go against budget
// key, whose status says status, with planned more victims of the same
// disruption after it?
type liveAsk struct {
	pod *v1.Pod
	// self is the pod's own livePod when the caller has looked it up (nil:
	// looked up here).
	self *livePod
	key  budgetKey
	// count is key's live count when the caller has it (a PDB's entry; nil:
	// looked up here).
	count *liveCount
	// countsPod: pod is healthy for key's kind; when the informer has not
	// counted it yet, it counts itself.
	countsPod bool
	status    statusCount
	planned   int32
}

// statusCount is what a budget's status says of its pods: how many it
// counts healthy (a PUB: available) and how many it desires, and the pods
// it records as disrupted, or (a PUB) unavailable.
type statusCount struct {
	healthy, desired       int32
	disrupted, unavailable map[string]metav1.Time
}

func pdbStatusCount(st *policyv1.PodDisruptionBudgetStatus) statusCount {
	return statusCount{healthy: st.CurrentHealthy, desired: st.DesiredHealthy, disrupted: st.DisruptedPods}
}

func pubStatusCount(pub *PUB) statusCount {
	st := &pub.Status
	return statusCount{healthy: st.CurrentAvailable, desired: st.DesiredAvailable, disrupted: st.DisruptedPods, unavailable: st.UnavailablePods}
}

// liveShortfall checks a disruption of a.pod that the status of a.key
// allows against the live count: it returns a refusal message when the
// covered pods that are healthy now, less those already being disrupted
// (recorded in the status's disrupted or unavailable pods, or held in the
// ledger) and less a.planned, leave nothing above desired. The pod must be
// healthy for the budget's kind (a pod that is not takes nothing from the
// count). The caller holds c.ledger.mu and c.live.mu (read locks are
// enough).
func (c *Cache) liveShortfall(a liveAsk, now time.Time) (string, bool) {
	return c.liveMargin(a, 1, now)
}

// liveWhole checks a not-Ready pod that a PDB's status lets go free under
// IfHealthyBudget (rule 3: the application is not disrupted) against the
// live count: the pod takes no healthy pod, but the covered pods healthy
// now, less those being disrupted and less planned, must still reach
// desired. It returns a refusal message when they do not. The caller holds
// c.ledger.mu and c.live.mu (read locks are enough).
func (c *Cache) liveWhole(a liveAsk, now time.Time) (string, bool) {
	a.self, a.countsPod, a.status.unavailable = nil, false, nil
	return c.liveMargin(a, 0, now)
}

// liveMargin is liveShortfall and liveWhole: the live count, less the busy
// pods, desired and planned, must leave takes pods (1: the pod's
// disruption takes a healthy pod; 0: it takes none).
func (c *Cache) liveMargin(a liveAsk, takes int32, now time.Time) (string, bool) {
	x := c.live
	lc := a.count
	if lc == nil {
		lc = x.counts[a.key]
	}
	var healthy int32
	if lc != nil {
		healthy = lc.n
	}
	busy := c.liveBusy(a.pod, a.key, a.status.disrupted, a.status.unavailable, now)
	// The pod itself is counted among the healthy, never among the busy:
	// taking it costs one healthy pod even when the status records it as
	// disrupted already (a record whose disruption has not happened: an
	// eviction that timed out after the API server recorded it) or the
	// ledger holds it (its own reservation, rechecked before it goes).
	self := a.self
	if self == nil {
		self = x.selfOf(a.pod)
	}
	if a.countsPod && (self == nil || self.uid != a.pod.UID || !self.counts(a.key)) {
		healthy++
	}
	if healthy-busy-a.status.desired-a.planned >= takes {
		return "", false
	}
	msg := liveMessage(a.status.healthy, healthy, busy, a.status.desired, a.planned)
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
		var msg string
		var short bool
		ask := liveAsk{pod: pod, key: e.key, count: e.live, countsPod: true, status: pdbStatusCount(&pdb.Status)}
		switch {
		case healthyForPDB(pod):
			msg, short = c.liveShortfall(ask, now)
		case protectsUnhealthy(pdb):
			msg, short = c.liveWhole(ask, now)
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
			ask := liveAsk{pod: pod, key: budgetKey{KindPUB, pub.Namespace, pub.Name}, countsPod: i < countedPUBs, status: pubStatusCount(pub)}
			if msg, short := c.liveShortfall(ask, now); short {
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
