package budgetpreemption

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"

	"github.com/budgetguard/budgetguard/plugins/budget"
)

// reservationTTL bounds how long the plugin remembers the reservation of a
// candidate whose victims were not all actuated (the budget ledger times
// entries out by itself).
const reservationTTL = 2 * time.Minute

// refusalTTL bounds how long a candidate the budgets refused (a preemptor
// on a node) is not tried again, unless the victim's budget allows it
// sooner.
const refusalTTL = time.Minute

// candidateReservation is the ledger reservation of one chosen candidate,
// made once, before its first victim is actuated.
type candidateReservation struct {
	once    sync.Once
	created time.Time
	r       *budget.Reservation
	err     error
	// reported makes a denied reservation counted and reported once, not
	// once per victim.
	reported sync.Once

	// risky are the victims a budget may refuse (denied first, then those
	// that spend a budget); gate actuates them one by one before any other
	// victim, and stops at the first refusal.
	risky   []*v1.Pod
	gate    sync.Once
	gateErr error
	done    map[types.UID]error
	// gateBy is the victim whose call ran the gate.
	gateBy types.UID

	// current holds each victim as it was re-read and decided (delete.go);
	// a victim missing from it is gone and needs no disruption.
	current map[types.UID]*v1.Pod
	// recorded are the victims that spend a PodDisruptionBudget within
	// its allowance; they go through the Eviction API whatever the
	// actuation, so that the API server records the disruption in the
	// PDB's status (see actuate).
	recorded map[types.UID]bool
	// pubSpends are the decisions of the victims that spend a
	// PodUnavailableBudget; their record is written into the PUB's status
	// before they are disrupted (see actuate).
	pubSpends map[types.UID]budget.Decision
	// pubRecords are the records written for each victim; they are taken
	// back when the API server refuses to disrupt it.
	pubRecords map[types.UID][]budget.PUBRecord
	recordsMu  sync.Mutex
}

// reserve returns the reservation of candidate c, making it on first use:
// every victim of c is re-decided cumulatively and recorded in the ledger
// atomically, so back-to-back cycles cannot spend a budget twice.
func (pl *BudgetAwarePreemption) reserve(ctx context.Context, c preemption.Candidate, preemptor *v1.Pod) *candidateReservation {
	now := time.Now()
	pl.mu.Lock()
	cr, ok := pl.reservations[c]
	if !ok {
		for k, old := range pl.reservations {
			if now.Sub(old.created) > reservationTTL {
				delete(pl.reservations, k)
			}
		}
		cr = &candidateReservation{created: now, done: map[types.UID]error{}, current: map[types.UID]*v1.Pod{}, recorded: map[types.UID]bool{}, pubSpends: map[types.UID]budget.Decision{}, pubRecords: map[types.UID][]budget.PUBRecord{}}
		pl.reservations[c] = cr
	}
	pl.mu.Unlock()

	cr.once.Do(func() {
		if err := pl.refused.get(preemptor.UID, c.Name()); err != nil {
			// This candidate failed on a budget a moment ago: nothing is
			// disrupted until the budget allows it (see refusedOn).
			cr.err = err
			return
		}
		// In Strict mode every victim must be allowed, together, now. In
		// BestEffort mode (and for overriding preemptors) the allowed victims
		// are reserved and the others are left to the API server: an
		// eviction it refuses aborts the attempt, a delete breaks the budget.
		strict := pl.strict(preemptor)
		plan := pl.budgets.NewPlan(pl.operation(preemptor))
		var denied, spending []*v1.Pod
		for _, victim := range c.Victims().Pods {
			// Decided as the cluster has it now, not as the snapshot did.
			victim = pl.current(victim)
			if victim == nil {
				continue
			}
			cr.current[victim.UID] = victim
			if victim.DeletionTimestamp != nil {
				continue
			}
			if pl.expendable(victim) {
				// cluster-autoscaler counts on it going: it is deleted, and
				// spends no budget in the plan (see expendable.go).
				continue
			}
			d := plan.Add(victim)
			switch {
			case !d.Allowed && strict:
				cr.err = &budget.DeniedError{Pod: victim, Decision: d}
				return
			case !d.Allowed:
				denied = append(denied, victim)
			case len(d.Spends) > 0:
				spending = append(spending, victim)
			}
			if d.Allowed {
				// A victim an earlier reservation holds (another cycle's,
				// another profile's) spends nothing new here, but its
				// record must still be written when it goes.
				rec := pl.budgets.WithHeld(d, victim)
				if spendsKind(rec, budget.KindPDB) {
					cr.recorded[victim.UID] = true
				}
				if spendsKind(rec, budget.KindPUB) {
					cr.pubSpends[victim.UID] = rec
				}
			}
		}
		cr.risky = append(denied, spending...)
		cr.r, cr.err = plan.Reserve()
		if cr.err != nil && !strict {
			klog.FromContext(ctx).V(2).Info("Victims are not all within their budgets; going ahead without a reservation", "preemptor", klog.KObj(preemptor), "err", cr.err)
			cr.err = nil
		}
	})
	return cr
}

