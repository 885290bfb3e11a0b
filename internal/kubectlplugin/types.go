package kubectlplugin

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// The output schema of -o json, -o yaml and the templates. Field names are
// part of the plugin's interface: add fields, never rename or remove one.

// WhyOutput is what "why POD" prints.
type WhyOutput struct {
	// TypeMeta is apiVersion kubectl.budgetguard.io/v1alpha1, kind
	// PodBudgetExplanation.
	metav1.TypeMeta `json:",inline"`
	Pod             PodInfo `json:"pod"`
	// Budgets are the PDBs and PUBs that cover the pod, PDBs first, each
	// kind by name.
	Budgets []BudgetInfo `json:"budgets"`
	// Decisions are the answers now for an eviction and for a preemption
	// delete, in that order.
	Decisions []DecisionInfo `json:"decisions"`
	// Fixes say what would change a denial into an allowed disruption.
	Fixes      []string       `json:"fixes,omitempty"`
	Autoscaler AutoscalerInfo `json:"autoscaler"`
	// Pending is set for a pod that is not bound to a node.
	Pending *PendingInfo `json:"pending,omitempty"`
}

// PodInfo is the pod's identity and health.
type PodInfo struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Phase     string `json:"phase"`
	// Ready is the Ready condition, the health test of the Eviction API.
	Ready bool `json:"ready"`
	// Terminating is true when the pod has a deletionTimestamp.
	Terminating bool   `json:"terminating,omitempty"`
	Node        string `json:"node,omitempty"`
	// Controller is the pod's controller as Kind/name.
	Controller string `json:"controller,omitempty"`
	// Waiting lists containers that wait, as "name: reason".
	Waiting []string `json:"waiting,omitempty"`
	// IgnoresBudgets is true when the pod is Pending, Succeeded, Failed or
	// terminating: it may go without spending any budget.
	IgnoresBudgets bool `json:"ignoresBudgets"`
}

// BudgetInfo is one budget that covers the pod.
type BudgetInfo struct {
	// Kind is PodDisruptionBudget or PodUnavailableBudget.
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Match is how the budget covers the pod: selector, {}, targetRef or
	// related-pub.
	Match string `json:"match"`
	// Healthy, Desired, Allowed and Expected are currentHealthy,
	// desiredHealthy, disruptionsAllowed and expectedPods of a PDB, and
	// currentAvailable, desiredAvailable, unavailableAllowed and
	// totalReplicas of a PUB.
	Healthy  int32 `json:"healthy"`
	Desired  int32 `json:"desired"`
	Allowed  int32 `json:"allowed"`
	Expected int32 `json:"expected"`
	// InFlight is always 0 here: disruptions in flight live in the memory
	// of the scheduler and the descheduler, not in the cluster.
	InFlight int32 `json:"inFlight"`
	// Stale is true when status.observedGeneration is behind generation.
	Stale bool `json:"stale"`
	// UnhealthyPodEvictionPolicy is the PDB's policy, IfHealthyBudget when
	// unset; empty for a PUB.
	UnhealthyPodEvictionPolicy string `json:"unhealthyPodEvictionPolicy,omitempty"`
	// Eviction and Delete are this budget's own answers.
	Eviction VerdictInfo `json:"eviction"`
	Delete   VerdictInfo `json:"delete"`
}

