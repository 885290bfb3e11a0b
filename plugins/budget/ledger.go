package budget

import (
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// Ledger defaults. See LedgerOptions.
const (
	DefaultReservationTTL = 5 * time.Second
	DefaultSettleDelay    = 2 * time.Second
	DefaultMaxHold        = 2 * time.Minute
)

// LedgerOptions bound how long a reservation may hold a budget.
type LedgerOptions struct {
	// ReservationTTL ends a reservation whose pod is still there and not
	// terminating this long after it was made: the disruption never
	// happened (the eviction failed, or the caller changed its mind).
	ReservationTTL time.Duration
	// SettleDelay is how long after a pod was seen terminating or gone its
	// reservation holds at least, even once a status received since counts
	// the pod's going (see budgetStatusChanged). It must exceed the budget
	// controller's usual lag: a status computed just before the pod went,
	// but delivered just after, may show a count that dropped for another
	// reason (another pod turned not Ready) and pass for the one that counts
	// this pod; by the end of the delay the recomputed status has arrived.
	SettleDelay time.Duration
	// MaxHold ends any reservation this long after it was made, whatever
	// else happened. It matches the API server's DisruptedPods timeout.
	MaxHold time.Duration
	// DryRun is for a cache whose disruptions are predicted, not performed
	// (the descheduler's dry run): no budget status will ever count them,
	// and the "evicted" pods come back after each loop. Each reservation
	// then holds its budget until MaxHold or Cancel, whatever the pod and
	// the status do, as the API server's record of a real eviction would
	// at most, so later loops predict what a real run's later loops do.
	DryRun bool
}

func (o LedgerOptions) withDefaults() LedgerOptions {
	if o.ReservationTTL <= 0 {
		o.ReservationTTL = DefaultReservationTTL
	}
	if o.SettleDelay <= 0 {
		o.SettleDelay = DefaultSettleDelay
	}
	if o.MaxHold <= 0 {
		o.MaxHold = DefaultMaxHold
	}
	return o
}

type budgetKey struct {
	kind      BudgetKind
	namespace string
	name      string
}

func keyOf(ref BudgetRef) budgetKey { return budgetKey{ref.Kind, ref.Namespace, ref.Name} }

type podKey struct{ namespace, name string }

// entry is one disruption budgetguard decided on that a budget's status does
// not show yet.
type entry struct {
	budget  budgetKey
	pod     podKey
	podUID  types.UID
	created time.Time
	// gone is when the pod was first seen terminating or deleted.
	gone time.Time
	// mark is the pod's DisruptedPods timestamp in the budget's status when
	// the reservation was made (hasMark false when absent). A different
	// timestamp later means the API server recorded this disruption.
	mark    metav1.Time
	hasMark bool
	// healthy is the budget's healthy count (a PDB's currentHealthy, a
	// PUB's currentAvailable) in the status the disruption was decided on,
	// and inHealthy whether that count includes the pod: Ready and not
	// recorded as disrupted, as the budget's controller counts.
	healthy   int32
	inHealthy bool
	// counted is set once a status received after the pod went counts its
	// going (see budgetStatusChanged).
	counted bool
}

// budgetState is the ledger's view of one budget.
type budgetState struct {
	// entries are in no particular order; a budget has few, and a slice
	// is cheaper to count than a map is to iterate.
	entries []*entry
	// inline holds the first entries without another allocation.
	inline [2]*entry
}

// ledger records in-flight disruptions. It is safe for concurrent use.
type ledger struct {
	mu      sync.RWMutex
	opts    LedgerOptions
	clock   clock.PassiveClock
	budgets map[budgetKey]*budgetState
	pods    map[podKey][]*entry
	// released are called when a reservation is cancelled or expires
	// unused: a budget is free again without any budget event (see
	// Cache.OnRelease).
	released []func()
}

// notifyReleased calls the released hooks. Caller holds no lock.
func (l *ledger) notifyReleased() {
	l.mu.RLock()
	hooks := l.released
	l.mu.RUnlock()
	for _, fn := range hooks {
		fn()
	}
}

// expireLater drops, ReservationTTL from now, the entries of held whose
// disruption has not happened by then (their pod is still there), and
// notifies the released hooks when it dropped any. Without it a budget
// they held would be free again only in the next decision's eyes, and a
// preemptor it blocked would wait for an unrelated event. Caller holds mu.
func (l *ledger) expireLater(held []*entry) {
	if len(l.released) == 0 || l.opts.DryRun {
		return
	}
	held = slices.Clone(held) // Reservation.CancelPod reuses its slice
	time.AfterFunc(l.opts.ReservationTTL, func() {
		l.mu.Lock()
		now, dropped := l.clock.Now(), 0
		for _, e := range held {
			bs := l.budgets[e.budget]
			if bs != nil && slices.Contains(bs.entries, e) && e.gone.IsZero() && !l.live(e, now) {
				l.drop(e)
				dropped++
			}
		}
		l.mu.Unlock()
		if dropped > 0 {
			l.notifyReleased()
		}
	})
}

// OnRelease calls fn whenever a reservation is cancelled, or ends because
// its disruption did not happen in time (LedgerOptions.ReservationTTL): the
// budgets it held are free again, with no budget event to say so. fn must
// not block.
func (c *Cache) OnRelease(fn func()) {
	c.ledger.mu.Lock()
	defer c.ledger.mu.Unlock()
	c.ledger.released = append(c.ledger.released, fn)
}

func newLedger(opts LedgerOptions, clk clock.PassiveClock) *ledger {
	return &ledger{
		opts:    opts.withDefaults(),
		clock:   clk,
		budgets: map[budgetKey]*budgetState{},
		pods:    map[podKey][]*entry{},
	}
}

// live reports whether e still holds its budget at now. Caller holds mu.
func (l *ledger) live(e *entry, now time.Time) bool {
	age := now.Sub(e.created)
	if age >= l.opts.MaxHold {
		return false
	}
	if l.opts.DryRun {
		return true
	}
	if e.gone.IsZero() {
		return age < l.opts.ReservationTTL
	}
	return !e.counted || now.Sub(e.gone) < l.opts.SettleDelay
}

// inflight counts the live entries against k. Caller holds mu (read is enough).
func (l *ledger) inflight(k budgetKey, now time.Time) int32 {
	bs := l.budgets[k]
	if bs == nil {
		return 0
	}
	var n int32
	for _, e := range bs.entries {
		if l.live(e, now) {
			n++
		}
	}
	return n
}

// heldBy returns the entries of pod, for holdsIn. Caller holds mu.
func (l *ledger) heldBy(pod podKey) []*entry {
	if len(l.pods) == 0 {
		return nil
	}
	return l.pods[pod]
}

// holdsIn reports whether one of held, a pod's entries, is a live entry
// of the pod with uid against k: its disruption is counted and deciding
// about it again spends nothing new. Caller holds mu.
func (l *ledger) holdsIn(held []*entry, k budgetKey, uid types.UID, now time.Time) bool {
	for _, e := range held {
		if e.budget == k && e.podUID == uid && l.live(e, now) {
			return true
		}
	}
	return false
}

// liveBudgetsOf returns the budgets that live entries of the pod (name and
// UID) hold. Caller holds mu (read is enough).
func (l *ledger) liveBudgetsOf(pod podKey, uid types.UID, now time.Time) []budgetKey {
	var keys []budgetKey
	for _, e := range l.pods[pod] {
		if e.podUID == uid && l.live(e, now) {
			keys = append(keys, e.budget)
		}
	}
	return keys
}

// add records a new entry. Caller holds mu for writing.
func (l *ledger) add(e *entry) {
	bs := l.budgets[e.budget]
	if bs == nil {
		bs = &budgetState{}
		bs.entries = bs.inline[:0]
		l.budgets[e.budget] = bs
	}
	bs.entries = append(bs.entries, e)
	l.pods[e.pod] = append(l.pods[e.pod], e)
}

// drop removes an entry. Caller holds mu for writing.
func (l *ledger) drop(e *entry) {
	if bs := l.budgets[e.budget]; bs != nil {
		if i := slices.Index(bs.entries, e); i >= 0 {
			bs.entries = slices.Delete(bs.entries, i, i+1)
		}
		if len(bs.entries) == 0 {
			delete(l.budgets, e.budget)
		}
	}
	list := l.pods[e.pod]
	for i, x := range list {
		if x == e {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(l.pods, e.pod)
	} else {
		l.pods[e.pod] = list
	}
}

// sweep drops the entries of k that no longer hold. Caller holds mu for writing.
func (l *ledger) sweep(k budgetKey, now time.Time) {
	bs := l.budgets[k]
	if bs == nil {
		return
	}
	// Backwards, so that dropping an entry moves none still to be seen.
	for i := len(bs.entries) - 1; i >= 0; i-- {
		if e := bs.entries[i]; !l.live(e, now) {
			l.drop(e)
		}
	}
}

// sweepAll drops every entry that no longer holds.
func (l *ledger) sweepAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	for k := range l.budgets {
		l.sweep(k, now)
	}
}

// size is the number of entries, live or not yet swept.
func (l *ledger) size() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	n := 0
	for _, list := range l.pods {
		n += len(list)
	}
	return n
}