// preemptPod replaces Executor.PreemptPod: it reserves the candidate's
// victims in the budget ledger, then evicts or deletes the victim, and
// cancels the victim's reservation when that fails.
//
// The Executor calls it for every victim in parallel. The victims a budget
// may refuse are actuated first, one at a time, by whichever call comes
// first; the others wait for them, and are not disrupted when one was
// refused: a refusal aborts the candidate before the victims that spend no
// budget are touched.
func (pl *BudgetAwarePreemption) preemptPod(ctx context.Context, c preemption.Candidate, preemptor preemption.ExecutorPreemptor, victim *v1.Pod, pluginName string) error {
	preemptorPod, err := preemptorPodOf(preemptor)
	if err != nil {
		return err
	}
	cr := pl.reserve(ctx, c, preemptorPod)
	if cr.err != nil {
		// Every victim of the candidate meets the same error; the
		// preemption was blocked once.
		cr.reported.Do(func() {
			var de *budget.DeniedError
			reason := "Unknown"
			if errors.As(cr.err, &de) {
				reason = string(de.Decision.Reason())
				pl.refused.add(preemptorPod.UID, c.Name(), de.Pod, cr.err)
			}
			blockedTotal.WithLabelValues(reason).Inc()
			pl.abort(eventTarget(preemptor, preemptorPod), victim, budget.EventPreemptionBlockedByBudget, fmt.Sprintf("preemption on node %s aborted before any victim was disrupted: %v", c.Name(), cr.err))
		})
		return cr.err
	}

	// last: upstream registered this victim as the preemptor's last before
	// this call (see activateAfterLastVictim).
	last := pl.fts.EnableAsyncPreemption && upstreamLastVictim(c) == victim.UID
	cur, ok := cr.current[victim.UID]
	if !ok {
		klog.FromContext(ctx).V(2).Info("Victim is already gone", "preemptor", klog.KObj(preemptorPod), "victim", klog.KObj(victim), "node", c.Name())
		if last {
			pl.activateAfterLastVictim(ctx, preemptor, "it was gone before upstream registered it")
		}
		return nil
	}
	victim = cur
	cr.gate.Do(func() {
		cr.gateBy = victim.UID
		for _, v := range cr.risky {
			err := pl.actuate(ctx, c, cr, preemptor, preemptorPod, v, pluginName)
			cr.done[v.UID] = err
			if err != nil {
				cr.gateErr = err
				return
			}
		}
	})
	if err, ok := cr.done[victim.UID]; ok {
		if err == nil && last && victim.UID != cr.gateBy {
			pl.activateAfterLastVictim(ctx, preemptor, "the gate disrupted it before upstream registered it")
		}
		return err
	}
	if cr.gateErr != nil {
		return cr.gateErr
	}
	err = pl.actuate(ctx, c, cr, preemptor, preemptorPod, victim, pluginName)
	if err == nil && last && pl.current(victim) == nil {
		// Gone already when it was disrupted (the API server answered
		// 404), or its removal is seen already: either way it may have been
		// judged before upstream registered it.
		pl.activateAfterLastVictim(ctx, preemptor, "it is gone")
	}
	return err
}

