package budget

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	kruiseclientset "github.com/openkruise/kruise-api/client/clientset/versioned"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	kruisepolicy "github.com/budgetguard/budgetguard/apis/kruise/policy/v1beta1"
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

// PUBRecord is one disruption that RecordPUBDisruptions wrote into a PUB's
// status: the PUB, the pod, and the time it recorded.
type PUBRecord struct {
	Namespace, Name string
	Pod             string
	At              metav1.Time
}

// RecordPUBDisruption records the disruption of pod by op in the status of
// the PUB namespace/name, as OpenKruise's webhook does. It decides on the PUB
// as the API server has it (not on the cache): a pod the PUB no longer
// protects, or already recorded, needs no record; a PUB that does not allow
// the disruption any more returns a *DeniedError and writes nothing; a PUB
// that is gone needs no record. A conflict re-reads and decides again. It
// returns the record it wrote, nil when it wrote none.
func RecordPUBDisruption(ctx context.Context, client PUBStatusClient, namespace, name string, pod *v1.Pod, op Operation, now time.Time) (*PUBRecord, error) {
	// The status holds seconds; the record is compared as read back.
	at := metav1.NewTime(now).Rfc3339Copy()
	var rec *PUBRecord
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		rec = nil
		pub, err := client.Get(ctx, namespace, name)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read PodUnavailableBudget %s/%s to record the disruption of pod %s: %w", namespace, name, pod.Name, err)
		}
		updated, err := recordedPUB(pub, pod, op, at)
		if err != nil || updated == nil {
			return err
		}
		if err := client.UpdateStatus(ctx, updated); err != nil {
			return err
		}
		rec = &PUBRecord{Namespace: namespace, Name: name, Pod: pod.Name, At: at}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// recordedPUB returns pub with the disruption of pod recorded at at, nil
// when none is needed, or a *DeniedError when pub refuses it. The budget
// rules are evaluatePUB's, with nothing in flight: the status is the record.
func recordedPUB(pub *PUB, pod *v1.Pod, op Operation, at metav1.Time) (*PUB, error) {
	v := evaluatePUB(pod, pub, op, pending{})
	if v.recorded {
		v = recordedShort(pub, pod)
	}
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
	pub.Status.DisruptedPods[pod.Name] = at
	pub.Status.UnavailableAllowed--
	return pub, nil
}

// recordedShort decides, on a PUB as the API server has it, a Ready pod that
// the PUB records as disrupted already (in status.disruptedPods or
// unavailablePods): rule 5 lets it go without a new record, as OpenKruise's
// webhook admits it, but only while the PUB counts at least the available
// pods it desires without it (its controller counts a recorded pod
// unavailable). A record whose disruption did not happen (a delete answered
// 5xx, a timeout: the record stays, since the outcome is unknown) would
// otherwise let the pod go long after the PUB allowed it, whatever became
// unavailable since. It returns a denial, or nothing to spend.
func recordedShort(pub *PUB, pod *v1.Pod) verdict {
	st := &pub.Status
	if st.CurrentAvailable >= st.DesiredAvailable {
		return alreadyRecorded
	}
	return deny(pubRef(pub), ReasonInsufficientBudget,
		"pod %s is recorded as disrupted already, but without it %d available, %d desired: the record is not spent again",
		pod.Name, st.CurrentAvailable, st.DesiredAvailable)
}

