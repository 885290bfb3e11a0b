package audit

import "time"

// Component names the actor of a disruption, from the user agent of the
// request in kube-apiserver's audit log.
type Component string

// Components the sandbox runs; anything else is ComponentOther.
const (
	ComponentScheduler   Component = "scheduler"
	ComponentDescheduler Component = "descheduler"
	ComponentOther       Component = "other"
)

// Action is what the request did to the pod.
type Action string

const (
	ActionEvict  Action = "evict"  // POST pods/eviction
	ActionDelete Action = "delete" // DELETE pods
)

// Budget kinds, as BudgetRef.Kind spells them.
const (
	KindPDB = "PodDisruptionBudget"
	KindPUB = "PodUnavailableBudget"
)

// BudgetRef names a budget.
type BudgetRef struct {
	Kind      string `json:"kind"` // PodDisruptionBudget or PodUnavailableBudget
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// Disruption is one voluntary disruption the API server carried out: an
// eviction it accepted, or a delete of a pod that was not already
// terminating.
type Disruption struct {
	Time      time.Time   `json:"time"`
	Component Component   `json:"component"`
	UserAgent string      `json:"userAgent"`
	Action    Action      `json:"action"`
	Namespace string      `json:"namespace"`
	Pod       string      `json:"pod"`
	Budgets   []BudgetRef `json:"budgets"`
	// WasHealthy: the pod was Ready and not terminating before.
	WasHealthy bool `json:"wasHealthy"`
}

// Refusal is a disruption request the API server refused (for an
// eviction, usually 429 because a PDB forbade it).
type Refusal struct {
	Time      time.Time `json:"time"`
	Component Component `json:"component"`
	UserAgent string    `json:"userAgent"`
	Action    Action    `json:"action"`
	Namespace string    `json:"namespace"`
	Pod       string    `json:"pod"`
	Code      int       `json:"code"`
	Message   string    `json:"message,omitempty"`
}

// Violation is a disruption that left a budget below the healthy count it
// requires.
type Violation struct {
	Budget     BudgetRef  `json:"budget"`
	Disruption Disruption `json:"disruption"`
	// Healthy is the budget's healthy count right after the disruption,
	// counted from live pods (the highest it reached before the API server
	// answered the request); Desired is what the budget requires.
	Healthy int32 `json:"healthy"`
	Desired int32 `json:"desired"`
}

// BudgetSummary is one budget over the run.
type BudgetSummary struct {
	Budget BudgetRef `json:"budget"`
	// Desired is the healthy count the budget requires (PDB
	// status.desiredHealthy, PUB status.desiredAvailable) at its lowest
	// point.
	Desired int32 `json:"desired"`
	// Met says Desired was above 0 and the healthy count reached it at some point;
	// LowestHealthy is only tracked from then on (so a workload that is
	// still starting up is not reported as broken).
	Met bool `json:"met"`
	// LowestHealthy is the lowest healthy count seen, counted from live
	// pods, since the budget was first met.
	LowestHealthy int32 `json:"lowestHealthy"`
	// Disruptions counts the disruptions of pods the budget covers.
	Disruptions int `json:"disruptions"`
}

// Result is everything the auditor saw.
type Result struct {
	Budgets     []BudgetSummary `json:"budgets"`
	Disruptions []Disruption    `json:"disruptions"`
	Refusals    []Refusal       `json:"apiRefusals"`
	Violations  []Violation     `json:"violations"`
}
