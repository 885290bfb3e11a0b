package budget

import (
	"fmt"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	kruisepolicy "github.com/budgetguard/budgetguard/apis/kruise/policy/v1beta1"
)

// PUB is a PodUnavailableBudget as the Cache reads it: in the shape of
// policy.kruise.io/v1beta1, whichever version the API serves (a v1alpha1
// object is converted as OpenKruise converts it; see
// apis/kruise/policy/v1beta1).
type PUB = kruisepolicy.PodUnavailableBudget

// MaxDisruptedPods is the most unconfirmed disruptions a budget's status may
// list before the API server refuses more (the Eviction API's
// MaxDisruptedPodSize, and Kruise's MaxUnavailablePodSize).
const MaxDisruptedPods = 2000

// Annotations Kruise puts on pods and PUBs.
const (
	// AnnotationPodRelatedPUB names, on a pod, the PUB OpenKruise's
	// webhook tied it to (PUB v1beta1 and the Kruise releases that serve
	// it).
	AnnotationPodRelatedPUB = "pub.kruise.io/related-pub"
	// AnnotationRelatedPUB is the older name of AnnotationPodRelatedPUB,
	// which OpenKruise still reads when the newer one is absent.
	AnnotationRelatedPUB = "kruise.io/related-pub"
	// AnnotationPUBNoProtect set to a true boolean ("true", "1", ...) on a
	// pod exempts it from every PUB (deprecated by OpenKruise for a PUB's
	// spec.ignoredPodSelector, still honoured).
	AnnotationPUBNoProtect = kruisepolicy.PodPubNoProtectionAnnotation
	// AnnotationPUBProtectOperations on a PUB lists the operations it
	// protects, comma separated, where spec.protectOperations is empty
	// (its v1alpha1 form); neither means DELETE,UPDATE,EVICT.
	AnnotationPUBProtectOperations = kruisepolicy.PubProtectOperationAnnotation
	// AnnotationPUBProtectTotalReplicas is the v1alpha1 form of a PUB's
	// spec.protectTotalReplicas.
	AnnotationPUBProtectTotalReplicas = kruisepolicy.PubProtectTotalReplicasAnnotation
)

// relatedPUB is the name of the PUB pod's annotation ties it to, as
// OpenKruise reads it: pub.kruise.io/related-pub, else the deprecated
// kruise.io/related-pub; "" when neither is set.
func relatedPUB(pod *v1.Pod) string {
	if name := pod.Annotations[AnnotationPodRelatedPUB]; name != "" {
		return name
	}
	return pod.Annotations[AnnotationRelatedPUB]
}

// ignoresBudgets is rule 1: a pod that is Pending, Succeeded or Failed, or
// already being deleted, may go and spends no budget. It mirrors the
// Eviction API's canIgnorePDB.
func ignoresBudgets(pod *v1.Pod) bool {
	switch pod.Status.Phase {
	case v1.PodPending, v1.PodSucceeded, v1.PodFailed:
		return true
	}
	return pod.DeletionTimestamp != nil
}

