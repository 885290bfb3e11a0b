package budgetpreemption

import (
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/budgetguard/budgetguard/plugins/budget"
)

// refusalKey is one candidate of one preemptor: the preemptor on a node.
type refusalKey struct {
	preemptor types.UID
	node      string
}

// refusal is why a candidate failed on a budget, and the victim that made it
// fail.
type refusal struct {
	victim  *v1.Pod
	err     error
	expires time.Time
	// seen are the resourceVersions of the budgets the victim spent in the
	// cache's eyes when the API server refused it anyway (a 429 where the
	// cache said yes): the cache was behind. Once it holds a newer version
	// of any of them, its answer is worth trusting again (see refusedOn).
	seen map[budget.BudgetRef]string
}

// refusals remembers, for refusalTTL, the candidates whose actuation a
// budget refused: the ledger denied their victims, or the Eviction API
// answered 429. A refused candidate is not a candidate again while its
// victim's budget denies it, so that a preemptor is not actuated, refused
// and retried on the same node indefinitely, and so that the scheduler
// clears its nomination (see refusal).
type refusals struct {
	mu  sync.Mutex
	now func() time.Time
	ttl time.Duration
	m   map[refusalKey]refusal
	// expired, when set, is called with the preemptor of a refusal that
	// ran out, so that the preemptor is retried then rather than at the
	// scheduling queue's 5-minute flush: nothing else requeues it when the
	// budget was free all along in the cache's eyes.
	expired func(preemptor types.UID)
}

func newRefusals() *refusals {
	return &refusals{now: time.Now, ttl: refusalTTL, m: map[refusalKey]refusal{}}
}

func (r *refusals) add(preemptor types.UID, node string, victim *v1.Pod, err error) {
	r.addSeen(preemptor, node, victim, err, nil)
}

// addSeen is add, with the versions of the budgets the cache had (see
// refusal.seen).
func (r *refusals) addSeen(preemptor types.UID, node string, victim *v1.Pod, err error, seen map[budget.BudgetRef]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	for k, old := range r.m {
		if now.After(old.expires) {
			delete(r.m, k)
		}
	}
	r.m[refusalKey{preemptor, node}] = refusal{victim: victim, err: err, expires: now.Add(r.ttl), seen: seen}
	if r.expired != nil {
		time.AfterFunc(r.ttl+10*time.Millisecond, func() {
			if _, live := r.lookup(preemptor, node); !live {
				r.expired(preemptor)
			}
		})
	}
}

// lookup returns the live refusal of preemptor on node.
func (r *refusals) lookup(preemptor types.UID, node string) (refusal, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := refusalKey{preemptor, node}
	f, ok := r.m[k]
	if ok && r.now().After(f.expires) {
		delete(r.m, k)
		return refusal{}, false
	}
	return f, ok
}

// get returns the error of the live refusal of preemptor on node, or nil.
func (r *refusals) get(preemptor types.UID, node string) error {
	if f, ok := r.lookup(preemptor, node); ok {
		return f.err
	}
	return nil
}

func (r *refusals) forget(preemptor types.UID, node string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, refusalKey{preemptor, node})
}

// has reports whether preemptor has a live refusal.
func (r *refusals) has(preemptor types.UID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	for k, f := range r.m {
		if k.preemptor == preemptor && !now.After(f.expires) {
			return true
		}
	}
	return false
}

// forPod returns the messages of the live refusals of preemptor.
func (r *refusals) forPod(preemptor types.UID) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	var out []string
	for k, f := range r.m {
		if k.preemptor == preemptor && !now.After(f.expires) {
			out = append(out, f.err.Error())
		}
	}
	return out
}

// refusedOn is SelectVictimsOnNode's check: a node where pod's preemption
// was refused by a budget is not a candidate while the refused victim's
// budget still denies it. The denial is blamed, so PostFilter names the
// budget.
func (pl *BudgetAwarePreemption) refusedOn(pod *v1.Pod, node string, op budget.Operation, rec *blockRecorder) *fwk.Status {
	f, d, holds := pl.refusalHolds(pod.UID, node, op)
	if !holds {
		return nil
	}
	if !d.Allowed {
		rec.add(d)
	}
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msgRefusedBefore+f.err.Error())
}

