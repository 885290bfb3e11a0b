package runner

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/budgetguard/budgetguard/internal/report"
	"github.com/budgetguard/budgetguard/plugins/budget"
)

// schedulingEventReasons are the events about a pending pod that the PODS
// section shows: the scheduler's failure, and budgetguard's and upstream's
// preemption events.
var schedulingEventReasons = map[string]bool{
	"FailedScheduling":                         true,
	budget.EventPreemptionBlockedByBudget:      true,
	budget.EventPreemptionEvictionFailed:       true,
	budget.EventPreemptedExpendableUnderBudget: true,
}

// podEvent is one event the scheduler emitted about a pod, at its
// eventTime.
type podEvent struct {
	namespace, name string
	reason, note    string
	at              time.Time
}

// eventLog keeps every event the scheduler emits, before the broadcaster
// aggregates repeated ones into series (which reach the API server with
// their counts only every 30 minutes).
type eventLog struct {
	mu     sync.Mutex
	events []podEvent
}

// watch is an events.EventBroadcaster event handler.
func (l *eventLog) watch(obj runtime.Object) {
	ev, ok := obj.(*eventsv1.Event)
	if !ok || ev.Regarding.Kind != "Pod" {
		return
	}
	at := ev.EventTime.Time
	if at.IsZero() {
		at = time.Now()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, podEvent{namespace: ev.Regarding.Namespace, name: ev.Regarding.Name, reason: ev.Reason, note: ev.Note, at: at})
}

func (l *eventLog) snapshot() []podEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]podEvent(nil), l.events...)
}

// podOutcome is what the PODS section shows of pod, given every event
// the scheduler emitted: where it is, its last scheduling event (and how
// many times in a row it was emitted), the pods preempted for it (their
// Preempted events name its UID, upstream's and budgetguard's alike), and
// whether cluster-autoscaler would scale up for it.
func podOutcome(pod *corev1.Pod, events []podEvent) report.Pod {
	out := report.Pod{
		Namespace:     pod.Namespace,
		Name:          pod.Name,
		Node:          pod.Spec.NodeName,
		NominatedNode: pod.Status.NominatedNodeName,
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			out.Unschedulable = c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
		}
	}
	for _, ev := range events {
		if ev.reason == "Preempted" && pod.UID != "" && strings.Contains(ev.note, string(pod.UID)) {
			out.Victims++
		}
		if ev.namespace != pod.Namespace || ev.name != pod.Name || !schedulingEventReasons[ev.reason] {
			continue
		}
		if ev.reason == budget.EventPreemptionBlockedByBudget {
			out.Blocked++
			out.BlockedMessage = ev.note
		}
		if out.Event != nil && out.Event.Reason == ev.reason && out.Event.Message == ev.note {
			out.Event.Count++
			continue
		}
		out.Event = &report.Event{Reason: ev.reason, Message: ev.note, Count: 1}
	}
	v := budget.AutoscalerScaleUp(pod, budget.DefaultExpendablePodsPriorityCutoff)
	out.AutoscalerScaleUp, out.AutoscalerReason = v.Considered, v.Reason
	return out
}

// pods returns the scenario's Pod manifests as they are now, in document
// order. A pod that is gone is left out.
func (r *run) pods(ctx context.Context, events []podEvent) ([]report.Pod, error) {
	out := []report.Pod{}
	for _, o := range r.sc.Objects {
		want, ok := o.Object.(*corev1.Pod)
		if !ok {
			continue
		}
		pod, err := r.client.CoreV1().Pods(want.Namespace).Get(ctx, want.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read pod %s/%s: %w", want.Namespace, want.Name, err)
		}
		out = append(out, podOutcome(pod, events))
	}
	return out, nil
}
