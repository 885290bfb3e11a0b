package budgetpreemption

import (
	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"

	"github.com/budgetguard/budgetguard/plugins/budget"
)

// Victim units. Since Kubernetes 1.37 preemption takes victims as units
// (preemption.Victim): a pod, or, with the GenericWorkload gate, every
// scheduled pod of a PodGroup whose disruptionMode is All, on whatever
// nodes they run. A unit goes whole or stays whole, so its budgets are
// decided for all its pods together, as they would go.

// victimPods returns the pods of v.
func victimPods(v preemption.Victim) []*v1.Pod {
	pods := make([]*v1.Pod, 0, len(v.Pods()))
	for _, pi := range v.Pods() {
		pods = append(pods, pi.GetPod())
	}
	return pods
}

// addVictim adds the pods of v to plan, as they would go together, and
// returns their decision together: allowed only when every pod is, with
// the first denial and every spend. Expendable pods are left out: they go
// whatever their budgets (see expendable.go).
func (pl *BudgetAwarePreemption) addVictim(plan *budget.Plan, v preemption.Victim) budget.Decision {
	out := budget.Decision{Allowed: true}
	for _, pi := range v.Pods() {
		p := pi.GetPod()
		if pl.expendable(p) {
			continue
		}
		d := plan.Add(p)
		out.Spends = append(out.Spends, d.Spends...)
		if !d.Allowed && out.Allowed {
			out.Allowed, out.Denials = false, d.Denials
		}
	}
	return out
}

// decideVictim decides v alone under op: a pod as budget.Cache.Decide does,
// a group as one plan of its pods; expendable pods are left out, as
// addVictim leaves them.
func (pl *BudgetAwarePreemption) decideVictim(v preemption.Victim, op budget.Operation) budget.Decision {
	if pods := v.Pods(); len(pods) == 1 {
		if pl.expendable(pods[0].GetPod()) {
			return budget.Decision{Allowed: true}
		}
		return pl.budgets.Decide(pods[0].GetPod(), op)
	}
	return pl.addVictim(pl.budgets.NewPlan(op), v)
}

// victimExpendable reports whether every pod of v is expendable
// (expendable.go); such a unit goes whatever its budgets.
func (pl *BudgetAwarePreemption) victimExpendable(v preemption.Victim) bool {
	for _, pi := range v.Pods() {
		if !pl.expendable(pi.GetPod()) {
			return false
		}
	}
	return true
}

// mayTake reports whether preemptor may take v at all, whatever its
// budgets: v has a lower priority, no pod of it is annotated safe-to-evict
// "false" (when honoured), and none runs on a node cluster-autoscaler is
// removing.
func (pl *BudgetAwarePreemption) mayTake(priority int32, v *preemption.DomainVictim) bool {
	if v.Priority() >= priority {
		return false
	}
	for _, pi := range v.Pods() {
		if pl.args.HonorSafeToEvictAnnotation && budget.AutoscalerForbidsEviction(pi.GetPod()) {
			return false
		}
	}
	for _, n := range v.AffectedNodes() {
		if n != nil && budget.NodeBeingRemoved(n.Node()) {
			return false
		}
	}
	return true
}

// onNode reports whether pod runs on the node ni holds.
func onNode(pod *v1.Pod, ni fwk.NodeInfo) bool {
	return ni != nil && ni.Node() != nil && pod.Spec.NodeName == ni.Node().Name
}

// unitNode returns the NodeInfo a pod of v runs on: main when the pod runs
// there, else the node v affects (a group's pod on another node).
func unitNode(v *preemption.DomainVictim, main fwk.NodeInfo, pod *v1.Pod) fwk.NodeInfo {
	if onNode(pod, main) {
		return main
	}
	return v.AffectedNodes()[pod.Spec.NodeName]
}