// refusalHolds returns the live refusal of preemptor (a pod's UID, or a
// gang's PodGroup's) on node, with its victim's decision now, and whether it
// still holds. It holds while the victim's budget denies it; when the
// budget allows the victim now and the refusal was the cache's own, or the
// API server's where the cache was behind and has caught up since, it is
// forgotten; otherwise it runs out (and the preemptor is retried then).
func (pl *BudgetAwarePreemption) refusalHolds(preemptor types.UID, node string, op budget.Operation) (refusal, budget.Decision, bool) {
	f, ok := pl.refused.lookup(preemptor, node)
	if !ok {
		return refusal{}, budget.Decision{}, false
	}
	d := pl.budgets.Decide(f.victim, op)
	if d.Allowed && f.victim.DeletionTimestamp == nil {
		if _, denied := f.err.(*budget.DeniedError); denied || pl.caughtUp(f.seen) {
			pl.refused.forget(preemptor, node)
			return f, d, false
		}
	}
	return f, d, true
}

// caughtUp reports whether the cache holds a newer version of any budget in
// seen than it did then.
func (pl *BudgetAwarePreemption) caughtUp(seen map[budget.BudgetRef]string) bool {
	for ref, v := range seen {
		if now, ok := pl.budgets.ObservedResourceVersion(ref.Kind, ref.Namespace, ref.Name); !ok || now != v {
			return true
		}
	}
	return false
}

// budgetVersions returns the versions the cache holds of the budgets d
// spends.
func (pl *BudgetAwarePreemption) budgetVersions(d budget.Decision) map[budget.BudgetRef]string {
	if len(d.Spends) == 0 {
		return nil
	}
	seen := make(map[budget.BudgetRef]string, len(d.Spends))
	for _, ref := range d.Spends {
		if v, ok := pl.budgets.ObservedResourceVersion(ref.Kind, ref.Namespace, ref.Name); ok {
			seen[ref] = v
		}
	}
	return seen
}

// clearNomination is the PostFilter result with which the scheduler's
// failure handler clears the preemptor's nominatedNodeName (as upstream's
// Evaluator does when it finds no candidate).
func clearNomination() *fwk.PostFilterResult {
	return &fwk.PostFilterResult{NominatingInfo: &fwk.NominatingInfo{NominatingMode: fwk.ModeOverride, NominatedNodeName: ""}}
}

// refusal turns a failed preemption that a budget refused into what the
// scheduler needs to leave the preemptor unnominated and Unschedulable: an
// Unschedulable status (the framework drops the result of an Error status)
// naming the budget, with a result that overrides the nomination with "".
// The scheduler's handleSchedulingFailure writes both in one patch, after
// the cycle, so nothing can overwrite them with a stale nomination. It
// returns a nil status when the failure is not a budget refusal.
//
// A refusal is: the ledger denied the chosen candidate's victims
// (synchronous actuation), a remembered refusal of this preemptor (the
// asynchronous actuation of an earlier cycle failed; its goroutine
// activates the preemptor, and this cycle reports it), or budgets that kept
// every node from being a candidate.
func (pl *BudgetAwarePreemption) refusal(pod *v1.Pod, deniedAtActuation bool, msg string, blocked bool) (*fwk.PostFilterResult, *fwk.Status) {
	remembered := pl.refused.forPod(pod.UID)
	if !deniedAtActuation && len(remembered) == 0 && !blocked {
		return nil, nil
	}
	for _, m := range remembered {
		if !strings.Contains(msg, m) {
			msg = appendNote(msg, m)
		}
	}
	return clearNomination(), fwk.NewStatus(fwk.Unschedulable, "preemption: "+msg)
}
