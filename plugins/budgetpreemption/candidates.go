package budgetpreemption

import (
	"context"
	"math"
	"math/rand/v2"

	v1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
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
//  3. Strict only: fewest budget-spending victims (docs/design.md,
//     Candidate selection: Strict prefers fewer of them, then upstream's
//     order). Upstream counts only victims beyond what a budget allows,
//     which BestEffort's first criterion already has; so BestEffort keeps
//     upstream's order (upstream's TestPDBInPreemption, "a node with fewer
//     PDB violating pods is preferred", takes three victims within the
//     budget over two);
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

// GetOffsetAndNumCandidates implements preemption.Interface with upstream's
// candidate-node arithmetic.
func (pl *BudgetAwarePreemption) GetOffsetAndNumCandidates(numNodes int32) (int32, int32) {
	n := numNodes * pl.args.MinCandidateNodesPercentage / 100
	n = max(n, pl.args.MinCandidateNodesAbsolute)
	n = min(n, numNodes)
	return rand.Int32N(numNodes), n
}

// CandidatesToVictimsMap implements preemption.Interface.
func (pl *BudgetAwarePreemption) CandidatesToVictimsMap(candidates []preemption.Candidate) map[string]*extenderv1.Victims {
	m := make(map[string]*extenderv1.Victims, len(candidates))
	for _, c := range candidates {
		m[c.Name()] = c.Victims()
	}
	return m
}

// OrderedScoreFuncs implements preemption.Interface. A non-nil list replaces
// upstream's default criteria in the Evaluator's pickOneNodeForPreemption,
// so the list is upstream's criteria with one inserted: see scoreFuncs.
func (pl *BudgetAwarePreemption) OrderedScoreFuncs(_ context.Context, nodesToVictims map[string]*extenderv1.Victims) []func(string) int64 {
	return pl.scoreFuncs(nodesToVictims)
}

// PodEligibleToPreemptOthers implements preemption.Interface as upstream
// does, and also waits for victims this plugin evicted.
func (pl *BudgetAwarePreemption) PodEligibleToPreemptOthers(_ context.Context, pod *v1.Pod, nominatedNodeStatus *fwk.Status) (bool, string) {
	if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy == v1.PreemptNever {
		return false, "not eligible due to preemptionPolicy=Never."
	}
	nom := pod.Status.NominatedNodeName
	if nom == "" || nominatedNodeStatus.Code() == fwk.UnschedulableAndUnresolvable {
		return true, ""
	}
	if ni, _ := pl.fh.SnapshotSharedLister().NodeInfos().Get(nom); ni != nil {
		for _, p := range ni.GetPods() {
			if corev1helpers.PodPriority(p.GetPod()) < corev1helpers.PodPriority(pod) && terminatingByDisruption(p.GetPod()) {
				return false, "not eligible due to a terminating pod on the nominated node."
			}
		}
	}
	return true, ""
}

func terminatingByDisruption(p *v1.Pod) bool {
	if p.DeletionTimestamp == nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == v1.DisruptionTarget {
			return c.Status == v1.ConditionTrue &&
				(c.Reason == v1.PodReasonPreemptionByScheduler || c.Reason == reasonEvictionByEvictionAPI)
		}
	}
	return false
}

// reasonEvictionByEvictionAPI is the DisruptionTarget reason the Eviction
// API sets (pkg/registry/core/pod/storage/eviction.go has no exported name).
const reasonEvictionByEvictionAPI = "EvictionByEvictionAPI"