// preemptPodInMemory is Executor.PreemptPod: preemptPod, and whether the
// victim was preempted only in the scheduler's memory (a pod waiting at
// Permit or in PreBind, which upstream's PreemptPod rejects there without
// an API call; it disrupts nothing running). The Executor does not wait for
// the deletion of such a last victim before it lets the preemptor in.
func (pl *BudgetAwarePreemption) preemptPodInMemory(ctx context.Context, c preemption.Candidate, preemptor preemption.ExecutorPreemptor, victim *v1.Pod, pluginName string) (bool, error) {
	inMemory := pl.inScheduler(victim)
	if err := pl.preemptPod(ctx, c, preemptor, victim, pluginName); err != nil {
		return false, err
	}
	return inMemory, nil
}

// preemptorPodOf is the pod the rules look at for preemptor: the pod
// itself (a pod preemptor's Obj is a wrapper; Pods holds the pod), or a
// gang's stand-in, which carries the PodGroup's priority and UID, so that
// its refusals are remembered under the PodGroup.
func preemptorPodOf(preemptor preemption.ExecutorPreemptor) (*v1.Pod, error) {
	if g, ok := preemptor.(*groupPreemptor); ok {
		return g.rep, nil
	}
	pods := preemptor.Pods()
	if len(pods) != 1 {
		return nil, fmt.Errorf("%s: preemptor %s is a %s of %d pods; only single pods and PodGroups it plans are supported", Name, klog.KObj(preemptor), preemptor.Type(), len(pods))
	}
	var pod *v1.Pod
	for _, p := range pods {
		pod = p
	}
	return pod, nil
}

// upstreamLastVictim is the victim upstream's asynchronous preemption
// disrupts last, alone, after the others (preemption.Executor,
// prepareCandidateAsync): the last of the candidate's victims that is not
// terminating yet.
func upstreamLastVictim(c preemption.Candidate) types.UID {
	pods := c.Victims().Pods
	for i := len(pods) - 1; i >= 0; i-- {
		if pods[i].DeletionTimestamp == nil {
			return pods[i].UID
		}
	}
	return ""
}

// activateAfterLastVictim activates the preemptor's pods once upstream's
// asynchronous preemption has registered its last victim, when that victim
// went before the registration: the gate (in an earlier, parallel call)
// disrupted it, or something else (another preemption, a controller) had
// removed it. Upstream keeps the preemptor out of the queue (PreEnqueue)
// until then, and relies on the last victim's removal arriving after the
// registration to let it in; here it may have arrived before, been judged
// while the preemptor was still kept out, and been spent: the preemptor
// would wait, nominated, for an unrelated event or the queue's periodic
// flush. (Upstream's own PreemptPod has the second case too: a victim
// already deleted returns without activating anything;
// kubernetes/kubernetes#141694.) Activated now,
// PreEnqueue finds the victim gone or terminating, or its removal is yet
// to come and lets the preemptor in. A gang's pods are activated together.
func (pl *BudgetAwarePreemption) activateAfterLastVictim(ctx context.Context, preemptor preemption.ExecutorPreemptor, why string) {
	logger := klog.FromContext(ctx)
	logger.V(4).Info("Activating the preemptor after its last victim was registered", "preemptor", klog.KObj(preemptor), "reason", why)
	pods := map[string]*v1.Pod{}
	for _, p := range preemptor.Pods() {
		pods[p.Namespace+"/"+p.Name] = p
	}
	pl.fh.Activate(logger, pods)
}

