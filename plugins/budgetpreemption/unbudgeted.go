package budgetpreemption

import (
	"sort"

	v1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/budgetguard/budgetguard/plugins/budget"
)

// mayPreempt reports whether preemptor may take victim at all, whatever its
// budgets: victim has a lower priority and, when the annotation is
// honoured, is not marked safe-to-evict "false".
func (pl *BudgetAwarePreemption) mayPreempt(preemptor, victim *v1.Pod) bool {
	if corev1helpers.PodPriority(victim) >= corev1helpers.PodPriority(preemptor) {
		return false
	}
	return !pl.args.HonorSafeToEvictAnnotation || !budget.AutoscalerForbidsEviction(victim)
}

// unbudgetedVictims returns the potential victims of preemptor on nodeInfo,
// in the node's order, when no budget covers any of them
// (budget.Cache.Covered); ok is false as soon as one is covered. It asks the
// cache one lookup a pod and decides nothing.
func (pl *BudgetAwarePreemption) unbudgetedVictims(preemptor *v1.Pod, nodeInfo fwk.NodeInfo) (potential []fwk.PodInfo, ok bool) {
	for _, pi := range nodeInfo.GetPods() {
		p := pi.GetPod()
		if !pl.mayPreempt(preemptor, p) {
			continue
		}
		if pl.budgets.Covered(p) {
			return nil, false
		}
		potential = append(potential, pi)
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
func (t *nodeTrial) reprieveUnbudgeted(potential []fwk.PodInfo) ([]*v1.Pod, int, *fwk.Status) {
	if len(potential) == 0 {
		return nil, 0, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "No preemption victims found for incoming pod")
	}
	decisionsTotal.WithLabelValues("free", "").Add(float64(len(potential)))
	for _, pi := range potential {
		if err := t.remove(pi); err != nil {
			return nil, 0, fwk.AsStatus(err)
		}
	}
	if s := t.fits(); !s.IsSuccess() {
		return nil, 0, s
	}
	// Stable, with the full path's comparison, so that pods of equal
	// importance keep the node's order there and here alike.
	sort.SliceStable(potential, func(i, j int) bool {
		return util.MoreImportantPod(potential[i].GetPod(), potential[j].GetPod())
	})
	var victims []*v1.Pod
	for _, pi := range potential {
		if err := t.add(pi); err != nil {
			return nil, 0, fwk.AsStatus(err)
		}
		if t.fits().IsSuccess() {
			continue
		}
		if err := t.remove(pi); err != nil {
			return nil, 0, fwk.AsStatus(err)
		}
		victims = append(victims, pi.GetPod())
	}
	// An earlier dry run of the node may have recorded expendable victims.
	expendableFrom(t.state).add(t.nodeInfo.Node().Name, victims, nil)
	return victims, 0, fwk.NewStatus(fwk.Success)
}
