package scenario

import (
	"encoding/json"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// APIVersion and Kind of a scenario's header document.
const (
	APIVersion = "sandbox.budgetguard.io/v1alpha1"
	Kind       = "Scenario"
)

// PhaseAnnotation on a manifest names the phase that applies it; manifests
// without it belong to DefaultPhase.
const (
	PhaseAnnotation = "sandbox.budgetguard.io/phase"
	DefaultPhase    = "setup"
)

// Readiness values a SetReadiness step may set (the sandbox kubelet's
// sandbox.budgetguard.io/readiness annotation): ready, never, crashloop, or
// after=<duration>.
const ReadinessAnnotation = "sandbox.budgetguard.io/readiness"

// Scenario is a parsed, validated scenario file: a header document followed
// by standard manifests.
type Scenario struct {
	// Path is the file the scenario was read from ("" when parsed from
	// bytes); error messages and the report name it.
	Path        string
	Name        string
	Description string
	// SchedulerConfig and DeschedulerPolicy are the files to use, resolved
	// relative to the scenario file's directory. "" means the shipped
	// manifests (manifests/scheduler/scheduler-config.yaml and
	// manifests/descheduler/policy.yaml).
	SchedulerConfig   string
	DeschedulerPolicy string
	// DisablePUBWebhook runs the control plane without its stand-in for
	// OpenKruise's PUB webhook (header pubWebhook: false), as a cluster
	// without Kruise's webhook: nothing in the API server enforces a
	// PodUnavailableBudget then.
	DisablePUBWebhook bool
	Steps             []Step
	// Expect is what each mode's run must show; nil when the header has no
	// expect block.
	Expect *Expect
	// Objects are the manifests in document order.
	Objects []Object
}

// Object is one manifest of the scenario.
type Object struct {
	// Document is the 0-based index of the YAML document in the file (the
	// header is document 0).
	Document int
	Phase    string
	GVK      schema.GroupVersionKind
	// Object is the typed object: *corev1.Namespace, *corev1.Node,
	// *schedulingv1.PriorityClass, *appsv1.Deployment, *appsv1.ReplicaSet,
	// *appsv1.StatefulSet, *corev1.Pod, *policyv1.PodDisruptionBudget or
	// *kruisepolicyv1alpha1.PodUnavailableBudget.
	Object runtime.Object
}

// Step is one step of the header; exactly one field is set.
type Step struct {
	// Index is the 0-based position in steps; errors name it as steps[i].
	Index        int
	Apply        *ApplyStep
	Wait         *WaitStep
	SetReadiness *SetReadinessStep
	Deschedule   *DescheduleStep
	Settle       *SettleStep
	Delete       *DeleteStep
	Patch        *PatchStep
	StaysPending *StaysPendingStep
}

// DeleteStep deletes an object the scenario created.
type DeleteStep struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// PatchStep changes an object the scenario created with a JSON merge patch
// (RFC 7386), such as {spec: {maxUnavailable: 0}} on a budget or
// {spec: {replicas: 2}} on a workload.
type PatchStep struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Patch is the merge patch, as JSON.
	Patch json.RawMessage `json:"patch"`
}

// StaysPendingStep watches a pod for a duration. The step passes whether or
// not the pod is bound meanwhile; a pod that was bound is told in the
// progress output, and the expect block is where a run asserts it.
type StaysPendingStep struct {
	Namespace string        `json:"namespace"`
	Name      string        `json:"name"`
	For       time.Duration `json:"-"`
}

// ApplyStep creates every object of a phase, in document order.
type ApplyStep struct {
	Phase string `json:"phase"`
}

// WaitStep waits until its condition holds. Exactly one condition is set.
type WaitStep struct {
	PodsReady    *PodsReadyCondition    `json:"podsReady,omitempty"`
	PodScheduled *PodScheduledCondition `json:"podScheduled,omitempty"`
	// BudgetsObserved waits until every PDB's status has observed its
	// generation and every PUB has a status.
	BudgetsObserved bool `json:"budgetsObserved,omitempty"`
	// Timeout bounds the wait; default 60s.
	Timeout time.Duration `json:"-"`
	// ContinueOnTimeout makes a timeout a note in the progress output
	// instead of an error (for conditions that hold in one mode only, such
	// as a preemptor that budgetguard keeps pending).
	ContinueOnTimeout bool `json:"continueOnTimeout,omitempty"`
}

// PodsReadyCondition holds when at least Count pods in Namespace matching
// Selector are Ready and not terminating.
type PodsReadyCondition struct {
	Namespace string `json:"namespace"`
	Selector  string `json:"selector"`
	Count     int    `json:"count"`
}

// PodScheduledCondition holds when the pod is bound to a node.
type PodScheduledCondition struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// SetReadinessStep sets the readiness annotation on the live pods in
// Namespace matching Selector.
type SetReadinessStep struct {
	Namespace string `json:"namespace"`
	Selector  string `json:"selector"`
	Readiness string `json:"readiness"`
}

// DescheduleStep runs the descheduler once with the scenario's policy.
type DescheduleStep struct{}

// SettleStep waits a fixed time so controllers and the kubelet catch up.
type SettleStep struct {
	Duration time.Duration
}
