package budgetpreemption

import (
	"context"
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
)

// Deleting a victim exactly as it was decided.
//
// The victims of a candidate come from the scheduling snapshot, which may
// be behind the cluster. reserve re-reads each victim from the pod informer
// before the budgets decide on it (current), so that a victim that turned
// Ready since is decided as Ready, and a victim deleted or replaced by a pod
// of the same name (a StatefulSet's) is not a victim any more. The delete
// then goes through only if the pod is still the one decided on:
//
//   - the DisruptionTarget condition (what upstream's PreemptPod writes) is
//     patched with the decided resourceVersion in the patch, so it fails
//     with a conflict if the pod changed since;
//   - the delete carries the UID and the resourceVersion that patch
//     returned as preconditions, so a pod that changed in between, or a new
//     pod of the same name, is never deleted in its place.
//
// A conflict is looked at again (disrupt, in actuation.go): a victim
// already going counts as gone, one only marked by another disruptor goes
// under its new resourceVersion, and any other change aborts the candidate
// like a refused victim; the next cycle decides again on the new state.

// current returns victim as the pod informer holds it now, or nil when it is
// gone: deleted, or replaced by a pod of the same name.
func (pl *BudgetAwarePreemption) current(victim *v1.Pod) *v1.Pod {
	if pl.pods == nil {
		return victim
	}
	p, err := pl.pods.Pods(victim.Namespace).Get(victim.Name)
	if err != nil || p.UID != victim.UID {
		return nil
	}
	return p
}

// deleteVictim deletes victim (as decided: see above) with a
// DisruptionTarget condition, and records the Preempted event. A victim that
// is only in the scheduler's memory is left to upstream's PreemptPod, which
// rejects it there without an API call.
func (pl *BudgetAwarePreemption) deleteVictim(ctx context.Context, c preemption.Candidate, preemptor preemption.ExecutorPreemptor, victim *v1.Pod, pluginName string) error {
	if pl.inScheduler(victim) {
		_, err := pl.upstreamPreemptPod(ctx, c, preemptor, victim, pluginName)
		return err
	}
	logger := klog.FromContext(ctx)
	pods := pl.fh.ClientSet().CoreV1().Pods(victim.Namespace)
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": victim.UID, "resourceVersion": victim.ResourceVersion},
		"status": map[string]any{"conditions": []v1.PodCondition{{
			Type:               v1.DisruptionTarget,
			Status:             v1.ConditionTrue,
			Reason:             v1.PodReasonPreemptionByScheduler,
			Message:            fmt.Sprintf("%s: preempting to accommodate a higher priority %s", preemptor.SchedulerName(), preemptor.Type()),
			LastTransitionTime: metav1.Now(),
		}}},
	})
	if err != nil {
		return err
	}
	rv := victim.ResourceVersion
	patched, err := pods.Patch(ctx, victim.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	switch {
	case apierrors.IsNotFound(err):
		logger.V(2).Info("Victim is already gone", "preemptor", klog.KObj(preemptor), "victim", klog.KObj(victim), "node", c.Name())
		return nil
	case err != nil:
		return fmt.Errorf("mark victim %s as a disruption target at resourceVersion %s: %w", klog.KObj(victim), rv, err)
	}
	rv = patched.ResourceVersion
	err = pods.Delete(ctx, victim.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &victim.UID, ResourceVersion: &rv}})
	switch {
	case apierrors.IsNotFound(err):
		logger.V(2).Info("Victim is already gone", "preemptor", klog.KObj(preemptor), "victim", klog.KObj(victim), "node", c.Name())
		return nil
	case err != nil:
		return fmt.Errorf("delete victim %s at resourceVersion %s: %w", klog.KObj(victim), rv, err)
	}
	logger.V(2).Info("Preemptor deleted victim", "preemptor", klog.KObj(preemptor), "victim", klog.KObj(victim), "node", c.Name())
	pl.fh.EventRecorder().Eventf(victim, preemptor.Obj(), v1.EventTypeNormal, "Preempted", "Preempting",
		"Preempted by %s %v on node %v", preemptor.Type(), preemptor.UID(), c.Name())
	return nil
}