// VerdictInfo is one budget's answer for one operation.
type VerdictInfo struct {
	// Result is "spends" (allowed, consumes the budget), "free" (allowed,
	// consumes nothing) or "denied".
	Result  string `json:"result"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// The results of a decision (DecisionInfo.Result).
const (
	// ResultAllowed: the operation may take the pod now.
	ResultAllowed = "allowed"
	// ResultDenied: a budget denies it.
	ResultDenied = "denied"
	// ResultNotCandidate: budgetguard's preemption never takes the pod,
	// whatever its budgets say: its node is being removed by
	// cluster-autoscaler.
	ResultNotCandidate = "not-candidate"
	// ResultUnknown: the answer depends on something the plugin could not
	// read (the pod's node); Message says what and why.
	ResultUnknown = "unknown"
)

// DecisionInfo is the decision for one operation, over every budget.
type DecisionInfo struct {
	// Operation is "eviction" or "preemption-delete".
	Operation string `json:"operation"`
	// Allowed is true only when Result is "allowed".
	Allowed bool `json:"allowed"`
	// Result is "allowed", "denied", "not-candidate" (preemption-delete
	// only) or "unknown" (preemption-delete only).
	Result string `json:"result"`
	// Spends names the budgets an allowed disruption consumes, as
	// "pdb ns/name".
	Spends []string `json:"spends,omitempty"`
	// Reason is the code of the first denial (budget.Reason), Message
	// every denial's sentence, as the plugins report them; for
	// "not-candidate" the reason is NodeBeingRemoved, for "unknown"
	// NodeUnknown.
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// AutoscalerInfo is what cluster-autoscaler reads on the pod and its node.
type AutoscalerInfo struct {
	// SafeToEvict is the cluster-autoscaler.kubernetes.io/safe-to-evict
	// annotation, empty when absent.
	SafeToEvict string `json:"safeToEvict,omitempty"`
	// NodeTaints are the node's taints as key=value:effect.
	NodeTaints []string `json:"nodeTaints,omitempty"`
	// NodeBeingRemoved: the node has ToBeDeletedByClusterAutoscaler; null
	// when the node could not be read (see NodeUnknown).
	NodeBeingRemoved *bool `json:"nodeBeingRemoved"`
	// NodeDeletionCandidate: the node has
	// DeletionCandidateOfClusterAutoscaler; null when the node could not
	// be read.
	NodeDeletionCandidate *bool `json:"nodeDeletionCandidate"`
	// NodeUnknown says why the pod's node could not be read, e.g. "no
	// permission to get nodes"; empty when it was read or the pod is not
	// bound. When set, nodeTaints, nodeBeingRemoved and
	// nodeDeletionCandidate are unknown.
	NodeUnknown string `json:"nodeUnknown,omitempty"`
}

// PendingInfo is why an unbound pod waits.
type PendingInfo struct {
	// PodScheduled is the pod's PodScheduled condition, when it has one.
	PodScheduled *ConditionInfo `json:"podScheduled,omitempty"`
	// LastRefusal is the latest event with a reason of budgetguard's
	// preemption plugin (PreemptionBlockedByBudget,
	// PreemptionEvictionFailed) on the pod.
	LastRefusal *EventInfo `json:"lastRefusal,omitempty"`
	// NamedBudgets are the budgets that refusal and the PodScheduled
	// message name, as "pdb ns/name".
	NamedBudgets []string `json:"namedBudgets,omitempty"`
	// ScaleUp is whether cluster-autoscaler considers the pod for scale-up
	// (budget.AutoscalerScaleUp, default expendable cutoff).
	ScaleUp ScaleUpInfo `json:"scaleUp"`
}

// ConditionInfo is a pod condition.
type ConditionInfo struct {
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// EventInfo is one event.
type EventInfo struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
	Count   int32  `json:"count"`
}

// ScaleUpInfo is budget.ScaleUpVerdict.
type ScaleUpInfo struct {
	Considered bool   `json:"considered"`
	Reason     string `json:"reason"`
	Message    string `json:"message"`
}

// LintOutput is what "lint" prints.
type LintOutput struct {
	// TypeMeta is apiVersion kubectl.budgetguard.io/v1alpha1, kind
	// BudgetLintReport.
	metav1.TypeMeta `json:",inline"`
	// Namespace is the namespace linted, empty for all namespaces.
	Namespace string        `json:"namespace,omitempty"`
	Findings  []FindingInfo `json:"findings"`
	Errors    int           `json:"errors"`
	Warnings  int           `json:"warnings"`
}

// FindingInfo is one lint finding.
type FindingInfo struct {
	// Severity is "error" or "warning"; an error makes lint exit 1.
	Severity string `json:"severity"`
	// Code is one of budget's Finding* codes, e.g. MultiplePDBs.
	Code string `json:"code"`
	// Objects are the budgets, then at most five pods, involved.
	Objects []ObjectInfo `json:"objects"`
	// MoreObjects counts the pods left out of Objects.
	MoreObjects int    `json:"moreObjects,omitempty"`
	Message     string `json:"message"`
	Fix         string `json:"fix"`
}

// ObjectInfo names an object.
type ObjectInfo struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}
