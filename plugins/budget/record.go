package budget

import (
	"context"
	"fmt"
	"time"

	kruiseclientset "github.com/openkruise/kruise-api/client/clientset/versioned"
	kruisepolicy "github.com/openkruise/kruise-api/policy/v1alpha1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// The durable record of a PodUnavailableBudget disruption.
//
// The API server checks PodDisruptionBudgets on evictions and records each
// one in the PDB's status; nothing in the API server knows PUBs. OpenKruise's
// webhook, where it runs, records a PUB disruption before it admits a pod's
// deletion or eviction (pkg/control/pubcontrol, PodUnavailableBudgetValidatePod):
// it re-reads the PUB, decides, and in one status update with the PUB's
// resourceVersion adds the pod to status.disruptedPods and takes one from
// status.unavailableAllowed; a conflict re-reads and decides again. Kruise's
// PUB controller keeps such entries counted until the pod is gone or the
// entry times out.
//
// budgetguard writes the same record itself, before it disrupts a pod that
// spends a PUB, so that every profile, replica, restart and the descheduler
// see the disruption in the PUB's status, whether or not the webhook runs.
// Where the webhook runs, it finds the pod already recorded and admits it
// without spending again, as it does for its own entries.

// RecordPUBDisruption records the disruption of pod by op in the status of
// the PUB namespace/name, as OpenKruise's webhook does. It decides on the PUB
// as the API server has it (not on the cache): a pod the PUB no longer
// protects, or already recorded, needs no record; a PUB that does not allow
// the disruption any more returns a *DeniedError and writes nothing; a PUB
// that is gone needs no record. A conflict re-reads and decides again.
func RecordPUBDisruption(ctx context.Context, client kruiseclientset.Interface, namespace, name string, pod *v1.Pod, op Operation, now time.Time) error {
	pubs := client.PolicyV1alpha1().PodUnavailableBudgets(namespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pub, err := pubs.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read PodUnavailableBudget %s/%s to record the disruption of pod %s: %w", namespace, name, pod.Name, err)
		}
		updated, err := recordedPUB(pub, pod, op, now)
		if err != nil || updated == nil {
			return err
		}
		_, err = pubs.UpdateStatus(ctx, updated, metav1.UpdateOptions{})
		return err
	})
}

// recordedPUB returns pub with the disruption of pod recorded, nil when none
// is needed, or a *DeniedError when pub refuses it. The budget rules are
// evaluatePUB's, with nothing in flight: the status is the record.
func recordedPUB(pub *kruisepolicy.PodUnavailableBudget, pod *v1.Pod, op Operation, now time.Time) (*kruisepolicy.PodUnavailableBudget, error) {
	v := evaluatePUB(pod, pub, op, pending{})
	switch {
	case v.denial != nil:
		return nil, &DeniedError{Pod: pod, Decision: Decision{Denials: []Denial{*v.denial}}}
	case !v.spends:
		return nil, nil
	}
	pub = pub.DeepCopy()
	if pub.Status.DisruptedPods == nil {
		pub.Status.DisruptedPods = map[string]metav1.Time{}
	}
	pub.Status.DisruptedPods[pod.Name] = metav1.NewTime(now)
	pub.Status.UnavailableAllowed--
	return pub, nil
}

// RecordPUBDisruptions records the disruption of pod in every PUB that d
// spends (see RecordPUBDisruption). It stops at the first error.
func RecordPUBDisruptions(ctx context.Context, client kruiseclientset.Interface, d Decision, pod *v1.Pod, op Operation, now time.Time) error {
	for _, b := range d.Spends {
		if b.Kind != KindPUB {
			continue
		}
		if err := RecordPUBDisruption(ctx, client, b.Namespace, b.Name, pod, op, now); err != nil {
			return err
		}
	}
	return nil
}
