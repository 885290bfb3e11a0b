package budget

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

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

// EventRelated is the object to name as the related object of an event
// about a refusal by budget r (a PartialObjectMetadata carrying the budget's
// kind, API version, namespace, name and UID). The events library
// (k8s.io/client-go/tools/events) folds an event into the series of an
// earlier one on the same object with the same type, reason, action and
// related object, and the series keeps the earlier note: without the budget
// as the related object, a refusal naming pdb A after one naming pdb B, or
// after "budget cache not synced", would show only the earlier note. A PUB
// is named at the version the cache reads (v1alpha1 until it has chosen).
func (c *Cache) EventRelated(r BudgetRef) runtime.Object {
	apiVersion := "policy/v1"
	if r.Kind == KindPUB {
		apiVersion = PUBGroupVersion
		if v := c.PUBVersion(); v != "" {
			apiVersion = v
		}
	}
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: apiVersion, Kind: string(r.Kind)},
		ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: r.Name, UID: r.UID},
	}
}

// FirstDenied is the first budget that refused d, if any.
func (d Decision) FirstDenied() (BudgetRef, bool) {
	for _, den := range d.Denials {
		if len(den.Budgets) > 0 {
			return den.Budgets[0], true
		}
	}
	return BudgetRef{}, false
}