// budgetStatusChanged is called for every update of a budget, with the
// healthy count (a PDB's currentHealthy, a PUB's currentAvailable) and the
// DisruptedPods (and, for PUBs, UnavailablePods) of its new status.
//
// Entries whose pod the status now records as disrupted end: the status
// counts them.
//
// The entry of a pod that went unrecorded (deleted, or evicted while this
// Cache missed the status with the API server's record) ends only once a
// status received after the pod went counts its going, and SettleDelay has
// passed since it went (see live). Arriving after the pod went is not
// enough: a status computed before it went, still counting it healthy, can
// be delivered after, and the one that counts it can come much later (a
// slow controller, a watch that dropped). A status names no healthy pod;
// what shows a pod's going is its healthy count, one lower than the count
// the disruption was decided on, which included the pod. A pod that was not
// in that count (not Ready, or recorded as disrupted) takes nothing from it,
// so any status received after it went counts it.
func (l *ledger) budgetStatusChanged(k budgetKey, healthy int32, recorded ...map[string]metav1.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	bs := l.budgets[k]
	if bs == nil {
		return
	}
	var buf [4]*entry
	waiting, lowest := buf[:0], int32(0)
	for i := len(bs.entries) - 1; i >= 0; i-- {
		e := bs.entries[i]
		if l.recordedIn(e, recorded) {
			l.drop(e)
			continue
		}
		switch {
		case e.gone.IsZero() || e.counted:
		case !e.inHealthy:
			e.counted = true
		default:
			if len(waiting) == 0 || e.healthy < lowest {
				lowest = e.healthy
			}
			waiting = append(waiting, e)
		}
	}
	// All together or none: the victims of one plan were decided on the
	// same count, and a status that counts only some of their goings is
	// lower by fewer than their number; it counts the others healthy still.
	if len(waiting) > 0 && healthy <= lowest-int32(len(waiting)) {
		for _, e := range waiting {
			e.counted = true
		}
	}
	l.sweep(k, now)
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

// budgetDeleted forgets a budget and its entries.
func (l *ledger) budgetDeleted(k budgetKey) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if bs := l.budgets[k]; bs != nil {
		for i := len(bs.entries) - 1; i >= 0; i-- {
			l.drop(bs.entries[i])
		}
	}
	delete(l.budgets, k)
}

