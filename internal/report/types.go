package report

import (
	"time"

	"github.com/budgetguard/budgetguard/internal/audit"
)

// SchemaVersion is the version of the JSON report; docs/report.md documents it.
const SchemaVersion = "sandbox.budgetguard.io/report/v2"

// Mode says which plugins a run used.
type Mode string

const (
	// ModeUpstream: DefaultPreemption and DefaultEvictor only.
	ModeUpstream Mode = "upstream"
	// ModeBudgetguard: BudgetAwarePreemption and BudgetAwareEvictor.
	ModeBudgetguard Mode = "budgetguard"
)

// Report is what `sandbox run` prints.
type Report struct {
	SchemaVersion string `json:"schemaVersion"`
	Scenario      string `json:"scenario"`
	Path          string `json:"path"`
	Runs          []Run  `json:"runs"`
}

// Run is one execution of the scenario.
type Run struct {
	Mode     Mode          `json:"mode"`
	Duration time.Duration `json:"durationNanoseconds"`
	// Refusals counts budgetguard's own refusals by component and reason,
	// read from its plugins' metrics (always empty in upstream mode).
	Refusals []PluginRefusal `json:"pluginRefusals"`
	Audit    audit.Result    `json:"audit"`
	// Notes are step outcomes worth telling, such as a wait that timed out
	// with continueOnTimeout.
	Notes []string `json:"notes,omitempty"`
	// Steps are the scenario's steps as they ran, with when each began and
	// ended, so that disruptions can be told per step.
	Steps []Step `json:"steps"`
	// Pods are the scenario's own Pod manifests (preemptors, typically) as
	// they were at the end of the run.
	Pods []Pod `json:"pods"`
	// Timeline is what only the HTML page (WriteHTML) draws; it is not
	// part of the JSON report.
	Timeline Timeline `json:"-"`
}

// Timeline is a run over time, for the HTML page: each budget's healthy
// count, and when budgetguard's plugins refused.
type Timeline struct {
	// Budgets is each budget's healthy count over the run, as the
	// auditor's replay counted it (audit.Auditor.HealthySeries).
	Budgets []audit.BudgetSeries
	// Refusals are budgetguard's plugins' refusals, each with its time, in
	// time order: the scheduler's PreemptionBlockedByBudget events, and the
	// descheduler's refusals of the evictions it asked for (not the pods
	// its filters kept from the strategy). Empty in upstream mode.
	Refusals []TimedRefusal
}

// TimedRefusal is one refusal by one of budgetguard's plugins.
type TimedRefusal struct {
	Time      time.Time
	Component audit.Component
	// Reason is the descheduler's refusal reason (InsufficientBudget, ...),
	// or the scheduler's event reason (PreemptionBlockedByBudget).
	Reason string
	// Namespace and Name are the refused pod (the descheduler) or the
	// preemptor (the scheduler).
	Namespace string
	Name      string
	// Message is the refusal's sentence, or the event's note.
	Message string
}

// Step is one step of the scenario as it ran.
type Step struct {
	// Number is the step's 1-based position, as the progress output and
	// the notes give it ("step 3/7"); the scenario's errors name it
	// steps[Number-1].
	Number      int       `json:"number"`
	Description string    `json:"description"`
	Began       time.Time `json:"began"`
	Ended       time.Time `json:"ended"`
}

// Pod is a pod of the scenario at the end of the run.
type Pod struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Node is the node the pod is bound to; "" while it is Pending.
	Node string `json:"node,omitempty"`
	// NominatedNode is status.nominatedNodeName.
	NominatedNode string `json:"nominatedNode,omitempty"`
	// Unschedulable: the PodScheduled condition is False with reason
	// Unschedulable.
	Unschedulable bool `json:"unschedulable"`
	// Event is the last scheduling event about the pod (FailedScheduling,
	// PreemptionBlockedByBudget, ...); nil when there was none.
	Event *Event `json:"event,omitempty"`
	// Blocked counts the PreemptionBlockedByBudget events about the pod:
	// budgetguard's blocked preemptions for it.
	Blocked int `json:"blocked"`
	// BlockedMessage is the note of the last PreemptionBlockedByBudget
	// event: which budgets blocked the preemption, with their numbers.
	BlockedMessage string `json:"blockedMessage,omitempty"`
	// Victims counts the pods the scheduler preempted for this pod, from
	// their Preempted events.
	Victims int `json:"victims"`
	// AutoscalerScaleUp is cluster-autoscaler's view of the pod
	// (budget.AutoscalerScaleUp with the default expendable cutoff).
	AutoscalerScaleUp bool `json:"autoscalerScaleUp"`
	// AutoscalerReason is the verdict's reason code, such as Considered,
	// Bound or Nominated.
	AutoscalerReason string `json:"autoscalerReason"`
}

// Event is a Kubernetes event about a pod.
type Event struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
	// Count is how many times the event was seen (its series).
	Count int `json:"count"`
}

// PluginRefusal is a count of refusals of one reason by one plugin: once
// per pod per descheduling loop, and once per pod per scheduling cycle.
type PluginRefusal struct {
	Component audit.Component `json:"component"`
	Reason    string          `json:"reason"`
	Count     int             `json:"count"`
	// Filtered: the descheduler's filters kept these pods from the
	// strategy, which never asked to evict them; they are not refusals of
	// an eviction the strategy meant (strategies filter every pod they
	// list). Always false for the scheduler.
	Filtered bool `json:"filtered,omitempty"`
	// Pods are the refused pods, each with the refusal's sentence.
	Pods []RefusedPod `json:"pods"`
}

// RefusedPod is a pod that a plugin refused to disrupt (descheduler) or a
// preemptor whose preemption a budget blocked (scheduler).
type RefusedPod struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Message is the refusal's sentence, which names the budget and its
	// numbers (for a preemptor, its last PreemptionBlockedByBudget event).
	Message string `json:"message"`
	// Count is how many of the refusals were of this pod.
	Count int `json:"count"`
}