// RecheckRecordedPUBs re-reads from the API server each PUB covering pod
// whose status, as the cache has it, records pod's disruption already, and
// refuses (a *DeniedError) when one is short without it (recordedShort).
// Such a PUB is not in a decision's spends, so the record step
// (RecordPUBDisruptions) does not read it; under faults the cache may lag
// by more than the time a pod takes to turn not Ready, so only the API
// server's status is trusted here. An error reading a PUB is returned as
// it is: the caller fails closed. Call it just before pod is disrupted.
func (c *Cache) RecheckRecordedPUBs(ctx context.Context, client PUBStatusClient, pod *v1.Pod, op Operation) error {
	if client == nil || ignoresBudgets(pod) || !healthyForPUB(pod) {
		return nil
	}
	_, pubs, _ := c.coveringInto(pod, nil, nil)
	var denials []Denial
	for _, cached := range pubs {
		if !recordsPod(cached, pod) {
			continue
		}
		pub, err := client.Get(ctx, cached.Namespace, cached.Name)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("re-read PodUnavailableBudget %s/%s, which records the disruption of pod %s already: %w", cached.Namespace, cached.Name, pod.Name, err)
		}
		v := evaluatePUB(pod, pub, op, pending{})
		switch {
		case v.recorded:
			v = recordedShort(pub, pod)
		case v.spends:
			// The record is gone (timed out, taken back): the pod would
			// go unrecorded. Decided again, on a fresher cache.
			v = deny(pubRef(pub), ReasonStaleStatus, "the status no longer records the disruption of pod %s, as the cache had it", pod.Name)
		}
		if v.denial != nil {
			denials = append(denials, *v.denial)
		}
	}
	if len(denials) == 0 {
		return nil
	}
	return &DeniedError{Pod: pod, Decision: Decision{Denials: denials}}
}

// recordsPod reports whether pub's status records pod's disruption.
func recordsPod(pub *PUB, pod *v1.Pod) bool {
	_, disrupted := pub.Status.DisruptedPods[pod.Name]
	_, unavailable := pub.Status.UnavailablePods[pod.Name]
	return disrupted || unavailable
}

// RecordPUBDisruptions records the disruption of pod in every PUB that d
// spends (see RecordPUBDisruption) and returns the records it wrote. It
// stops at the first error, and then takes back the records it wrote (see
// UndoPUBRecords): the pod is not disrupted, and a record left behind would
// make its later disruption free under rule 5.
func RecordPUBDisruptions(ctx context.Context, client PUBStatusClient, d Decision, pod *v1.Pod, op Operation, now time.Time) ([]PUBRecord, error) {
	var recs []PUBRecord
	for _, b := range d.Spends {
		if b.Kind != KindPUB {
			continue
		}
		rec, err := RecordPUBDisruption(ctx, client, b.Namespace, b.Name, pod, op, now)
		if err != nil {
			if uerr := UndoPUBRecords(ctx, client, recs); uerr != nil {
				err = fmt.Errorf("%w; and taking back the records already written: %w", err, uerr)
			}
			return nil, err
		}
		if rec != nil {
			recs = append(recs, *rec)
		}
	}
	return recs, nil
}

// UndoPUBRecords takes back records of disruptions that did not happen: the
// API server refused the eviction or the delete. Under rule 5 a pod in a
// PUB's status.disruptedPods is already counted, so a record left behind for
// a pod that stays makes its later disruption free while the PUB may be
// short (Kruise keeps such an entry until it times out).
//
// Each entry is removed only when it is still the one written (same pod,
// same time), in one status update with the PUB's resourceVersion; a
// conflict re-reads. unavailableAllowed is not raised: the PUB's controller
// recomputes it from the pods, and until then the PUB allows one disruption
// fewer, never one more. It tries every record and returns the errors.
func UndoPUBRecords(ctx context.Context, client PUBStatusClient, recs []PUBRecord) error {
	var errs []error
	for _, rec := range recs {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			pub, err := client.Get(ctx, rec.Namespace, rec.Name)
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return err
			}
			at, ok := pub.Status.DisruptedPods[rec.Pod]
			if !ok || !at.Equal(&rec.At) {
				return nil
			}
			pub = pub.DeepCopy()
			delete(pub.Status.DisruptedPods, rec.Pod)
			return client.UpdateStatus(ctx, pub)
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("take back the disruption record of pod %s from PodUnavailableBudget %s/%s: %w", rec.Pod, rec.Namespace, rec.Name, err))
		}
	}
	return errors.Join(errs...)
}

