package budgetpreemption

import (
	"strings"

	"github.com/budgetguard/budgetguard/plugins/budget"
)

// The statuses SelectVictimsOnNode gives a node that is not a candidate.
// Upstream's Evaluator counts identical node statuses and writes each
// message after its count, "0/7 nodes are available: 1 Insufficient cpu,
// 6 node(s) didn't match ...", so each reads after a number, like
// upstream's own "node(s) ..." reasons. Those that end in ": " are followed
// by the budgets' own sentence (budget.Decision.Message), which names the
// budget that refused and why. A node with no pod to take keeps upstream's
// "No preemption victims found for incoming pod", as DefaultPreemption
// words it.
const (
	msgNodeBeingRemoved   = "node(s) being removed by cluster-autoscaler (taint " + budget.TaintToBeDeleted + ")"
	msgRefusedBefore      = "node(s) where the pod's last preemption was refused by a disruption budget: "
	msgNoFitWithoutAll    = "node(s) where the pod would not fit even with every lower-priority pod removed"
	msgAllProtected       = "node(s) where every preemption victim is protected by a disruption budget: "
	msgExceedsBudget      = "node(s) whose preemption would exceed a disruption budget: "
	msgNoSetWithinBudgets = "node(s) where no set of preemption victims within the disruption budgets was found"
)

// appendNote appends note to msg, a status message: after a sentence that
// ends with a full stop (upstream's count of node statuses, "0/2 nodes are
// available: 1 Insufficient cpu, 1 node(s) ....") with a space, as the
// scheduler joins PostFilter's message to it; else with "; ".
func appendNote(msg, note string) string {
	msg = strings.TrimSpace(msg)
	switch {
	case msg == "":
		return note
	case note == "":
		return msg
	case strings.HasSuffix(msg, "."):
		return msg + " " + note
	}
	return msg + "; " + note
}
