package budgetpreemption

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/budgetguard/budgetguard/plugins/budget"
)

// A victim's checks and records between its reservation and its
// disruption (actuate): the live count once more, and the records of its
// disruption in its PodUnavailableBudgets, written before it goes and
// taken back when it stays.

// recheck checks victim against the live count of its budgets just before
// it is disrupted (budget.Cache.RecheckLive): the candidate was reserved
// before its first victim went, and a covered pod may have turned not Ready
// since. Only Strict preemption is checked: BestEffort and an overriding
// preemptor may break budgets (the API server still refuses an eviction).
func (pl *BudgetAwarePreemption) recheck(preemptor, victim *v1.Pod, op budget.Operation) error {
	if !pl.strict(preemptor) || pl.inScheduler(victim) || pl.expendable(victim) {
		return nil
	}
	if cur := pl.current(victim); cur != nil {
		victim = cur
	}
	return pl.budgets.RecheckLive(victim, op)
}

// recheckRecorded is budget.Cache.RecheckRecordedPUBs for victim, under the
// same conditions as recheck.
func (pl *BudgetAwarePreemption) recheckRecorded(ctx context.Context, preemptor, victim *v1.Pod, op budget.Operation) error {
	if pl.kruise == nil || !pl.strict(preemptor) || pl.inScheduler(victim) || pl.expendable(victim) {
		return nil
	}
	if cur := pl.current(victim); cur != nil {
		victim = cur
	}
	return pl.budgets.RecheckRecordedPUBs(ctx, pl.budgets.PUBStatusClient(pl.kruise), victim, op)
}

// recordPUBs writes the record of victim's disruption into the status of
// every PodUnavailableBudget it spends, before it is disrupted: no API
// server checks a PUB, so this is how every other profile, replica, restart
// and the descheduler count it (budget.RecordPUBDisruption follows
// OpenKruise's webhook). A PUB that no longer allows it refuses here. It
// reports whether it wrote any record.
func (pl *BudgetAwarePreemption) recordPUBs(ctx context.Context, cr *candidateReservation, victim *v1.Pod, op budget.Operation) (bool, error) {
	d, ok := cr.pubSpends[victim.UID]
	if !ok || pl.kruise == nil {
		return false, nil
	}
	recs, err := budget.RecordPUBDisruptions(ctx, pl.budgets.PUBStatusClient(pl.kruise), d, victim, op, time.Now())
	if len(recs) > 0 {
		cr.recordsMu.Lock()
		cr.pubRecords[victim.UID] = recs
		cr.recordsMu.Unlock()
	}
	return len(recs) > 0, err
}

// undoPUBRecords takes back the PUB records of victim, which stays: it was
// not disrupted after all (disruptErr nil), or the API server refused to
// disrupt it (a 4xx); a record left behind would make a later disruption of
// it free under rule 5 while its PUB may be short. When the outcome is
// unknown (a timeout, a 5xx), the record stays; Kruise's controller drops it
// when it times out.
func (pl *BudgetAwarePreemption) undoPUBRecords(ctx context.Context, cr *candidateReservation, victim *v1.Pod, disruptErr error) {
	cr.recordsMu.Lock()
	recs := cr.pubRecords[victim.UID]
	delete(cr.pubRecords, victim.UID)
	cr.recordsMu.Unlock()
	if len(recs) == 0 || (disruptErr != nil && !budget.DisruptionRefused(disruptErr)) {
		return
	}
	if err := budget.UndoPUBRecords(ctx, pl.budgets.PUBStatusClient(pl.kruise), recs); err != nil {
		klog.FromContext(ctx).Info("Warning: the disruption of a victim that stays is still recorded in its PodUnavailableBudget; the record times out", "victim", klog.KObj(victim), "err", err)
	}
}