// podGone marks the entries of a pod that is terminating or deleted. A pod
// recreated under the same name (another UID) also ends the old pod's entries'
// wait for deletion.
func (l *ledger) podGone(pod podKey, uid types.UID, terminatingOrDeleted bool) {
	l.mu.RLock()
	list := l.pods[pod]
	l.mu.RUnlock()
	if len(list) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	for _, e := range l.pods[pod] {
		if e.gone.IsZero() && (terminatingOrDeleted || e.podUID != uid) {
			e.gone = now
		}
	}
}

// Reservation is the set of ledger entries one decision made. Cancel it
// when the disruption did not happen, so the budget is free again at once.
type Reservation struct {
	l       *ledger
	entries []*entry
}

// Cancel ends every entry of the reservation that is still held.
func (r *Reservation) Cancel() {
	if r == nil || r.l == nil {
		return
	}
	r.l.mu.Lock()
	n := len(r.entries)
	for _, e := range r.entries {
		r.l.drop(e)
	}
	r.entries = nil
	r.l.mu.Unlock()
	if n > 0 {
		r.l.notifyReleased()
	}
}

// CancelPod ends the entries of one pod of the reservation, for example a
// victim whose eviction the API server refused.
func (r *Reservation) CancelPod(namespace, name string) {
	if r == nil || r.l == nil {
		return
	}
	r.l.mu.Lock()
	kept := r.entries[:0]
	for _, e := range r.entries {
		if e.pod == (podKey{namespace, name}) {
			r.l.drop(e)
			continue
		}
		kept = append(kept, e)
	}
	dropped := len(kept) < len(r.entries)
	r.entries = kept
	r.l.mu.Unlock()
	if dropped {
		r.l.notifyReleased()
	}
}

// HeldBy returns the budgets that an earlier reservation of this very pod
// (name and UID) still holds. In a dry run (LedgerOptions.DryRun) a pod that
// holds a budget was "evicted" by an earlier loop and restored since: a real
// run would find it gone.
func (c *Cache) HeldBy(pod *v1.Pod) []BudgetRef {
	c.ledger.mu.RLock()
	defer c.ledger.mu.RUnlock()
	keys := c.ledger.liveBudgetsOf(podKey{pod.Namespace, pod.Name}, pod.UID, c.clock.Now())
	refs := make([]BudgetRef, 0, len(keys))
	for _, k := range keys {
		refs = append(refs, BudgetRef{Kind: k.kind, Namespace: k.namespace, Name: k.name})
	}
	return refs
}

// WithHeld returns d with the budgets an earlier reservation of this very
// pod holds added to its Spends. A decision about a pod the ledger already
// holds spends nothing new in memory, but its durable record (an eviction
// through the API server for a PDB, the status entry for a PUB) may not be
// written yet: whoever disrupts the pod must still write it, or no other
// process ever counts the disruption.
func (c *Cache) WithHeld(d Decision, pod *v1.Pod) Decision {
	held := c.HeldBy(pod)
	if len(held) == 0 {
		return d
	}
	spends := make([]BudgetRef, 0, len(d.Spends)+len(held))
	spends = append(spends, d.Spends...)
	for _, h := range held {
		dup := false
		for _, s := range d.Spends {
			if s.Kind == h.Kind && s.Namespace == h.Namespace && s.Name == h.Name {
				dup = true
				break
			}
		}
		if !dup {
			spends = append(spends, h)
		}
	}
	d.Spends = spends
	return d
}
