package kubectlplugin

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/budgetguard/budgetguard/plugins/budget"
)

// RefusalEventReasons are the event reasons budgetguard's preemption plugin
// records on a preemptor it could not place because of a budget
// (plugins/budgetpreemption: budgetpreemption.go and actuation.go).
var RefusalEventReasons = []string{budget.EventPreemptionBlockedByBudget, budget.EventPreemptionEvictionFailed}

// budgetName finds the budgets a plugin sentence names: every message of
// budget.Denial starts with BudgetRef.String(), "pdb ns/name".
var budgetName = regexp.MustCompile(`\b(pdb|pub) ([a-z0-9]([-a-z0-9.]*[a-z0-9])?)/([a-z0-9]([-a-z0-9.]*[a-z0-9])?)`)

// Reasons of a preemption-delete decision that no budget gives.
const (
	// ReasonNodeBeingRemoved: the pod's node is being removed by
	// cluster-autoscaler, so budgetguard's preemption takes no victims
	// there (plugins/budgetpreemption: SelectVictimsOnNode).
	ReasonNodeBeingRemoved = "NodeBeingRemoved"
	// ReasonNodeUnknown: the pod's node could not be read.
	ReasonNodeUnknown = "NodeUnknown"
)

// buildWhy assembles the answer for pod from the Cache's explanation, the
// pod's node (nil when unbound or unread), why it could not be read
// (nodeUnknown, empty when it was read or the pod is unbound) and the
// events about the pod.
func buildWhy(pod *v1.Pod, node *v1.Node, nodeUnknown string, events []v1.Event, x budget.Explanation) WhyOutput {
	out := WhyOutput{
		TypeMeta: whyTypeMeta,
		Pod: PodInfo{
			Namespace:      pod.Namespace,
			Name:           pod.Name,
			Phase:          string(pod.Status.Phase),
			Ready:          x.Ready,
			Terminating:    pod.DeletionTimestamp != nil,
			Node:           pod.Spec.NodeName,
			IgnoresBudgets: x.IgnoresBudgets,
		},
		Budgets: []BudgetInfo{},
		Fixes:   x.Fixes,
	}
	if c := metav1.GetControllerOf(pod); c != nil {
		out.Pod.Controller = c.Kind + "/" + c.Name
	}
	for _, s := range pod.Status.ContainerStatuses {
		if s.State.Waiting != nil {
			out.Pod.Waiting = append(out.Pod.Waiting, s.Name+": "+s.State.Waiting.Reason)
		}
	}
	for _, b := range x.Budgets {
		out.Budgets = append(out.Budgets, BudgetInfo{
			Kind: string(b.Ref.Kind), Namespace: b.Ref.Namespace, Name: b.Ref.Name, Match: string(b.Match),
			Healthy: b.Healthy, Desired: b.Desired, Allowed: b.Allowed, Expected: b.Expected,
			InFlight: b.InFlight, Stale: b.Stale, UnhealthyPodEvictionPolicy: b.UnhealthyPodEvictionPolicy,
			Eviction: verdictInfo(b.Evict), Delete: verdictInfo(b.Delete),
		})
	}
	out.Decisions = []DecisionInfo{decisionInfo("eviction", x.Evict), preemptionInfo(pod, node, nodeUnknown, x.Delete)}

	out.Autoscaler.SafeToEvict = pod.Annotations[budget.AnnotationSafeToEvict]
	switch {
	case nodeUnknown != "" && pod.Spec.NodeName != "":
		out.Autoscaler.NodeUnknown = nodeUnknown
	case node != nil:
		for _, t := range node.Spec.Taints {
			s := t.Key
			if t.Value != "" {
				s += "=" + t.Value
			}
			out.Autoscaler.NodeTaints = append(out.Autoscaler.NodeTaints, s+":"+string(t.Effect))
		}
		out.Autoscaler.NodeBeingRemoved = ptr.To(budget.NodeBeingRemoved(node))
		out.Autoscaler.NodeDeletionCandidate = ptr.To(budget.NodeDeletionCandidate(node))
	default:
		// Not bound: on no node, so on none being removed.
		out.Autoscaler.NodeBeingRemoved, out.Autoscaler.NodeDeletionCandidate = ptr.To(false), ptr.To(false)
	}
	if pod.Spec.NodeName == "" {
		out.Pending = pendingInfo(pod, events)
	}
	return out
}

// whyNames are the budgets the answer names, for -o name: those that cover
// the pod, then, for a pending pod, those its refusal names (budgets over
// other pods, which it would preempt), each once.
func whyNames(out WhyOutput) []ObjectInfo {
	var names []ObjectInfo
	for _, b := range out.Budgets {
		names = append(names, ObjectInfo{Kind: b.Kind, Namespace: b.Namespace, Name: b.Name})
	}
	if out.Pending == nil {
		return names
	}
	for _, n := range out.Pending.NamedBudgets {
		if m := budgetName.FindStringSubmatch(n); m != nil {
			kind := string(budget.KindPDB)
			if m[1] == "pub" {
				kind = string(budget.KindPUB)
			}
			names = append(names, ObjectInfo{Kind: kind, Namespace: m[2], Name: m[4]})
		}
	}
	return names
}

