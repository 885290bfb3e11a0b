package kubectlplugin

import (
	"regexp"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/budgetguard/budgetguard/plugins/budget"
)

// RefusalEventReasons are the event reasons budgetguard's preemption plugin
// records on a preemptor it could not place because of a budget
// (plugins/budgetpreemption: budgetpreemption.go and actuation.go).
var RefusalEventReasons = []string{budget.EventPreemptionBlockedByBudget, budget.EventPreemptionEvictionFailed}

// budgetName finds the budgets a plugin sentence names: every message of
// budget.Denial starts with BudgetRef.String(), "pdb ns/name".
var budgetName = regexp.MustCompile(`\b(pdb|pub) ([a-z0-9]([-a-z0-9.]*[a-z0-9])?)/([a-z0-9]([-a-z0-9.]*[a-z0-9])?)`)

// buildWhy assembles the answer for pod from the Cache's explanation, the
// pod's node (nil when unbound or not found) and the events about the pod.
func buildWhy(pod *v1.Pod, node *v1.Node, events []v1.Event, x budget.Explanation) WhyOutput {
	out := WhyOutput{
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
	out.Decisions = []DecisionInfo{decisionInfo("eviction", x.Evict), decisionInfo("preemption-delete", x.Delete)}

	out.Autoscaler.SafeToEvict = pod.Annotations[budget.AnnotationSafeToEvict]
	if node != nil {
		for _, t := range node.Spec.Taints {
			s := t.Key
			if t.Value != "" {
				s += "=" + t.Value
			}
			out.Autoscaler.NodeTaints = append(out.Autoscaler.NodeTaints, s+":"+string(t.Effect))
		}
		out.Autoscaler.NodeBeingRemoved = budget.NodeBeingRemoved(node)
		out.Autoscaler.NodeDeletionCandidate = budget.NodeDeletionCandidate(node)
	}
	if pod.Spec.NodeName == "" {
		out.Pending = pendingInfo(pod, events)
	}
	return out
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
	out := DecisionInfo{Operation: op, Allowed: d.Allowed, Reason: string(d.Reason()), Message: d.Message()}
	for _, s := range d.Spends {
		out.Spends = append(out.Spends, s.String())
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
