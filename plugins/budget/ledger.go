package budget

import (
	"slices"
	"sync"
	"sync/atomic"
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
	// reservation holds at least, even once a status counts the pod's going
	// (see holdend.go). It must exceed the budget controller's usual lag and
	// the pod informer's lag behind the budget informer: a status whose
	// count dropped for another reason (another pod turned not Ready) may
	// pass for the one that counts this pod; by the end of the delay the
	// recomputed status has arrived, and so has the other pod's event, which
	// takes the count back (budgetState.losses).
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
	// raised to the count of any later status while the entry waits, and
	// inHealthy whether the decision's count includes the pod: Ready and
	// not recorded as disrupted, as the budget's controller counts (see
	// countLocked).
	healthy   int32
	inHealthy bool
	// lossesAt is the budget's losses (budgetState.losses) when the entry
	// was made.
	lossesAt int32
	// peers are the live entries of the budget whose going was not
	// counted when this one was made, and those made while this one's was
	// not (the other victims of its plan among them): the count its
	// decision read includes their pods (see countLocked).
	peers []*entry
	// counted is what showed the pod's going, if anything has (holdend.go).
	counted countedBy
}

// budgetState is the ledger's view of one budget.
type budgetState struct {
	// entries are in no particular order; a budget has few, and a slice
	// is cheaper to count than a map is to iterate.
	entries []*entry
	// inline holds the first entries without another allocation.
	inline [2]*entry
	// status is the healthy count of the latest status of the budget the
	// ledger knows: the one its first entry was decided on, or a later one
	// (budgetStatusChanged).
	status int32
	// losses counts the covered pods other than the ones held against the
	// budget that the Cache saw stop counting healthy (turn not Ready, be
	// deleted, leave the budget) while the budget had entries (podEvent).
	losses int32
}

// ledger records in-flight disruptions. It is safe for concurrent use.
type ledger struct {
	mu      sync.RWMutex
	opts    LedgerOptions
	clock   clock.PassiveClock
	budgets map[budgetKey]*budgetState
	pods    map[podKey][]*entry
	// n is the number of entries, read without mu by the pod event
	// handler to skip the ledger when it holds nothing.
	n atomic.Int32
	// released are called when holds end and free a budget (see
	// Cache.OnRelease).
	released []func()
	// timers runs the wake timer (holdend.go): the clock's when it has
	// timers, else the real clock's.
	timers clock.WithDelayedExecution
	// timer, when set, calls wake at wakeAt; timerGen tells a timer that
	// was replaced from the current one.
	timer    clock.Timer
	wakeAt   time.Time
	timerGen uint64
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

// OnRelease calls fn whenever holds end and free a budget with no budget
// event to say so: a reservation cancelled, or a hold that ends by
// ReservationTTL, SettleDelay or MaxHold, at the moment it ends, or at once
// when the event that lets it end comes after that (docs/design.md, The
// ledger). fn is called without the ledger's lock, and must not block.
func (c *Cache) OnRelease(fn func()) {
	l := c.ledger
	l.mu.Lock()
	defer l.mu.Unlock()
	l.released = append(l.released, fn)
	// The holds made before the first hook have no timer yet.
	l.wakeForAllLocked()
}

func newLedger(opts LedgerOptions, clk clock.PassiveClock) *ledger {
	timers, ok := clk.(clock.WithDelayedExecution)
	if !ok {
		timers = clock.RealClock{}
	}
	return &ledger{
		opts:    opts.withDefaults(),
		clock:   clk,
		timers:  timers,
		budgets: map[budgetKey]*budgetState{},
		pods:    map[podKey][]*entry{},
	}
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

// add records a new entry, decided on the budget's status with healthy
// count e.healthy, and wakes the ledger when it ends. Caller holds mu for
// writing.
func (l *ledger) add(e *entry) {
	bs := l.budgets[e.budget]
	if bs == nil {
		bs = &budgetState{status: e.healthy}
		bs.entries = bs.inline[:0]
		l.budgets[e.budget] = bs
	}
	e.lossesAt = bs.losses
	now := l.clock.Now()
	for _, f := range bs.entries {
		if f.counted == notCounted && l.live(f, now) {
			e.peers = append(e.peers, f)
			f.peers = append(f.peers, e)
		}
	}
	bs.entries = append(bs.entries, e)
	l.pods[e.pod] = append(l.pods[e.pod], e)
	l.n.Add(1)
	l.wakeByLocked(l.endsAt(e))
}

// drop removes an entry. Caller holds mu for writing.
func (l *ledger) drop(e *entry) {
	if bs := l.budgets[e.budget]; bs != nil {
		if i := slices.Index(bs.entries, e); i >= 0 {
			bs.entries = slices.Delete(bs.entries, i, i+1)
			l.n.Add(-1)
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
