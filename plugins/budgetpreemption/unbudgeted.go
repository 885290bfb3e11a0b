package budgetpreemption

import (
	"sort"

	v1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
)

// unbudgetedVictims returns the units preemptor may take among units, in
// their order, when no budget covers any of their pods
// (budget.Cache.Covered); ok is false as soon as one is covered. It asks the
// cache one lookup a pod and decides nothing.
func (pl *BudgetAwarePreemption) unbudgetedVictims(preemptor *v1.Pod, units []*preemption.DomainVictim) (potential []*preemption.DomainVictim, ok bool) {
	prio := corev1helpers.PodPriority(preemptor)
	for _, v := range units {
		if !pl.mayTake(prio, v) {
			continue
		}
		for _, pi := range v.Pods() {
			if pl.budgets.Covered(pi.GetPod()) {
				return nil, false
			}
		}
		potential = append(potential, v)
	}
	return potential, true
}

// reprieveUnbudgeted is SelectVictimsOnNode on a node where no budget covers
// any potential victim. Each would be decided free: none is denied, spends a
// budget or is expendable under a budget, and nothing is blamed or
// recorded. Strict's search, BestEffort's count and the reprieve order by
// class then all come to upstream's reprieve, which this is, without the
// decisions: every potential victim off the node, then back, most important
// first, where the preemptor still fits. The victims come out most
// important first, as the full path sorts them; the count is 0.
func (t *nodeTrial) reprieveUnbudgeted(potential []*preemption.DomainVictim) ([]*v1.Pod, int, *fwk.Status) {
	if len(potential) == 0 {
		return nil, 0, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "No preemption victims found for incoming pod")
	}
	decisionsTotal.WithLabelValues("free", "").Add(float64(len(potential)))
	for _, v := range potential {
		if err := t.remove(v); err != nil {
			return nil, 0, fwk.AsStatus(err)
		}
	}
	if s := t.fits(); !s.IsSuccess() {
		return nil, 0, s
	}
	// Stable, with the full path's comparison, so that pods of equal
	// importance keep the node's order there and here alike.
	sort.SliceStable(potential, func(i, j int) bool {
		return preemption.MoreImportantVictim(potential[i], potential[j])
	})
	var victims []*v1.Pod
	for _, v := range potential {
		if err := t.add(v); err != nil {
			return nil, 0, fwk.AsStatus(err)
		}
		if t.fits().IsSuccess() {
			continue
		}
		if err := t.remove(v); err != nil {
			return nil, 0, fwk.AsStatus(err)
		}
		victims = append(victims, victimPods(v)...)
	}
	// An earlier dry run of the node may have recorded expendable victims.
	expendableFrom(t.state).add(t.nodeInfo.Node().Name, victims, nil)
	return victims, 0, fwk.NewStatus(fwk.Success)
}
