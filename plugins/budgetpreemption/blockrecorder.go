package budgetpreemption

import (
	"errors"
	"sync"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/budgetguard/budgetguard/plugins/budget"
)

// blockKey holds the blockRecorder in the cycle state.
const blockKey fwk.StateKey = Name + "/blocked"

// blockRecorder collects, across the parallel dry runs of one PostFilter,
// the budget denials that kept nodes from being candidates. Clone returns
// the same recorder, so every copy of the cycle state reports to it.
type blockRecorder struct {
	mu    sync.Mutex
	nodes int
	first *budget.Decision
	// behind: some denial was StatusBehindPods (see retryBehind).
	behind bool
}

// Clone implements fwk.StateData.
func (r *blockRecorder) Clone() fwk.StateData { return r }

func (r *blockRecorder) add(d budget.Decision) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nodes++
	if r.first == nil {
		r.first = &d
	}
	r.behind = r.behind || statusBehind(d)
}

// statusBehind reports whether a budget denied d only for now: its status
// has not counted a change of its pods yet (StatusBehindPods).
func statusBehind(d budget.Decision) bool {
	for _, den := range d.Denials {
		if den.Reason == budget.ReasonStatusBehindPods {
			return true
		}
	}
	return false
}

type blockSummary struct {
	nodes    int
	decision budget.Decision
}

func (r *blockRecorder) summary() *blockSummary {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.first == nil {
		return nil
	}
	return &blockSummary{nodes: r.nodes, decision: *r.first}
}

func recorderFrom(state fwk.CycleState) *blockRecorder {
	v, err := state.Read(blockKey)
	if err != nil {
		return nil
	}
	r, _ := v.(*blockRecorder)
	return r
}

// deniedAtActuation returns the budgets' denial inside status, when status
// is the failure of an actuation whose victims the budgets denied when they
// were reserved (preemptPod has counted and reported it); nil otherwise.
// PostFilter asks once: AsError allocates on every other failure.
func deniedAtActuation(status *fwk.Status) *budget.DeniedError {
	if status.IsSuccess() {
		return nil
	}
	var de *budget.DeniedError
	if errors.As(status.AsError(), &de) {
		return de
	}
	return nil
}