// podReady is the health test of the Eviction API and the disruption
// controller: the Ready condition is True.
func podReady(pod *v1.Pod) bool {
	for i := range pod.Status.Conditions {
		c := &pod.Status.Conditions[i]
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// verdict is one budget's answer for one pod.
type verdict struct {
	spends bool
	denial *Denial
	// recorded is set when the pod spends nothing new because the status
	// records it as disrupted already; the live count still decides
	// whether a Ready pod may go (see Cache.liveShortfall).
	recorded bool
}

var free = verdict{}

// alreadyRecorded is the verdict for a pod the budget's status records as
// disrupted already.
var alreadyRecorded = verdict{recorded: true}

func deny(ref BudgetRef, reason Reason, format string, args ...any) verdict {
	return verdict{denial: &Denial{
		Budgets: []BudgetRef{ref},
		Reason:  reason,
		Message: ref.String() + ": " + fmt.Sprintf(format, args...),
	}}
}

// pending is what a budget's status does not show yet: inflight
// disruptions budgetguard has started (the ledger's reservations, other
// pods' disruptions), and planned ones, the earlier victims of the same
// plan as the pod being decided, which nothing has started.
type pending struct{ inflight, planned int32 }

func (p pending) total() int32 { return p.inflight + p.planned }

// shortfall is the end of an insufficient-budget sentence: the disruptions
// already in flight, and what the disruption needs when the pod is one of
// several victims of a plan, e.g. ", 1 in flight; needs 2 (this pod and 1
// other of the same disruption)".
func (p pending) shortfall() string {
	var b strings.Builder
	if p.inflight > 0 {
		fmt.Fprintf(&b, ", %d in flight", p.inflight)
	}
	if p.planned > 0 {
		others := "other"
		if p.planned > 1 {
			others = "others"
		}
		fmt.Fprintf(&b, "; needs %d (this pod and %d %s of the same disruption)", p.planned+1, p.planned, others)
	}
	return b.String()
}

// evaluatePDB applies rules 3 and 4 (docs/design.md, Budget rules) for one
// covering PDB, counting n against it.
func evaluatePDB(pod *v1.Pod, pdb *policyv1.PodDisruptionBudget, op Operation, n pending) verdict {
	st := &pdb.Status
	inflight := n.total()
	healthy := st.CurrentHealthy - inflight

	// Rule 3: a not-ready pod.
	if !podReady(pod) {
		policy := pdb.Spec.UnhealthyPodEvictionPolicy
		switch {
		case !protectsUnhealthy(pdb):
			return free
		case policy == nil || *policy == policyv1.IfHealthyBudget:
			if healthy >= st.DesiredHealthy && st.DesiredHealthy > 0 {
				return free
			}
			// The application is disrupted: the pod needs the budget.
		default:
			return deny(pdbRef(pdb), ReasonUnknownUnhealthyPodEvictionPolicy,
				"unhealthyPodEvictionPolicy %q is not one of AlwaysAllow, IfHealthyBudget; a pod that is not ready is refused",
				*policy)
		}
	}

	// Rule 4, in the Eviction API's order.
	if st.ObservedGeneration < pdb.Generation {
		return deny(pdbRef(pdb), ReasonStaleStatus,
			"status is stale (observedGeneration %d < generation %d); the disruption controller has not processed the latest spec",
			st.ObservedGeneration, pdb.Generation)
	}
	if st.DisruptionsAllowed < 0 {
		return deny(pdbRef(pdb), ReasonNegativeAllowed, "disruptionsAllowed is negative (%d)", st.DisruptionsAllowed)
	}
	if n := len(st.DisruptedPods); n > MaxDisruptedPods {
		return deny(pdbRef(pdb), ReasonTooManyDisruptedPods,
			"%d disrupted pods await confirmation by the disruption controller (at most %d)", n, MaxDisruptedPods)
	}
	if _, ok := st.DisruptedPods[pod.Name]; ok && op == OperationDelete {
		// The API server has counted this pod already; upstream preemption
		// does not charge it again. An eviction is charged again by the
		// API server, so it falls through.
		return alreadyRecorded
	}
	if st.DisruptionsAllowed-inflight < 1 {
		return deny(pdbRef(pdb), ReasonInsufficientBudget, "%s", pdbNumbers(st, n, podReady(pod)))
	}
	return verdict{spends: true}
}

// unreadyDisrupted opens a refusal of a not-Ready pod that rule 3 left to
// the budget because the application is disrupted.
const unreadyDisrupted = "pod is not ready and the application is disrupted; "

// protectsUnhealthy reports whether pdb's unhealthy-pod eviction policy
// protects its not-Ready pods while the application is disrupted (rule 3):
// IfHealthyBudget, also when unset; AlwaysAllow does not. A policy this
// version does not know is refused before this matters.
func protectsUnhealthy(pdb *policyv1.PodDisruptionBudget) bool {
	p := pdb.Spec.UnhealthyPodEvictionPolicy
	return p == nil || *p != policyv1.AlwaysAllow
}

func pdbNumbers(st *policyv1.PodDisruptionBudgetStatus, n pending, ready bool) string {
	var b strings.Builder
	if !ready {
		b.WriteString(unreadyDisrupted)
	}
	fmt.Fprintf(&b, "%d healthy, %d desired, %d %s allowed%s", st.CurrentHealthy, st.DesiredHealthy, st.DisruptionsAllowed,
		plural(st.DisruptionsAllowed, "disruption"), n.shortfall())
	return b.String()
}

// pubProtects reports whether the PUB protects operation op, as OpenKruise
// reads it (pubcontrol's getPubProtectOperations): spec.protectOperations,
// else the annotation, else DELETE, UPDATE and EVICT.
func pubProtects(pub *PUB, op Operation) bool {
	want := kruisepolicy.PubDeleteOperation
	if op == OperationEvict {
		want = kruisepolicy.PubEvictOperation
	}
	if len(pub.Spec.ProtectOperations) > 0 {
		for _, o := range pub.Spec.ProtectOperations {
			if o == want {
				return true
			}
		}
		return false
	}
	value := pub.Annotations[AnnotationPUBProtectOperations]
	if strings.Trim(value, ", ") == "" {
		return true
	}
	for _, o := range strings.Split(value, ",") {
		if kruisepolicy.PubOperation(strings.TrimSpace(o)) == want {
			return true
		}
	}
	return false
}

// pubNoProtect reports whether pod opts out of every PUB, as OpenKruise
// parses the annotation (a Go boolean).
func pubNoProtect(pod *v1.Pod) bool {
	v, ok := pod.Annotations[AnnotationPUBNoProtect]
	if !ok {
		return false
	}
	b, err := strconv.ParseBool(v)
	return err == nil && b
}

// pubIgnores reports whether the PUB's spec.ignoredPodSelector selects pod.
// An empty selector selects nothing; one that does not parse is an error,
// which OpenKruise's webhook answers by refusing the operation.
func pubIgnores(pub *PUB, pod *v1.Pod) (bool, error) {
	if pub.Spec.IgnoredPodSelector == nil {
		return false, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(pub.Spec.IgnoredPodSelector)
	if err != nil {
		return false, fmt.Errorf("spec.ignoredPodSelector: %w", err)
	}
	if sel.Empty() {
		return false, nil
	}
	return sel.Matches(labels.Set(pod.Labels)), nil
}

// pubExempts reports whether pub leaves pod to go for op whatever its
// numbers, in the order of OpenKruise's PodUnavailableBudgetValidatePod: the
// pod opts out or does not count as available (healthyForPUB: not Running
// and Ready, or its spec and status are not consistent); the PUB ignores
// it, wants no pod available, or does not protect op. An ignoredPodSelector
// that does not parse exempts nothing (evaluatePUB refuses, as Kruise's
// webhook errs).
func pubExempts(pod *v1.Pod, pub *PUB, op Operation) bool {
	if pubNoProtect(pod) || !healthyForPUB(pod) {
		return true
	}
	ignored, err := pubIgnores(pub, pod)
	if err != nil {
		return false
	}
	return ignored || pub.Status.DesiredAvailable == 0 || !pubProtects(pub, op)
}

// evaluatePUB applies rule 5 (docs/design.md, Budget rules) for one covering
// PUB, in the order of Kruise's PodUnavailableBudgetValidatePod, counting n
// against it.
func evaluatePUB(pod *v1.Pod, pub *PUB, op Operation, n pending) verdict {
	st := &pub.Status
	if pubExempts(pod, pub, op) {
		return free
	}
	if _, err := pubIgnores(pub, pod); err != nil {
		return deny(pubRef(pub), ReasonInvalidPUB, "%v; OpenKruise's webhook refuses every protected operation of its pods", err)
	}
	if _, ok := st.DisruptedPods[pod.Name]; ok {
		return alreadyRecorded
	}
	if _, ok := st.UnavailablePods[pod.Name]; ok {
		return alreadyRecorded
	}
	if n := len(st.DisruptedPods) + len(st.UnavailablePods); n > MaxDisruptedPods {
		return deny(pubRef(pub), ReasonTooManyDisruptedPods,
			"%d disrupted or unavailable pods await confirmation by the PUB controller (at most %d)", n, MaxDisruptedPods)
	}
	if st.UnavailableAllowed < 0 {
		return deny(pubRef(pub), ReasonNegativeAllowed, "unavailableAllowed is negative (%d)", st.UnavailableAllowed)
	}
	if st.UnavailableAllowed-n.total() < 1 {
		return deny(pubRef(pub), ReasonInsufficientBudget, "%d available, %d desired, %d unavailable allowed%s",
			st.CurrentAvailable, st.DesiredAvailable, st.UnavailableAllowed, n.shortfall())
	}
	return verdict{spends: true}
}

func pdbRef(pdb *policyv1.PodDisruptionBudget) BudgetRef {
	return BudgetRef{Kind: KindPDB, Namespace: pdb.Namespace, Name: pdb.Name, UID: pdb.UID}
}

func pubRef(pub *PUB) BudgetRef {
	return BudgetRef{Kind: KindPUB, Namespace: pub.Namespace, Name: pub.Name, UID: pub.UID}
}
