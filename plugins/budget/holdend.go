package budget

import (
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// How a hold ends (docs/design.md, The ledger).
//
// A hold whose pod went (terminating, deleted, or replaced under its name)
// ends SettleDelay after the pod went, once something shows that the
// budget's status no longer counts the pod healthy, or can no longer
// overstate what is healthy because of it:
//
//   - the pod was not in the count its decision read (countedOutside), and
//     a status was received after it went;
//   - the latest status's count is below the count the pod's decision read
//     by the pod and each of its peers that went (countedDrop, countLocked),
//     whether that status came before or after the pod's event; a count
//     marked so is weighed again when another covered pod is seen to stop
//     counting healthy while the hold lasts (podEvent);
//   - the live count no longer has the pod, and the status counts no more
//     healthy pods than the live count has (countedLive, settleLive).
//
// Nothing else ends it before MaxHold. A status received after the pod went
// is not enough: one computed just before the pod went can arrive after
// it, and the status that counts its going can come much later or never
// (the disruption controller writes nothing when its count did not
// change: a replacement that turned Ready as fast).

// countedBy is what showed a pod's going.
type countedBy uint8

const (
	notCounted countedBy = iota
	// countedOutside: the pod was not in the count its decision read (not
	// Ready, or recorded as disrupted), so its going takes nothing from a
	// status's count, and a status was received after it went.
	countedOutside
	// countedDrop: a status's count shows the going (countLocked).
	countedDrop
	// countedLive: the live count shows it (settleLive).
	countedLive
)

// endsAt is when e stops holding its budget, as far as the ledger knows
// now: ReservationTTL after it was made while its pod is still there,
// SettleDelay after the pod went once its going is counted, MaxHold after
// it was made in any case. Caller holds mu.
func (l *ledger) endsAt(e *entry) time.Time {
	end := e.created.Add(l.opts.MaxHold)
	var other time.Time
	switch {
	case l.opts.DryRun:
		return end
	case e.gone.IsZero():
		other = e.created.Add(l.opts.ReservationTTL)
	case e.counted != notCounted:
		other = e.gone.Add(l.opts.SettleDelay)
	default:
		return end
	}
	if other.Before(end) {
		return other
	}
	return end
}

// live reports whether e still holds its budget at now: now is before
// endsAt(e), computed as decisions ask it, with no time built. Caller holds
// mu.
func (l *ledger) live(e *entry, now time.Time) bool {
	age := now.Sub(e.created)
	switch {
	case age >= l.opts.MaxHold:
		return false
	case l.opts.DryRun:
		return true
	case e.gone.IsZero():
		return age < l.opts.ReservationTTL
	case e.counted == notCounted:
		return true
	}
	return now.Sub(e.gone) < l.opts.SettleDelay
}

// countLocked marks counted (countedDrop) each live entry of bs whose pod
// went unrecorded and was in the count its decision read, when the latest
// status (bs.status) shows its going. A status names no healthy pod; what
// shows the going is its count: lower than the count the decision read
// (entry.healthy) by the pod and by every peer that went too (entry.peers:
// that count includes their pods, whether or not a status has counted their
// going since), so that victims decided on one count that a status counts
// only in part are all still held.
//
// An entry's count is raised to any later status's while it waits
// (budgetStatusChanged): a pod that turned Ready since the decision is in
// the count the going is taken from. It is lowered by the covered pods
// other than the held ones that the Cache has seen stop counting healthy
// since the decision (budgetState.losses): a count that dropped because
// another pod turned not Ready does not show this pod's going. Both only
// ever ask for a count no higher than the status would show once it
// counts the going. Caller holds mu for writing.
func (l *ledger) countLocked(bs *budgetState, now time.Time) {
	for _, e := range bs.entries {
		if e.gone.IsZero() || e.counted != notCounted || !e.inHealthy || !l.live(e, now) {
			continue
		}
		need := int32(1)
		for _, p := range e.peers {
			if p.inHealthy && !p.gone.IsZero() {
				need++
			}
		}
		if bs.status <= e.healthy-(bs.losses-e.lossesAt)-need {
			e.counted = countedDrop
			l.wakeByLocked(l.endsAt(e))
		}
	}
}

// budgetStatusChanged is called for every update of a budget, with the
// healthy count (a PDB's currentHealthy, a PUB's currentAvailable) and the
// DisruptedPods (and, for PUBs, UnavailablePods) of its new status.
//
// Entries whose pod the status now records as disrupted end: the status
// counts them. The others wait for their pod's going to be counted
// (countLocked, settleLive). It reports whether holds ended that free the
// budget (the recorded ones do not: the status spends the budget for them).
func (l *ledger) budgetStatusChanged(k budgetKey, healthy int32, recorded ...map[string]metav1.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	bs := l.budgets[k]
	if bs == nil {
		return false
	}
	bs.status = healthy
	for i := len(bs.entries) - 1; i >= 0; i-- {
		e := bs.entries[i]
		if l.recordedIn(e, recorded) {
			l.drop(e)
			continue
		}
		switch {
		case e.counted != notCounted:
		case !e.inHealthy:
			// Its going takes nothing from the count: any status
			// received after it went counts it.
			if !e.gone.IsZero() {
				e.counted = countedOutside
				l.wakeByLocked(l.endsAt(e))
			}
		case healthy > e.healthy:
			// Pods turned Ready since: a status counting the pod still
			// healthy counts them, or it counts the pod's going already,
			// and then asking for a drop from it only holds longer. The
			// peers whose going a status has counted are not in it.
			e.healthy = healthy
			e.peers = slices.DeleteFunc(e.peers, func(p *entry) bool { return p.counted != notCounted })
		}
	}
	l.countLocked(bs, now)
	return l.sweep(k, now) > 0
}

// recordedIn reports whether one of recorded, a status's DisruptedPods or
// UnavailablePods, records e's disruption: its pod with another timestamp
// than when e was made. Caller holds mu.
func (l *ledger) recordedIn(e *entry, recorded []map[string]metav1.Time) bool {
	for _, m := range recorded {
		if t, ok := m[e.pod.name]; ok && (!e.hasMark || !t.Equal(&e.mark)) {
			return true
		}
	}
	return false
}

// podEvent tells the ledger of a pod event, after the live count has
// counted it: pod (when named) with uid is terminating or deleted when gone
// is set, and changes are the budgets whose live count the event changed.
//
// The entries of a pod that went are marked gone (a pod recreated under
// its name, another UID, ends the old pod's wait too), and a status that
// came before the event may count their going already. A covered pod other
// than the held ones that stopped counting healthy is a loss: a status's
// drop may be its, not a held pod's. A count marked as showing a going
// (countedDrop) while the entry still holds is taken back and weighed
// again with the loss: the status may have counted the other pod's drop
// before the Cache saw it.
//
// It appends to keys the budgets of the pod's entries and those of changes
// that have entries (for settleLive), and reports whether holds ended that
// free a budget.
func (l *ledger) podEvent(pod podKey, uid types.UID, gone bool, changes []liveChange, keys []budgetKey) ([]budgetKey, bool) {
	if l.n.Load() == 0 {
		return keys, false
	}
	var write bool
	if keys, write = l.concerns(pod, uid, gone, changes, keys); !write {
		return keys, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	var buf [4]budgetKey
	touched := buf[:0]
	for _, e := range l.pods[pod] {
		if e.gone.IsZero() && (gone || e.podUID != uid) {
			e.gone = now
			touched = appendKey(touched, e.budget)
		}
	}
	for _, ch := range changes {
		bs := l.budgets[ch.key]
		if bs == nil || !ch.lost || l.holds(bs, ch.pod, ch.uid) {
			continue
		}
		bs.losses++
		for _, e := range bs.entries {
			if e.counted == countedDrop && l.live(e, now) {
				e.counted = notCounted
			}
		}
		touched = appendKey(touched, ch.key)
	}
	released := false
	for _, k := range touched {
		if bs := l.budgets[k]; bs != nil {
			l.countLocked(bs, now)
			released = l.sweep(k, now) > 0 || released
		}
	}
	return keys, released
}

// concerns appends to keys the budgets of pod's entries and those of
// changes that have entries, and reports whether podEvent has anything to
// write: an entry of pod to mark gone, or a loss against a budget with
// entries.
func (l *ledger) concerns(pod podKey, uid types.UID, gone bool, changes []liveChange, keys []budgetKey) ([]budgetKey, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	write := false
	for _, e := range l.pods[pod] {
		keys = appendKey(keys, e.budget)
		write = write || (e.gone.IsZero() && (gone || e.podUID != uid))
	}
	for _, ch := range changes {
		if bs := l.budgets[ch.key]; bs != nil {
			keys = appendKey(keys, ch.key)
			write = write || (ch.lost && !l.holds(bs, ch.pod, ch.uid))
		}
	}
	return keys, write
}

// holds reports whether bs has an entry of pod with uid. Caller holds mu.
func (l *ledger) holds(bs *budgetState, pod podKey, uid types.UID) bool {
	for _, e := range bs.entries {
		if e.pod == pod && e.podUID == uid {
			return true
		}
	}
	return false
}

func appendKey(keys []budgetKey, k budgetKey) []budgetKey {
	for _, x := range keys {
		if x == k {
			return keys
		}
	}
	return append(keys, k)
}

// sweep drops the entries of k that no longer hold and returns how many.
// Caller holds mu for writing.
func (l *ledger) sweep(k budgetKey, now time.Time) int {
	bs := l.budgets[k]
	if bs == nil {
		return 0
	}
	n := 0
	// Backwards, so that dropping an entry moves none still to be seen.
	for i := len(bs.entries) - 1; i >= 0; i-- {
		if e := bs.entries[i]; !l.live(e, now) {
			l.drop(e)
			n++
		}
	}
	return n
}

// sweepAllLocked drops every entry that no longer holds and returns how
// many. Caller holds mu for writing.
func (l *ledger) sweepAllLocked(now time.Time) int {
	n := 0
	for k := range l.budgets {
		n += l.sweep(k, now)
	}
	return n
}

// sweepAll drops every entry that no longer holds, and calls the released
// hooks when it dropped any.
func (l *ledger) sweepAll() {
	l.mu.Lock()
	n := l.sweepAllLocked(l.clock.Now())
	l.mu.Unlock()
	if n > 0 {
		l.notifyReleased()
	}
}

// wakeByLocked makes the wake timer fire by at, when a released hook is
// registered: the timer ends holds at the moment they end and calls the
// hooks, so that what a hold blocked is retried then, not at some later
// event. Caller holds mu for writing.
func (l *ledger) wakeByLocked(at time.Time) {
	if len(l.released) == 0 || (l.timer != nil && !at.Before(l.wakeAt)) {
		return
	}
	if l.timer != nil {
		l.timer.Stop()
	}
	l.timerGen++
	gen := l.timerGen
	l.wakeAt = at
	// Not in the timer's own call: a fake clock calls it under its lock,
	// which wake's clock.Now would wait for.
	l.timer = l.timers.AfterFunc(at.Sub(l.clock.Now()), func() { go l.wake(gen) })
}

// wakeForAllLocked sets the wake timer for the earliest end of the
// entries. Caller holds mu for writing.
func (l *ledger) wakeForAllLocked() {
	var next time.Time
	for _, bs := range l.budgets {
		for _, e := range bs.entries {
			if end := l.endsAt(e); next.IsZero() || end.Before(next) {
				next = end
			}
		}
	}
	if !next.IsZero() {
		l.wakeByLocked(next)
	}
}

// wake is the wake timer's: it drops the entries that have ended, calls
// the released hooks when it dropped any, and sets the timer for the next
// end (an entry's end moves later when its pod goes, so the timer may find
// none ended).
func (l *ledger) wake(gen uint64) {
	l.mu.Lock()
	if gen == l.timerGen {
		l.timer = nil
	}
	n := l.sweepAllLocked(l.clock.Now())
	l.wakeForAllLocked()
	l.mu.Unlock()
	if n > 0 {
		l.notifyReleased()
	}
}