// actuate evicts or deletes victim; when that fails it gives the victim's
// reservation back, and remembers the refusal.
func (pl *BudgetAwarePreemption) actuate(ctx context.Context, c preemption.Candidate, cr *candidateReservation, preemptor preemption.ExecutorPreemptor, preemptorPod, victim *v1.Pod, pluginName string) error {
	// Decided once: the PUB record, the rechecks and the request all go
	// under the operation the victim undergoes.
	op := pl.victimOperation(preemptorPod, cr, victim)
	if err := pl.recheck(preemptorPod, victim, op); err != nil {
		return pl.notDisrupted(ctx, c, cr, preemptor, preemptorPod, victim, err, "A covered pod turned not Ready since the victim was decided on")
	}
	recorded, err := pl.recordPUBs(ctx, cr, victim, op)
	var de *budget.DeniedError
	switch {
	case err != nil && pl.overrides(preemptorPod) && errors.As(err, &de):
		// An overriding preemptor may break budgets: the PUB that allows
		// nothing now (the cache was behind) does not stop it. The victim
		// goes unrecorded, as upstream preemption's would.
		klog.FromContext(ctx).V(2).Info("Overriding preemptor disrupts a victim its PodUnavailableBudget no longer allows; no record is written", "preemptor", klog.KObj(preemptorPod), "victim", klog.KObj(victim), "err", err)
	case err != nil:
		return pl.notDisrupted(ctx, c, cr, preemptor, preemptorPod, victim, err, "The disruption of a victim could not be recorded in its PodUnavailableBudget")
	}
	if recorded {
		// The record took a round trip, in which a covered pod may have
		// turned not Ready: checked once more, and the record taken back
		// when the victim stays.
		if err := pl.recheck(preemptorPod, victim, op); err != nil {
			pl.undoPUBRecords(ctx, cr, victim, nil)
			return pl.notDisrupted(ctx, c, cr, preemptor, preemptorPod, victim, err, "A covered pod turned not Ready while the victim's PodUnavailableBudget record was written")
		}
	}
	// A PUB that records the victim's disruption already (an earlier
	// attempt's record, whose outcome was unknown) lets it go for nothing,
	// but only while that PUB is whole without it: read from the API
	// server, since the cache may lag.
	if err := pl.recheckRecorded(ctx, preemptorPod, victim, op); err != nil {
		pl.undoPUBRecords(ctx, cr, victim, nil)
		return pl.notDisrupted(ctx, c, cr, preemptor, preemptorPod, victim, err, "A PodUnavailableBudget that records the victim's disruption already is short without it")
	}
	if err = pl.disrupt(ctx, c, preemptor, victim, op, pluginName); err == nil {
		return nil
	}
	cr.r.CancelPod(victim.Namespace, victim.Name)
	pl.undoPUBRecords(ctx, cr, victim, err)
	code := "other"
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		code = strconv.Itoa(int(se.Status().Code))
	}
	evictionFailuresTotal.WithLabelValues(code).Inc()
	err = fmt.Errorf("the API server refused to disrupt victim %s on node %s (%s): %w", klog.KObj(victim), c.Name(), code, err)
	if budget.RefusedByBudget(err) {
		// A budget's refusal, by the Eviction API (429) or by an admission
		// webhook such as OpenKruise's (403): this candidate cannot
		// complete until the budget allows it. The cache names the budget
		// when it has seen what the API server or the webhook saw.
		d := pl.budgets.Decide(victim, op)
		if !d.Allowed {
			err = fmt.Errorf("%w (%s)", err, d.Message())
		}
		pl.refused.addSeen(preemptorPod.UID, c.Name(), victim, err, pl.budgetVersions(d))
	}
	klog.FromContext(ctx).V(2).Info("Victim could not be disrupted; the preemptor will be retried", "preemptor", klog.KObj(preemptorPod), "victim", klog.KObj(victim), "code", code, "err", err)
	pl.abort(eventTarget(preemptor, preemptorPod), victim, budget.EventPreemptionEvictionFailed, err.Error()+"; the preemptor will be retried")
	return err
}

// disruptAttempts bounds how often disrupt sends one victim's disruption:
// each further attempt follows a conflict with another disruptor's mark.
const disruptAttempts = 3