func verdictInfo(v budget.BudgetVerdict) VerdictInfo {
	switch {
	case v.Denial != nil:
		return VerdictInfo{Result: "denied", Reason: string(v.Denial.Reason), Message: v.Denial.Message}
	case v.Spends:
		return VerdictInfo{Result: "spends"}
	}
	return VerdictInfo{Result: "free"}
}

func decisionInfo(op string, d budget.Decision) DecisionInfo {
	out := DecisionInfo{Operation: op, Allowed: d.Allowed, Result: ResultDenied, Reason: string(d.Reason()), Message: d.Message()}
	if d.Allowed {
		out.Result = ResultAllowed
	}
	for _, s := range d.Spends {
		out.Spends = append(out.Spends, s.String())
	}
	return out
}

// preemptionInfo is the preemption-delete decision: the budgets' answer,
// unless the pod's node is being removed by cluster-autoscaler (then the
// pod is not a candidate, whatever its budgets: budgetguard's preemption
// checks the node first), or could not be read while the budgets allow the
// delete (then it is unknown; a denial stands whatever the node).
func preemptionInfo(pod *v1.Pod, node *v1.Node, nodeUnknown string, d budget.Decision) DecisionInfo {
	out := decisionInfo("preemption-delete", d)
	switch {
	case pod.Spec.NodeName == "":
	case nodeUnknown == "" && budget.NodeBeingRemoved(node):
		out.Allowed, out.Result, out.Spends = false, ResultNotCandidate, nil
		out.Reason = ReasonNodeBeingRemoved
		out.Message = fmt.Sprintf("node %s is being removed by cluster-autoscaler (taint %s): budgetguard's preemption takes no victims there",
			pod.Spec.NodeName, budget.TaintToBeDeleted)
	case nodeUnknown != "" && d.Allowed:
		budgets := "the budgets allow it, spending none"
		if len(out.Spends) > 0 {
			budgets = "the budgets allow it, spending " + strings.Join(out.Spends, ", ")
		}
		out.Allowed, out.Result, out.Spends = false, ResultUnknown, nil
		out.Reason = ReasonNodeUnknown
		out.Message = fmt.Sprintf("%s, but budgetguard's preemption takes no victims on a node cluster-autoscaler is removing, and node %s could not be read: %s",
			budgets, pod.Spec.NodeName, nodeUnknown)
	}
	return out
}

func pendingInfo(pod *v1.Pod, events []v1.Event) *PendingInfo {
	p := &PendingInfo{}
	v := budget.AutoscalerScaleUp(pod, budget.DefaultExpendablePodsPriorityCutoff)
	p.ScaleUp = ScaleUpInfo{Considered: v.Considered, Reason: v.Reason, Message: v.Message}
	var texts []string
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodScheduled {
			p.PodScheduled = &ConditionInfo{Status: string(c.Status), Reason: c.Reason, Message: c.Message}
			texts = append(texts, c.Message)
		}
	}
	if ev := lastRefusal(pod, events); ev != nil {
		p.LastRefusal = &EventInfo{Reason: ev.Reason, Message: ev.Message, Count: max(ev.Count, 1)}
		texts = append(texts, ev.Message)
	}
	seen := map[string]bool{}
	for _, t := range texts {
		for _, m := range budgetName.FindAllStringSubmatch(t, -1) {
			name := m[1] + " " + m[2] + "/" + m[4]
			if !seen[name] {
				seen[name] = true
				p.NamedBudgets = append(p.NamedBudgets, name)
			}
		}
	}
	sort.Strings(p.NamedBudgets)
	return p
}

// lastRefusal is the latest event about pod (this pod, not an earlier one
// of the same name) with one of RefusalEventReasons, or nil.
func lastRefusal(pod *v1.Pod, events []v1.Event) *v1.Event {
	var last *v1.Event
	for i := range events {
		ev := &events[i]
		if ev.InvolvedObject.Kind != "Pod" || ev.InvolvedObject.Name != pod.Name ||
			(ev.InvolvedObject.UID != "" && ev.InvolvedObject.UID != pod.UID) {
			continue
		}
		refusal := false
		for _, r := range RefusalEventReasons {
			refusal = refusal || ev.Reason == r
		}
		if refusal && (last == nil || !eventTime(ev).Before(eventTime(last))) {
			last = ev
		}
	}
	return last
}

// eventTime is when an event last happened, whichever API wrote it.
func eventTime(ev *v1.Event) time.Time {
	switch {
	case ev.Series != nil && !ev.Series.LastObservedTime.IsZero():
		return ev.Series.LastObservedTime.Time
	case !ev.LastTimestamp.IsZero():
		return ev.LastTimestamp.Time
	case !ev.EventTime.IsZero():
		return ev.EventTime.Time
	}
	return ev.CreationTimestamp.Time
}
