package budget

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// MatchKind says how a budget covers a pod.
type MatchKind string

const (
	// MatchSelector: the budget's label selector matches the pod's labels.
	MatchSelector MatchKind = "selector"
	// MatchEverything: a PDB's selector is {}, which covers every pod of
	// its namespace, unlabeled ones too.
	MatchEverything MatchKind = "{}"
	// MatchTargetRef: a PUB's spec.targetRef names the pod's controller (or
	// the Deployment of its ReplicaSet).
	MatchTargetRef MatchKind = "targetRef"
	// MatchRelatedPUB: the pod's kruise.io/related-pub annotation names the PUB.
	MatchRelatedPUB MatchKind = "related-pub"
)

// BudgetVerdict is one covering budget's answer for one operation, alone
// (rule 2, which looks at every PDB together, is not part of it).
type BudgetVerdict struct {
	// Spends is true when the disruption consumes this budget's allowance.
	Spends bool
	// Denial is set when this budget refuses.
	Denial *Denial
}

// CoveringBudget is one budget that covers a pod, with the numbers its
// decision used.
type CoveringBudget struct {
	Ref   BudgetRef
	Match MatchKind
	// PDB or PUB is the budget object, as the Cache holds it.
	PDB *policyv1.PodDisruptionBudget
	PUB *PUB
	// Healthy, Desired and Allowed are currentHealthy, desiredHealthy and
	// disruptionsAllowed for a PDB; currentAvailable, desiredAvailable and
	// unavailableAllowed for a PUB. Expected is expectedPods or totalReplicas.
	Healthy, Desired, Allowed, Expected int32
	// InFlight counts the disruptions this process has started against the
	// budget that its status does not show yet (the ledger).
	InFlight int32
	// Stale is true when status.observedGeneration is behind generation.
	Stale bool
	// UnhealthyPodEvictionPolicy is the PDB's policy with the default
	// filled in ("IfHealthyBudget" when unset); "" for a PUB.
	UnhealthyPodEvictionPolicy string
	Evict, Delete              BudgetVerdict
}

// Explanation is everything a decision for one pod rests on.
type Explanation struct {
	// IgnoresBudgets is rule 1: the pod is Pending, Succeeded or Failed, or
	// terminating, and may go without spending any budget.
	IgnoresBudgets bool
	// Ready is the pod's Ready condition, the health test of the Eviction API.
	Ready   bool
	Budgets []CoveringBudget
	// Evict and Delete are the decisions Decide gives now.
	Evict, Delete Decision
	// Fixes say what would change a denial into an allowed disruption.
	Fixes []string
}