// disrupt evicts or deletes victim (op) as it was decided on. Both carry
// preconditions (budget.DisruptionPreconditions, deleteVictim), so a victim
// that changed since answers 409. Another preemption or eviction that took
// the same victim first is the usual cause: several candidates share a
// victim when a whole PodGroup goes, and the Eviction API and the
// scheduler's preemption mark a pod (DisruptionTarget) before they delete
// it. So on a conflict the victim is read again from the API server:
//   - gone, made again under its name, or terminating: it is going anyway,
//     and counts as gone, as a 404 does (upstream's Executor skips a
//     terminating victim too);
//   - changed only by such a mark (budget.ChangedOnlyByDisruptionMark): it
//     is the pod the budgets decided on, and goes under its new
//     resourceVersion;
//   - changed otherwise (it turned Ready, was relabelled): the conflict
//     stands, and the candidate aborts; the next cycle decides again.
//
// A conflict alone does not abort the candidate, because an abort makes
// upstream's Executor cancel the candidate's other requests in flight: a
// delete cancelled between its two writes leaves a pod terminating that
// only a kubelet finishes, and preemptors nominated to its node wait for it.
func (pl *BudgetAwarePreemption) disrupt(ctx context.Context, c preemption.Candidate, preemptor preemption.ExecutorPreemptor, victim *v1.Pod, op budget.Operation, pluginName string) error {
	decided := victim
	for attempt := 1; ; attempt++ {
		var err error
		if op == budget.OperationDelete {
			err = pl.deletePod(ctx, c, preemptor, victim, pluginName)
		} else {
			err = pl.evictPod(ctx, c, preemptor, victim)
		}
		if !apierrors.IsConflict(err) || attempt == disruptAttempts {
			return err
		}
		logger := klog.FromContext(ctx).WithValues("preemptor", klog.KObj(preemptor), "victim", klog.KObj(victim), "node", c.Name())
		current, getErr := pl.fh.ClientSet().CoreV1().Pods(victim.Namespace).Get(ctx, victim.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(getErr) || (getErr == nil && current.UID != decided.UID):
			logger.V(2).Info("Victim is already gone")
			return nil
		case getErr != nil:
			logger.V(2).Info("Victim could not be read again after a conflict", "err", getErr)
			return err
		case current.DeletionTimestamp != nil:
			logger.V(2).Info("Victim is already terminating")
			return nil
		case !budget.ChangedOnlyByDisruptionMark(decided, current):
			return err
		}
		logger.V(2).Info("Victim was marked by another disruptor since it was decided on; disrupting it at its new resourceVersion", "resourceVersion", current.ResourceVersion)
		victim = current
	}
}

// notDisrupted gives back the victim's reservation when it is not disrupted
// after all (err says why), remembers a budget's refusal, and reports it on
// the preemptor.
func (pl *BudgetAwarePreemption) notDisrupted(ctx context.Context, c preemption.Candidate, cr *candidateReservation, preemptor preemption.ExecutorPreemptor, preemptorPod, victim *v1.Pod, err error, msg string) error {
	cr.r.CancelPod(victim.Namespace, victim.Name)
	var de *budget.DeniedError
	if errors.As(err, &de) {
		pl.refused.add(preemptorPod.UID, c.Name(), victim, err)
	}
	err = fmt.Errorf("victim %s on node %s was not disrupted: %w", klog.KObj(victim), c.Name(), err)
	klog.FromContext(ctx).V(2).Info(msg, "preemptor", klog.KObj(preemptorPod), "victim", klog.KObj(victim), "err", err)
	pl.abort(eventTarget(preemptor, preemptorPod), victim, budget.EventPreemptionBlockedByBudget, err.Error()+"; the preemptor will be retried")
	return err
}

// deletes reports whether victim is deleted rather than evicted:
//   - a victim only in the scheduler's memory is rejected there;
//   - an expendable victim under a budget is deleted: the Eviction API
//     would refuse it, and cluster-autoscaler assumes it goes;
//   - with Delete actuation (or an overriding preemptor) every other victim
//     is deleted, except one whose disruption a PodDisruptionBudget allows
//     and counts. That one is evicted: the API server then decrements the
//     PDB and records the pod in its status.disruptedPods atomically, where
//     every scheduler profile and replica, the descheduler, a restarted
//     scheduler and the disruption controller see it. A delete would leave
//     the only record of it in this process's memory. An overriding
//     preemptor's victims are never such: it may break budgets, and its
//     plan refuses nothing.
func (pl *BudgetAwarePreemption) deletes(preemptor *v1.Pod, cr *candidateReservation, victim *v1.Pod) bool {
	if pl.inScheduler(victim) || pl.expendable(victim) {
		return true
	}
	switch pl.operation(preemptor) {
	case budget.OperationEvict:
		return false
	case budget.OperationDeleteOrEvict:
		return !cr.recorded[victim.UID]
	}
	return true
}

