package budgetpreemption

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/budgetguard/budgetguard/plugins/budget"
)

// reasonExpendableUnderBudget is the reason of the event on a preemptor whose
// victims include pods below expendablePodsPriorityCutoff that a budget
// covers.
const reasonExpendableUnderBudget = budget.EventPreemptedExpendableUnderBudget

// expendableKey holds the expendableRecorder in the cycle state.
const expendableKey fwk.StateKey = Name + "/expendable"

// expendableVictim is a victim taken although a budget covers it, because
// cluster-autoscaler treats it as expendable.
type expendableVictim struct {
	pod     types.NamespacedName
	budgets []budget.BudgetRef
}

// expendableRecorder collects, across the parallel dry runs of one
// PostFilter, the budget-covered expendable victims of each candidate node.
// Clone returns the same recorder, so every copy of the cycle state reports
// to it.
type expendableRecorder struct {
	mu     sync.Mutex
	byNode map[string][]expendableVictim
}

// Clone implements fwk.StateData.
func (r *expendableRecorder) Clone() fwk.StateData { return r }

func expendableFrom(state fwk.CycleState) *expendableRecorder {
	v, err := state.Read(expendableKey)
	if err != nil {
		return nil
	}
	r, _ := v.(*expendableRecorder)
	return r
}

// add records which of victims, the victims chosen on node, are the
// budget-covered expendable pods among potential; it replaces what an
// earlier dry run of the node recorded.
func (r *expendableRecorder) add(node string, victims []*v1.Pod, potential []potentialVictim) {
	if r == nil {
		return
	}
	var out []expendableVictim
	if slices.ContainsFunc(potential, func(pv potentialVictim) bool { return pv.expendable }) {
		chosen := make(map[types.UID]bool, len(victims))
		for _, p := range victims {
			chosen[p.UID] = true
		}
		for _, pv := range potential {
			if !pv.expendable {
				continue
			}
			for _, p := range victimPods(pv.v) {
				if chosen[p.UID] {
					out = append(out, expendableVictim{pod: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}, budgets: coveringBudgets(pv.d)})
				}
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(out) == 0 {
		// Nothing to record: only an earlier record of node to drop.
		delete(r.byNode, node)
		return
	}
	if r.byNode == nil {
		r.byNode = map[string][]expendableVictim{}
	}
	r.byNode[node] = out
}

func (r *expendableRecorder) on(node string) []expendableVictim {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byNode[node]
}

// coveringBudgets lists the budgets d names, spent or denying, once each.
func coveringBudgets(d budget.Decision) []budget.BudgetRef {
	refs := append([]budget.BudgetRef(nil), d.Spends...)
	for _, den := range d.Denials {
		refs = append(refs, den.Budgets...)
	}
	seen := map[budget.BudgetRef]bool{}
	out := refs[:0]
	for _, ref := range refs {
		if !seen[ref] {
			seen[ref] = true
			out = append(out, ref)
		}
	}
	return out
}

// reportExpendable sends the preemptor an event naming each budget-covered
// expendable victim of the node it was nominated to, its budgets and the
// cutoff.
func (pl *BudgetAwarePreemption) reportExpendable(preemptor *v1.Pod, node string, r *expendableRecorder) {
	victims := r.on(node)
	if len(victims) == 0 {
		return
	}
	parts := make([]string, 0, len(victims))
	for _, ev := range victims {
		names := make([]string, 0, len(ev.budgets))
		for _, ref := range ev.budgets {
			names = append(names, ref.String())
		}
		sort.Strings(names)
		parts = append(parts, fmt.Sprintf("%s (%s)", ev.pod, strings.Join(names, ", ")))
	}
	them := "them"
	if len(victims) == 1 {
		them = "it"
	}
	pl.fh.EventRecorder().Eventf(preemptor, nil, v1.EventTypeNormal, reasonExpendableUnderBudget, "Preempting",
		"preempting %s below expendablePodsPriorityCutoff %d on node %s although a disruption budget protects %s, as cluster-autoscaler assumes: %s",
		budget.Count(len(victims), "pod"), pl.args.ExpendablePodsPriorityCutoff, node, them, strings.Join(parts, "; "))
}

// expendable reports whether victim is below expendablePodsPriorityCutoff:
// cluster-autoscaler leaves such pods out of its simulation and counts on
// preemption removing them, so budgetguard takes them even under a budget.
func (pl *BudgetAwarePreemption) expendable(victim *v1.Pod) bool {
	return budget.PodExpendable(victim, pl.args.ExpendablePodsPriorityCutoff)
}
