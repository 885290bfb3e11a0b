package budget

// Event reasons budgetguard records on a preemptor. They live here, beside
// the reason codes, so that the plugin that records them and the tools that
// read them back (the sandbox report, kubectl budgetguard why) share one
// spelling.
const (
	// EventPreemptionBlockedByBudget: budgets kept the preemptor from
	// every candidate, or refused a candidate's victims before any was
	// disrupted (Warning).
	EventPreemptionBlockedByBudget = "PreemptionBlockedByBudget"
	// EventPreemptionEvictionFailed: the API server refused to disrupt a
	// victim, and the preemption was aborted (Warning).
	EventPreemptionEvictionFailed = "PreemptionEvictionFailed"
	// EventPreemptedExpendableUnderBudget: victims below the expendable
	// cutoff were taken although a budget protects them, as
	// cluster-autoscaler assumes (Normal).
	EventPreemptedExpendableUnderBudget = "PreemptedExpendableUnderBudget"
)
