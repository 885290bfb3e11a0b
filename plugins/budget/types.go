package budget

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// Operation is the kind of voluntary disruption a caller wants to perform.
type Operation string

const (
	// OperationDelete is a direct delete, as upstream preemption does it.
	// For a PodUnavailableBudget it is the DELETE operation.
	OperationDelete Operation = "Delete"
	// OperationEvict goes through the policy/v1 Eviction API.
	// For a PodUnavailableBudget it is the EVICT operation.
	OperationEvict Operation = "Evict"
	// OperationDeleteOrEvict is preemption's Delete actuation: the pod is
	// deleted, unless its disruption spends a PodDisruptionBudget (now, or
	// held by an earlier reservation); then it is evicted, so that the API
	// server records it in the PDB's status. Its PDBs are decided as for a
	// delete, its PodUnavailableBudgets under the operation it undergoes.
	OperationDeleteOrEvict Operation = "DeleteOrEvict"
)

// forPDB is the operation op's PodDisruptionBudgets are decided under.
func (op Operation) forPDB() Operation {
	if op == OperationDeleteOrEvict {
		return OperationDelete
	}
	return op
}

// forPUB is the operation op's PodUnavailableBudgets are decided under,
// given whether the pod's disruption spends a PodDisruptionBudget.
func (op Operation) forPUB(spendsPDB bool) Operation {
	switch {
	case op != OperationDeleteOrEvict:
		return op
	case spendsPDB:
		return OperationEvict
	}
	return OperationDelete
}

// BudgetKind names the API kind of a budget.
type BudgetKind string

const (
	// KindPDB is a policy/v1 PodDisruptionBudget.
	KindPDB BudgetKind = "PodDisruptionBudget"
	// KindPUB is an OpenKruise PodUnavailableBudget (policy.kruise.io,
	// read at v1beta1 where served, else v1alpha1).
	KindPUB BudgetKind = "PodUnavailableBudget"
)

// short is the lowercase abbreviation operators know from kubectl.
func (k BudgetKind) short() string {
	switch k {
	case KindPDB:
		return "pdb"
	case KindPUB:
		return "pub"
	default:
		return strings.ToLower(string(k))
	}
}

// BudgetRef identifies one budget object.
type BudgetRef struct {
	Kind      BudgetKind
	Namespace string
	Name      string
	UID       types.UID
}

// String renders the budget as "pdb shop/web".
func (r BudgetRef) String() string {
	return fmt.Sprintf("%s %s/%s", r.Kind.short(), r.Namespace, r.Name)
}

// Reason is a stable, machine-readable code for why a disruption was denied.
// Codes are used as metric label values and event reasons; never rename one.
type Reason string

const (
	// ReasonMultiplePDBs: more than one PodDisruptionBudget covers the pod;
	// the Eviction API answers 500 for such pods.
	ReasonMultiplePDBs Reason = "MultiplePDBs"
	// ReasonUnknownUnhealthyPodEvictionPolicy: a not-ready pod under a PDB
	// whose unhealthyPodEvictionPolicy this version does not know (KEP-3017
	// tells clients to refuse).
	ReasonUnknownUnhealthyPodEvictionPolicy Reason = "UnknownUnhealthyPodEvictionPolicy"
	// ReasonStaleStatus: the PDB's status.observedGeneration is behind its
	// generation, so its numbers cannot be trusted (the Eviction API answers 429).
	ReasonStaleStatus Reason = "StaleStatus"
	// ReasonNegativeAllowed: status.disruptionsAllowed is negative (403).
	ReasonNegativeAllowed Reason = "NegativeDisruptionsAllowed"
	// ReasonTooManyDisruptedPods: more disruptions are awaiting confirmation
	// by the budget's controller than the API server accepts (403).
	ReasonTooManyDisruptedPods Reason = "TooManyDisruptedPods"
	// ReasonInsufficientBudget: the budget allows no further disruption, once
	// disruptions already in flight are counted (429 for PDBs, 403 for PUBs).
	ReasonInsufficientBudget Reason = "InsufficientBudget"
	// ReasonStatusBehindPods: the status allows the disruption, but fewer
	// covered pods are healthy now than it counts (a pod turned not Ready
	// and the budget's controller has not written the status since); the
	// disruption would leave the application below its budget.
	ReasonStatusBehindPods Reason = "StatusBehindPods"
	// ReasonInvalidPUB: the PUB cannot be applied as written (its
	// spec.ignoredPodSelector does not parse); OpenKruise's webhook answers
	// every protected operation of its pods with an error.
	ReasonInvalidPUB Reason = "InvalidPUB"
)

// Denial says which budget refused a disruption, by which rule, with the
// numbers, in a sentence an operator can act on.
type Denial struct {
	// Budgets are the budgets that refused. It has one element except for
	// ReasonMultiplePDBs, where it lists every covering PDB.
	Budgets []BudgetRef
	Reason  Reason
	Message string
}

func (d Denial) String() string { return d.Message }

// Decision is the answer for one pod.
type Decision struct {
	// Allowed is true when every covering budget allows the disruption.
	Allowed bool
	// Spends lists the budgets whose allowance this disruption consumes.
	// An allowed decision with no spends disrupts nothing protected: a
	// terminal pod, an unhealthy pod under AlwaysAllow, a pod under no budget.
	Spends []BudgetRef
	// Denials explains a refusal; empty when Allowed.
	Denials []Denial
}

// Free reports whether the disruption is allowed and spends no budget.
func (d Decision) Free() bool { return d.Allowed && len(d.Spends) == 0 }

// Reason is the code of the first denial, or "" when allowed.
func (d Decision) Reason() Reason {
	if len(d.Denials) == 0 {
		return ""
	}
	return d.Denials[0].Reason
}

// Message joins every denial's message; "" when allowed.
func (d Decision) Message() string {
	msgs := make([]string, 0, len(d.Denials))
	for _, den := range d.Denials {
		msgs = append(msgs, den.Message)
	}
	return strings.Join(msgs, "; ")
}
