package budgetpreemption

import (
	"math"

	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	"k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/budgetguard/budgetguard/plugins/budget"
)

// scoreFuncs returns the criteria the Evaluator picks the candidate node
// by, in order; each keeps the nodes with the highest score, and the next
// breaks ties among them (k8s.io/kubernetes/pkg/scheduler/framework/
// preemption: SelectCandidate, pickOneNodeForPreemption). A non-nil list
// replaces upstream's defaults, so they are all here, with one inserted:
//
//  1. fewest denied victims (BestEffort only: a victim whose budget allows
//     nothing), from the count SelectVictimsOnNode returns as
//     NumPDBViolations, denied*deniedWeight + spending;
//  2. not a node cluster-autoscaler may remove soon
//     (DeletionCandidateOfClusterAutoscaler): such nodes come last, after
//     every node that breaks no more budgets. Spending an allowed disruption
//     keeps every promise; landing on a node that is about to go away moves
//     the preemptor and its neighbours again soon;
//  3. Strict only: fewest budget-spending victims (DESIGN.md: Strict
//     prefers fewer of them, then upstream's order). Upstream counts only
//     victims beyond what a budget allows, which BestEffort's first
//     criterion already has; so BestEffort keeps upstream's order
//     (upstream's TestPDBInPreemption, "a node with fewer PDB violating
//     pods is preferred", takes three victims within the budget over two);
//  4. the lowest highest-priority victim, the lowest sum of victim
//     priorities, the fewest victims, and the latest start time of the
//     highest-priority victims: upstream's remaining criteria.
//
// Ties left are broken as upstream does, by the first node in its list.
func (pl *BudgetAwarePreemption) scoreFuncs(nodesToVictims map[string]*extenderv1.Victims) []func(string) int64 {
	// A criterion that scores every node alike keeps them all, in order, so
	// criteria 1 and 3 are left out where no candidate has a victim they
	// count: with no budget involved, the list is upstream's with criterion
	// 2 in place of its first.
	var denied, spending bool
	for _, v := range nodesToVictims {
		denied = denied || v.NumPDBViolations/deniedWeight != 0
		spending = spending || v.NumPDBViolations%deniedWeight != 0
	}
	lister := pl.fh.SnapshotSharedLister()
	funcs := make([]func(string) int64, 0, 7)
	if denied {
		funcs = append(funcs, func(node string) int64 { return -(nodesToVictims[node].NumPDBViolations / deniedWeight) })
	}
	// The Evaluator scores each node left once a criterion: the node is
	// looked up then, not beforehand for every candidate.
	funcs = append(funcs, func(node string) int64 {
		if lister == nil {
			return 1
		}
		if ni, err := lister.NodeInfos().Get(node); err == nil && ni != nil && budget.NodeDeletionCandidate(ni.Node()) {
			return 0
		}
		return 1
	})
	if spending && pl.args.Mode == ModeStrict {
		funcs = append(funcs, func(node string) int64 { return -(nodesToVictims[node].NumPDBViolations % deniedWeight) })
	}
	return append(funcs,
		func(node string) int64 {
			// Victims are ordered most important first.
			return -int64(corev1helpers.PodPriority(nodesToVictims[node].Pods[0]))
		},
		func(node string) int64 {
			var sum int64
			for _, p := range nodesToVictims[node].Pods {
				// Shifted to be non-negative, so that more victims of
				// negative priority never sum lower than fewer.
				sum += int64(corev1helpers.PodPriority(p)) + math.MaxInt32 + 1
			}
			return -sum
		},
		func(node string) int64 { return -int64(len(nodesToVictims[node].Pods)) },
		func(node string) int64 {
			t := util.GetEarliestPodStartTime(nodesToVictims[node])
			if t == nil {
				return math.MinInt64
			}
			return t.UnixNano()
		},
	)
}