// Explain decides for pod as an eviction and as a preemption delete, and
// returns the covering budgets, each with how it matched, its numbers and
// its own verdict. It reserves nothing.
func (c *Cache) Explain(pod *v1.Pod) Explanation {
	// The ledger's lock first, as in decide, so that the covering budgets
	// and the decisions come from the same state of the ledger.
	c.ledger.mu.RLock()
	defer c.ledger.mu.RUnlock()
	pdbs, pubs := c.covering(pod)
	now := c.clock.Now()
	x := Explanation{IgnoresBudgets: ignoresBudgets(pod), Ready: podReady(pod)}
	x.Evict, _ = c.decide(pod, OperationEvict, nil, now, nil)
	x.Delete, _ = c.decide(pod, OperationDelete, nil, now, nil)

	held := c.ledger.heldBy(podKey{pod.Namespace, pod.Name})
	verdictOf := func(ref BudgetRef, eval func(Operation, pending) verdict, op Operation) BudgetVerdict {
		k := keyOf(ref)
		if x.IgnoresBudgets || c.ledger.holdsIn(held, k, pod.UID, now) {
			return BudgetVerdict{}
		}
		v := eval(op, pending{inflight: c.ledger.inflight(k, now)})
		return BudgetVerdict{Spends: v.spends, Denial: v.denial}
	}
	for _, pdb := range pdbs {
		ref := pdbRef(pdb)
		st := pdb.Status
		b := CoveringBudget{
			Ref: ref, Match: MatchSelector, PDB: pdb,
			Healthy: st.CurrentHealthy, Desired: st.DesiredHealthy, Allowed: st.DisruptionsAllowed, Expected: st.ExpectedPods,
			InFlight:                   c.ledger.inflight(keyOf(ref), now),
			Stale:                      st.ObservedGeneration < pdb.Generation,
			UnhealthyPodEvictionPolicy: string(policyv1.IfHealthyBudget),
		}
		if s := pdb.Spec.Selector; s != nil && len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0 {
			b.Match = MatchEverything
		}
		if p := pdb.Spec.UnhealthyPodEvictionPolicy; p != nil {
			b.UnhealthyPodEvictionPolicy = string(*p)
		}
		eval := func(op Operation, n pending) verdict { return evaluatePDB(pod, pdb, op, n) }
		b.Evict, b.Delete = verdictOf(ref, eval, OperationEvict), verdictOf(ref, eval, OperationDelete)
		x.Budgets = append(x.Budgets, b)
	}
	for _, pub := range pubs {
		ref := pubRef(pub)
		st := pub.Status
		b := CoveringBudget{
			Ref: ref, Match: pubMatch(pod, pub), PUB: pub,
			Healthy: st.CurrentAvailable, Desired: st.DesiredAvailable, Allowed: st.UnavailableAllowed, Expected: st.TotalReplicas,
			InFlight: c.ledger.inflight(keyOf(ref), now),
			Stale:    st.ObservedGeneration < pub.Generation,
		}
		eval := func(op Operation, n pending) verdict { return evaluatePUB(pod, pub, op, n) }
		b.Evict, b.Delete = verdictOf(ref, eval, OperationEvict), verdictOf(ref, eval, OperationDelete)
		x.Budgets = append(x.Budgets, b)
	}
	x.Fixes = fixes(x)
	return x
}

// pubMatch says how a PUB that covers pod matched it. Kruise's targetRef
// takes priority over the selector, so a PUB with a targetRef covers a pod
// either through it or through the annotation.
func pubMatch(pod *v1.Pod, pub *PUB) MatchKind {
	switch {
	case relatedPUB(pod) == pub.Name:
		return MatchRelatedPUB
	case pub.Spec.TargetReference != nil:
		return MatchTargetRef
	}
	return MatchSelector
}

// fixes says, for each denial of x, what would let the pod go.
func fixes(x Explanation) []string {
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for _, d := range append(append([]Denial{}, x.Evict.Denials...), x.Delete.Denials...) {
		if d.Reason != ReasonMultiplePDBs {
			continue
		}
		names := make([]string, 0, len(d.Budgets))
		for _, r := range d.Budgets {
			names = append(names, r.String())
		}
		sort.Strings(names)
		add(fmt.Sprintf("remove the overlap of %s with %s: change a selector so that one PodDisruptionBudget covers the pod",
			names[0], strings.Join(names[1:], ", ")))
	}
	for _, b := range x.Budgets {
		for _, v := range []BudgetVerdict{b.Evict, b.Delete} {
			if v.Denial != nil {
				for _, f := range budgetFixes(x.Ready, b, v.Denial.Reason) {
					add(f)
				}
			}
		}
	}
	return out
}