// victimOperation is the operation victim undergoes (see deletes): its
// PodUnavailableBudgets are checked and recorded under it, as OpenKruise's
// webhook checks the request that reaches it.
func (pl *BudgetAwarePreemption) victimOperation(preemptor *v1.Pod, cr *candidateReservation, victim *v1.Pod) budget.Operation {
	if pl.deletes(preemptor, cr, victim) {
		return budget.OperationDelete
	}
	return budget.OperationEvict
}

// spendsKind reports whether d spends a budget of kind.
func spendsKind(d budget.Decision, kind budget.BudgetKind) bool {
	for _, b := range d.Spends {
		if b.Kind == kind {
			return true
		}
	}
	return false
}

// inScheduler reports whether victim is only in the scheduler's memory
// (waiting at Permit or in PreBind), where upstream's PreemptPod rejects it
// without an API call.
func (pl *BudgetAwarePreemption) inScheduler(victim *v1.Pod) bool {
	return pl.fh.GetWaitingPod(victim.UID) != nil || pl.fh.GetPodInPreBind(victim.UID) != nil
}

// evict posts a policy/v1 Eviction for victim, as it was decided on (see
// budget.DisruptionPreconditions). It does not retry: a 429
// carries Retry-After, which client-go's typed Evict would silently honour
// up to ten times.
func (pl *BudgetAwarePreemption) evict(ctx context.Context, c preemption.Candidate, preemptor preemption.ExecutorPreemptor, victim *v1.Pod) error {
	ev := &policyv1.Eviction{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "Eviction"},
		ObjectMeta: metav1.ObjectMeta{Name: victim.Name, Namespace: victim.Namespace},
		// The victim as decided (budget.DisruptionPreconditions): a victim
		// that spent no budget because it was not Ready may not turn Ready
		// and still go.
		DeleteOptions: &metav1.DeleteOptions{
			Preconditions: budget.DisruptionPreconditions(victim),
		},
	}
	// The subresource is served under /api/v1, not under the policy/v1
	// client's /apis/policy/v1 (which answers 404).
	err := pl.fh.ClientSet().PolicyV1().RESTClient().Post().AbsPath("/api/v1").
		Namespace(victim.Namespace).Resource("pods").Name(victim.Name).SubResource("eviction").
		MaxRetries(0).Body(ev).Do(ctx).Error()
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	klog.FromContext(ctx).V(2).Info("Preemptor evicted victim", "preemptor", klog.KObj(preemptor), "victim", klog.KObj(victim), "node", c.Name())
	pl.fh.EventRecorder().Eventf(victim, preemptor.Obj(), v1.EventTypeNormal, "Preempted", "Preempting",
		"Preempted by %s %v on node %v (evicted)", preemptor.Type(), preemptor.UID(), c.Name())
	return nil
}

// eventTarget is the object a preemptor's events go to: the pod, or the
// PodGroup of a gang preemption.
func eventTarget(preemptor preemption.ExecutorPreemptor, pod *v1.Pod) runtime.Object {
	if g, ok := preemptor.(*groupPreemptor); ok {
		return g.obj
	}
	return pod
}

// abort records why the preemption failed on the preemptor. It does not
// touch the preemptor's nomination: the scheduler's failure handler writes
// it after PostFilter returns, so a patch here could be overwritten. The
// refusal is remembered instead, and the preemptor's next PostFilter
// returns a result that clears the nomination (see refusal).
func (pl *BudgetAwarePreemption) abort(preemptor runtime.Object, victim *v1.Pod, reason, note string) {
	pl.fh.EventRecorder().Eventf(preemptor, victim, v1.EventTypeWarning, reason, "Preempting", note)
}
