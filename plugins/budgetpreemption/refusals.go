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
	m   map[refusalKey]refusal
}

func newRefusals() *refusals {
	return &refusals{now: time.Now, m: map[refusalKey]refusal{}}
}

func (r *refusals) add(preemptor types.UID, node string, victim *v1.Pod, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	for k, old := range r.m {
		if now.After(old.expires) {
			delete(r.m, k)
		}
	}
	r.m[refusalKey{preemptor, node}] = refusal{victim: victim, err: err, expires: now.Add(refusalTTL)}
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
	f, ok := pl.refused.lookup(pod.UID, node)
	if !ok {
		return nil
	}
	d := pl.budgets.Decide(f.victim, op)
	if d.Allowed && f.victim.DeletionTimestamp == nil {
		// The budget allows the victim now (the API server refused a victim
		// the cache allowed: wait for the entry to expire).
		if _, denied := f.err.(*budget.DeniedError); denied {
			pl.refused.forget(pod.UID, node)
			return nil
		}
	}
	if !d.Allowed {
		rec.add(d)
	}
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "preemption on this node was refused by a disruption budget: "+f.err.Error())
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
func (pl *BudgetAwarePreemption) refusal(pod *v1.Pod, status *fwk.Status, msg string, blocked bool) (*fwk.PostFilterResult, *fwk.Status) {
	remembered := pl.refused.forPod(pod.UID)
	if !blockedAtActuation(status) && len(remembered) == 0 && !blocked {
		return nil, nil
	}
	for _, m := range remembered {
		if !strings.Contains(msg, m) {
			msg = strings.TrimSpace(msg + "; " + m)
		}
	}
	return clearNomination(), fwk.NewStatus(fwk.Unschedulable, "preemption: "+msg)
}
