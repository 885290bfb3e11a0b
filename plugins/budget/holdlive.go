package budget

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Ending holds by the live count (holdend.go, live.go), and handing the
// live count's changes to the ledger.

// settleLive marks counted (countedLive) the holds of k whose pod went and
// whose going no status has shown, when the live count (live.go) shows it:
// none of their pods is counted healthy now, and k's status counts no more
// healthy pods than the live count has, less those the status records as
// disrupted (which it leaves out of its count). Whatever that status
// counts, it then does not allow more than the pods healthy now allow, and
// a decision is checked against the live count too (rule 7), which the
// pods gone take nothing from. This is what shows the going of a pod whose
// replacement turned Ready before the budget's controller counted the
// pod's going: its count never drops. All of k's waiting holds together or
// none. It does nothing before the live count is complete, or while the
// status is stale (its count may be of another selector's pods). It
// reports whether holds ended that free the budget.
func (c *Cache) settleLive(k budgetKey) bool {
	l := c.ledger
	if !c.liveCounted() || !l.waiting(k) {
		return false
	}
	healthy, disrupted, unavailable, ok := c.statusOf(k)
	if !ok {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	bs := l.budgets[k]
	if bs == nil {
		return false
	}
	now := l.clock.Now()
	x := c.live
	x.mu.RLock()
	var buf [4]*entry
	waiting := buf[:0]
	for _, e := range bs.entries {
		if e.gone.IsZero() || e.counted != notCounted || !l.live(e, now) {
			continue
		}
		if p := x.pods[e.pod]; p != nil && p.uid == e.podUID && p.counts(k) {
			waiting = waiting[:0]
			break
		}
		waiting = append(waiting, e)
	}
	var live int32
	if len(waiting) > 0 {
		if lc := x.counts[k]; lc != nil {
			live = lc.n
		}
		counted := func(name string) bool {
			p := x.pods[podKey{k.namespace, name}]
			return p != nil && p.counts(k)
		}
		for name := range disrupted {
			if counted(name) {
				live--
			}
		}
		for name := range unavailable {
			if _, dup := disrupted[name]; !dup && counted(name) {
				live--
			}
		}
	}
	x.mu.RUnlock()
	if len(waiting) == 0 || healthy > live {
		return false
	}
	for _, e := range waiting {
		e.counted = countedLive
		l.wakeByLocked(l.endsAt(e))
	}
	return l.sweep(k, now) > 0
}

// waiting reports whether k has a live entry whose pod went and whose
// going nothing has counted yet.
func (l *ledger) waiting(k budgetKey) bool {
	if l.n.Load() == 0 {
		return false
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	bs := l.budgets[k]
	if bs == nil {
		return false
	}
	now := l.clock.Now()
	for _, e := range bs.entries {
		if !e.gone.IsZero() && e.counted == notCounted && l.live(e, now) {
			return true
		}
	}
	return false
}

// statusOf returns budget k's healthy count and the pods its status records
// as disrupted or unavailable; ok is false when the Cache does not hold k or
// its status is stale.
func (c *Cache) statusOf(k budgetKey) (healthy int32, disrupted, unavailable map[string]metav1.Time, ok bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	switch k.kind {
	case KindPDB:
		e, found := c.pdbs.get(k.namespace, k.name)
		if !found {
			return 0, nil, nil, false
		}
		pdb := e.pdb.Load()
		st := &pdb.Status
		return st.CurrentHealthy, st.DisruptedPods, nil, st.ObservedGeneration >= pdb.Generation
	case KindPUB:
		pub := c.pubsByName[podKey{k.namespace, k.name}]
		if pub == nil {
			return 0, nil, nil, false
		}
		st := &pub.Status
		return st.CurrentAvailable, st.DisruptedPods, st.UnavailablePods, st.ObservedGeneration >= pub.Generation
	}
	return 0, nil, nil, false
}

// liveChanged tells the ledger of a pod event or of a recount (pod not
// named) after the live count has counted it (podEvent), lets the live
// count end the holds it may (settleLive), and calls the released hooks
// when holds ended that free a budget.
func (c *Cache) liveChanged(pod podKey, uid types.UID, gone bool, changes []liveChange) {
	var buf [4]budgetKey
	keys, released := c.ledger.podEvent(pod, uid, gone, changes, buf[:0])
	for _, k := range keys {
		if c.settleLive(k) {
			released = true
		}
	}
	if released {
		c.ledger.notifyReleased()
	}
}

// settleLiveAll is settleLive for every budget with holds, when the live
// count turns on or was counted again.
func (c *Cache) settleLiveAll() {
	l := c.ledger
	if l.n.Load() == 0 {
		return
	}
	l.mu.RLock()
	keys := make([]budgetKey, 0, len(l.budgets))
	for k := range l.budgets {
		keys = append(keys, k)
	}
	l.mu.RUnlock()
	released := false
	for _, k := range keys {
		if c.settleLive(k) {
			released = true
		}
	}
	if released {
		l.notifyReleased()
	}
}