// PUBStatusClient reads a PodUnavailableBudget and updates its status, in
// one served version of the API, in the v1beta1 shape: what the durable
// record needs. Write in the version the Cache reads (Cache.PUBStatusClient):
// the PUB is re-read and decided on as the Cache reads it (a v1alpha1 read
// has no spec.ignoredPodSelector), and a cluster that serves v1beta1 alone
// takes no v1alpha1 write.
type PUBStatusClient interface {
	Get(ctx context.Context, namespace, name string) (*PUB, error)
	// UpdateStatus writes pub's status, with its resourceVersion as the
	// precondition.
	UpdateStatus(ctx context.Context, pub *PUB) error
}

// PUBStatusClientV1alpha1 is a PUBStatusClient of policy.kruise.io/v1alpha1.
func PUBStatusClientV1alpha1(client kruiseclientset.Interface) PUBStatusClient {
	return alphaStatusClient{client}
}

// PUBStatusClientV1beta1 is a PUBStatusClient of policy.kruise.io/v1beta1
// on a client of NewPUBv1beta1Client.
func PUBStatusClientV1beta1(client rest.Interface) PUBStatusClient {
	return betaStatusClient{client}
}

type alphaStatusClient struct{ c kruiseclientset.Interface }

func (a alphaStatusClient) Get(ctx context.Context, namespace, name string) (*PUB, error) {
	pub, err := a.c.PolicyV1alpha1().PodUnavailableBudgets(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	// An annotation that does not convert stays for the rules to read.
	beta, _ := kruisepolicy.FromV1alpha1(pub)
	return beta, nil
}

func (a alphaStatusClient) UpdateStatus(ctx context.Context, pub *PUB) error {
	_, err := a.c.PolicyV1alpha1().PodUnavailableBudgets(pub.Namespace).UpdateStatus(ctx, kruisepolicy.ToV1alpha1(pub), metav1.UpdateOptions{})
	return err
}

type betaStatusClient struct{ c rest.Interface }

func (b betaStatusClient) Get(ctx context.Context, namespace, name string) (*PUB, error) {
	pub := &PUB{}
	err := b.c.Get().Namespace(namespace).Resource("podunavailablebudgets").Name(name).Do(ctx).Into(pub)
	if err != nil {
		return nil, err
	}
	return pub, nil
}

func (b betaStatusClient) UpdateStatus(ctx context.Context, pub *PUB) error {
	return b.c.Put().Namespace(pub.Namespace).Resource("podunavailablebudgets").Name(pub.Name).SubResource("status").
		Body(pub).Do(ctx).Error()
}

// DisruptionRefused reports whether err is the API server's answer that it
// did not disrupt the pod: a 4xx status (a budget's 429, a precondition's
// 409). A timeout, a connection error or a 5xx leaves it unknown.
func DisruptionRefused(err error) bool {
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		return false
	}
	code := se.Status().Code
	return code >= 400 && code < 500
}

// RefusedByBudget reports whether err is a budget's refusal of a disruption
// by the API server or an admission layer in front of it: the Eviction
// API's 429, or a denial by an admission webhook (OpenKruise's refuses a
// pod its PodUnavailableBudget protects with a 403 that names the PUB) or
// by a ValidatingAdmissionPolicy. Such a refusal stands until a budget
// changes. A 403 of authorization, a conflict or a pod that is gone is not
// a budget's.
func RefusedByBudget(err error) bool {
	var se apierrors.APIStatus
	if !errors.As(err, &se) || !DisruptionRefused(err) {
		return false
	}
	st := se.Status()
	if st.Code == http.StatusTooManyRequests {
		return true
	}
	msg := st.Message
	return (strings.Contains(msg, "admission webhook ") && strings.Contains(msg, " denied the request")) ||
		(strings.Contains(msg, "ValidatingAdmissionPolicy ") && strings.Contains(msg, " denied request"))
}