// budgetFixes is what would lift one budget's denial.
func budgetFixes(ready bool, b CoveringBudget, reason Reason) []string {
	unit, controller := "healthy", "the disruption controller"
	if b.PUB != nil {
		unit, controller = "available", "OpenKruise's PUB controller"
	}
	switch reason {
	case ReasonInsufficientBudget:
		if b.PDB != nil && b.Expected == 0 && usesScale(b.PDB.Spec) {
			// The disruption controller found no scale for the pods: more
			// healthy pods would not help.
			return []string{fmt.Sprintf("use an integer minAvailable on %s: it expects 0 pods because %s, and the pods have none", b.Ref, disruptionControllerScaleMsg)}
		}
		// Spending needs allowed - inflight >= 1; one more healthy pod
		// raises allowed by one.
		need := 1 + b.InFlight - b.Allowed
		var out []string
		if b.PDB != nil && !ready {
			// Rule 3: a not-ready pod goes free once healthy - inflight
			// reaches desired.
			need = min(need, max(1, b.Desired-(b.Healthy-b.InFlight)))
			if b.UnhealthyPodEvictionPolicy != string(policyv1.AlwaysAllow) {
				out = append(out, fmt.Sprintf("set unhealthyPodEvictionPolicy: AlwaysAllow on %s (the pod is not Ready)", b.Ref))
			}
		}
		more := fmt.Sprintf("%d more %s %s under %s", need, unit, plural(need, "pod"), b.Ref)
		if fix := growthDoesNotHelp(b); fix != "" {
			more = fix
		}
		return append([]string{more}, out...)
	case ReasonStaleStatus:
		generation := int64(0)
		if b.PDB != nil {
			generation = b.PDB.Generation
		} else if b.PUB != nil {
			generation = b.PUB.Generation
		}
		return []string{fmt.Sprintf("wait until %s has processed generation %d of %s", controller, generation, b.Ref)}
	case ReasonNegativeAllowed:
		return []string{fmt.Sprintf("wait until %s recomputes the status of %s", controller, b.Ref)}
	case ReasonStatusBehindPods:
		return []string{fmt.Sprintf("wait until %s counts the covered pods' readiness in the status of %s, or until enough of them are Ready again", controller, b.Ref)}
	case ReasonTooManyDisruptedPods:
		return []string{fmt.Sprintf("wait until %s confirms or expires the disrupted pods in the status of %s", controller, b.Ref)}
	case ReasonUnknownUnhealthyPodEvictionPolicy:
		return []string{fmt.Sprintf("set unhealthyPodEvictionPolicy: AlwaysAllow or IfHealthyBudget on %s", b.Ref)}
	}
	return nil
}

func plural(n int32, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// Count is n with its noun, singular for 1: "1 node", "2 nodes". The
// plugins count with it in the sentences users read (events, statuses).
func Count(n int, noun string) string {
	return fmt.Sprintf("%d %s", n, plural(int32(n), noun))
}

// growthDoesNotHelp says what to change when one more pod would not let a
// budget allow a disruption, because what it asks for grows with the pods:
// maxUnavailable 0 or 0%, or a minAvailable percentage that rounds up to
// every pod. It is "" when more pods would help.
func growthDoesNotHelp(b CoveringBudget) string {
	var maxUnavailable, minAvailable *intstr.IntOrString
	switch {
	case b.PDB != nil:
		maxUnavailable, minAvailable = b.PDB.Spec.MaxUnavailable, b.PDB.Spec.MinAvailable
	case b.PUB != nil:
		maxUnavailable, minAvailable = b.PUB.Spec.MaxUnavailable, b.PUB.Spec.MinAvailable
	}
	n := int(b.Expected) + 1
	if maxUnavailable != nil {
		if m, err := intstr.GetScaledValueFromIntOrPercent(maxUnavailable, n, true); err == nil && m <= 0 {
			return fmt.Sprintf("set maxUnavailable to at least 1 on %s: with maxUnavailable %s more pods would not help", b.Ref, maxUnavailable.String())
		}
		return ""
	}
	if minAvailable != nil && minAvailable.Type == intstr.String {
		if m, err := intstr.GetScaledValueFromIntOrPercent(minAvailable, n, true); err == nil && m >= n {
			return fmt.Sprintf("lower minAvailable on %s: %s of the pods rounds up to all of them, so more pods would not help", b.Ref, minAvailable.String())
		}
	}
	return ""
}
