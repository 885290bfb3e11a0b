package audit

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

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
	// WasPending: the pod's phase was Pending before (bound or not, its
	// containers not all started), which the Eviction API disrupts without
	// consulting any PDB. Read with WasHealthy, it tells a pod the
	// unhealthy-pod eviction policy governs (running, not Ready) from one
	// no budget governs.
	WasPending bool `json:"wasPending,omitempty"`
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

// Violation is a disruption of a healthy pod that left a budget below the
// healthy count it requires at the decision, or of a running, not-Ready
// pod that a PDB's unhealthy-pod eviction policy (IfHealthyBudget)
// protected while the PDB was below it (Disruption.WasHealthy tells the
// two apart), where the budget was short already at what its component
// could know (see docs/audit.md).
type Violation struct {
	Budget     BudgetRef  `json:"budget"`
	Disruption Disruption `json:"disruption"`
	// Healthy is the budget's healthy count right after the disruption,
	// counted from live pods (the highest it reached before the API server
	// answered the request); Desired is what the budget requires.
	Healthy int32 `json:"healthy"`
	Desired int32 `json:"desired"`
}

// Race is a disruption that left a budget below the count it requires,
// but that was right on what its component could know when it decided:
// the budget was whole at the component's knowledge time less the informer
// lag, and a change inside that window made it short (see docs/audit.md).
// A race is counted and shown for every actor; it is never dropped.
type Race struct {
	Budget     BudgetRef  `json:"budget"`
	Disruption Disruption `json:"disruption"`
	// Healthy and Desired are the budget's counts at the decision, as for
	// a Violation; KnownHealthy and KnownDesired are what they were at the
	// knowledge time less the informer lag.
	Healthy      int32 `json:"healthy"`
	Desired      int32 `json:"desired"`
	KnownHealthy int32 `json:"knownHealthy"`
	KnownDesired int32 `json:"knownDesired"`
}

// Disagreement is a disruption by one of budgetguard's components that the
// judge found neither a violation nor a race, after which the budget's own
// status (written by its controller) shows fewer healthy pods than it
// desires, with no other pod of the budget going in between. Either the
// judge or the controller counted wrong; a test fails on it.
type Disagreement struct {
	Budget     BudgetRef  `json:"budget"`
	Disruption Disruption `json:"disruption"`
	// Healthy and Desired are the judge's counts at the decision;
	// StatusHealthy and StatusDesired the status's (PDB currentHealthy and
	// desiredHealthy, PUB currentAvailable and desiredAvailable), observed
	// at StatusTime.
	Healthy       int32     `json:"healthy"`
	Desired       int32     `json:"desired"`
	StatusHealthy int32     `json:"statusHealthy"`
	StatusDesired int32     `json:"statusDesired"`
	StatusTime    time.Time `json:"statusTime"`
}

// Windows are the delays the judge measured in the run and used.
type Windows struct {
	// InformerLag is the 99th percentile of how long after the API server
	// answered a disruption the auditor's informers showed its pod going
	// (LagSamples of them); a change this recent at a component's
	// knowledge time may not have reached it. MaxInformerLag is the
	// largest sample.
	InformerLag    metav1.Duration `json:"informerLag"`
	MaxInformerLag metav1.Duration `json:"maxInformerLag"`
	LagSamples     int             `json:"lagSamples"`
	// RecordDelays are, per component, the delays from a PUB status record
	// it wrote to its first request on the recorded pod after it, sorted.
	RecordDelays map[Component][]metav1.Duration `json:"recordDelays,omitempty"`
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
	// Short says the budget was met and its lowest healthy count then fell
	// below Desired (by a disruption, charged or not, or by pods failing).
	Short bool `json:"short"`
}

// Result is everything the auditor saw.
type Result struct {
	Budgets     []BudgetSummary `json:"budgets"`
	Disruptions []Disruption    `json:"disruptions"`
	Refusals    []Refusal       `json:"apiRefusals"`
	Violations  []Violation     `json:"violations"`
	Races       []Race          `json:"races"`
	// Disagreements fail a test: see Disagreement.
	Disagreements []Disagreement `json:"disagreements"`
	Windows       Windows        `json:"windows"`
}
