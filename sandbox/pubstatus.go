package sandbox

import (
	"errors"
	"fmt"
	"strings"
	"time"

	kruisepub "github.com/openkruise/kruise-api/apps/pub"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/utils/ptr"

	kruisebeta "github.com/budgetguard/budgetguard/apis/kruise/policy/v1beta1"
	"github.com/budgetguard/budgetguard/plugins/budget"
)

// This file computes the status that the status half of OpenKruise's
// PodUnavailableBudget controller (kruise v1.8.0:
// pkg/controller/podunavailablebudget and pkg/control/pubcontrol) writes:
// which pods a PUB covers and what it counts. pubstatus_controller.go
// applies it when Options.SimulatePUBStatus is on, on PUBs read and written
// at policy.kruise.io/v1beta1 as kruise's controller does. It is a
// simulation of an external controller, not a budget decision: budgetguard's
// rules stay in plugins/budget, which reads the status written here. It
// shares with plugins/budget only kruise's test of whether a pod's spec and
// status are consistent (budget.PodStateConsistent).

// Kruise's timeouts for status entries written by its webhook.
const (
	// pubDisruptedPodTimeout is how long a DisruptedPods entry stays
	// while its pod is still active (kruise's DeletionTimeout).
	pubDisruptedPodTimeout = 20 * time.Second
	// pubUnavailablePodTimeout is how long an UnavailablePods entry stays
	// (kruise's UpdatedDelayCheckTime).
	pubUnavailablePodTimeout = 10 * time.Second
)

// The workloads the simulation resolves, by API group and kind.
var (
	pubKindReplicaSet  = appsv1.SchemeGroupVersion.WithKind("ReplicaSet").GroupKind()
	pubKindDeployment  = appsv1.SchemeGroupVersion.WithKind("Deployment").GroupKind()
	pubKindStatefulSet = appsv1.SchemeGroupVersion.WithKind("StatefulSet").GroupKind()
	pubKindRC          = corev1.SchemeGroupVersion.WithKind("ReplicationController").GroupKind()
)

// pubCoverage is what a PodUnavailableBudget counts: the active pods it
// covers and the number of pods it expects (status.totalReplicas).
type pubCoverage struct {
	pods     []*corev1.Pod
	expected int32
}

// computePUBStatus returns the status that kruise's controller writes for
// pub when it covers cov at now, and when the first DisruptedPods or
// UnavailablePods entry that it keeps expires (zero if none). It fails only
// for a maxUnavailable or minAvailable that is neither an integer nor a
// percentage; kruise then writes nothing.
func computePUBStatus(pub *kruisebeta.PodUnavailableBudget, cov pubCoverage, now time.Time) (kruisebeta.PodUnavailableBudgetStatus, time.Time, error) {
	desired, err := pubDesiredAvailable(pub.Spec, cov.expected)
	if err != nil {
		return kruisebeta.PodUnavailableBudgetStatus{}, time.Time{}, err
	}
	disrupted, unavailable, recheck := keepPUBPodEntries(pub.Status, cov.pods, now)
	var current int32
	for _, pod := range cov.pods {
		_, isDisrupted := disrupted[pod.Name]
		_, isUnavailable := unavailable[pod.Name]
		if podActive(pod) && !isDisrupted && !isUnavailable && pubPodAvailable(pod) {
			current++
		}
	}
	return kruisebeta.PodUnavailableBudgetStatus{
		ObservedGeneration: pub.Generation,
		DisruptedPods:      disrupted,
		UnavailablePods:    unavailable,
		// Kruise never writes a negative value.
		UnavailableAllowed: max(current-desired, 0),
		CurrentAvailable:   current,
		DesiredAvailable:   desired,
		TotalReplicas:      cov.expected,
	}, recheck, nil
}

// pubDesiredAvailable is kruise's desiredAvailable: expected minus
// maxUnavailable (a percentage of expected rounded up), at least 0; else
// minAvailable (a percentage rounded up); else 0.
func pubDesiredAvailable(spec kruisebeta.PodUnavailableBudgetSpec, expected int32) (int32, error) {
	switch {
	case spec.MaxUnavailable != nil:
		n, err := intstr.GetScaledValueFromIntOrPercent(spec.MaxUnavailable, int(expected), true)
		if err != nil {
			return 0, fmt.Errorf("spec.maxUnavailable %q: want an integer or a percentage such as \"25%%\": %w", spec.MaxUnavailable.String(), err)
		}
		return max(expected-int32(n), 0), nil
	case spec.MinAvailable != nil:
		n, err := intstr.GetScaledValueFromIntOrPercent(spec.MinAvailable, int(expected), true)
		if err != nil {
			return 0, fmt.Errorf("spec.minAvailable %q: want an integer or a percentage such as \"75%%\": %w", spec.MinAvailable.String(), err)
		}
		return int32(n), nil
	}
	return 0, nil
}

// keepPUBPodEntries returns the DisruptedPods and UnavailablePods entries of
// st that kruise keeps: those of covered active pods that have not timed out
// (nil maps when none is left), and when the first kept entry times out.
func keepPUBPodEntries(st kruisebeta.PodUnavailableBudgetStatus, pods []*corev1.Pod, now time.Time) (disrupted, unavailable map[string]metav1.Time, recheck time.Time) {
	keep := func(entries map[string]metav1.Time, name string, timeout time.Duration, into *map[string]metav1.Time) {
		at, ok := entries[name]
		if !ok {
			return
		}
		expires := at.Add(timeout)
		if expires.Before(now) {
			return
		}
		if *into == nil {
			*into = map[string]metav1.Time{}
		}
		(*into)[name] = at
		if recheck.IsZero() || expires.Before(recheck) {
			recheck = expires
		}
	}
	for _, pod := range pods {
		if !podActive(pod) {
			continue
		}
		keep(st.DisruptedPods, pod.Name, pubDisruptedPodTimeout, &disrupted)
		keep(st.UnavailablePods, pod.Name, pubUnavailablePodTimeout, &unavailable)
	}
	return disrupted, unavailable, recheck
}

// podActive is kubecontroller.IsPodActive: not Succeeded, Failed or
// terminating.
func podActive(pod *corev1.Pod) bool {
	return pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed && pod.DeletionTimestamp == nil
}

// pubPodAvailable is kruise's IsPodReady and IsPodStateConsistent, what its
// controller counts available: Running, Ready, not terminating, without an
// unavailable-pod.kruise.io/ label, and with its spec and status consistent
// (no in-place update or sidecar upgrade under way;
// budget.PodStateConsistent).
func pubPodAvailable(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning || pod.DeletionTimestamp != nil ||
		!podConditionTrue(pod.Status.Conditions, corev1.PodReady) {
		return false
	}
	for key := range pod.Labels {
		if strings.HasPrefix(key, kruisepub.PubUnavailablePodLabelPrefix) {
			return false
		}
	}
	return budget.PodStateConsistent(pod)
}

// pubWorkloads reads the pods and workloads a PodUnavailableBudget covers.
type pubWorkloads struct {
	pods         corelisters.PodLister
	rcs          corelisters.ReplicationControllerLister
	replicaSets  appslisters.ReplicaSetLister
	deployments  appslisters.DeploymentLister
	statefulSets appslisters.StatefulSetLister
}

// newPUBWorkloads reads through the listers of factory's informers, which
// it registers; they work once factory is started and synced.
func newPUBWorkloads(factory informers.SharedInformerFactory) pubWorkloads {
	return pubWorkloads{
		pods:         factory.Core().V1().Pods().Lister(),
		rcs:          factory.Core().V1().ReplicationControllers().Lister(),
		replicaSets:  factory.Apps().V1().ReplicaSets().Lister(),
		deployments:  factory.Apps().V1().Deployments().Lister(),
		statefulSets: factory.Apps().V1().StatefulSets().Lister(),
	}
}

// coverage returns what pub covers, as kruise's GetPodsForPub does. A
// problem with pub's spec or annotations comes back as an error together
// with the coverage that kruise computes in that case (usually none); the
// status is still written from it.
func (w pubWorkloads) coverage(pub *kruisebeta.PodUnavailableBudget) (pubCoverage, error) {
	var cov pubCoverage
	var problem error
	switch {
	case pub.Spec.TargetReference != nil:
		// Kruise: targetRef takes priority over selector.
		cov, problem = w.targetCoverage(pub.Namespace, pub.Spec.TargetReference)
	case pub.Spec.Selector == nil:
		return pubCoverage{}, errors.New("spec has neither targetRef nor selector, so it covers no pods")
	default:
		sel, err := metav1.LabelSelectorAsSelector(pub.Spec.Selector)
		if err != nil {
			return pubCoverage{}, fmt.Errorf("spec.selector: %w; it covers no pods", err)
		}
		pods, _ := w.pods.Pods(pub.Namespace).List(sel)
		cov.pods = activePods(pods, nil)
		cov.expected = w.expectedScale(pub.Namespace, cov.pods)
	}
	// Kruise v1beta1 reads spec.protectTotalReplicas alone; a v1alpha1
	// object's annotation became it on conversion.
	if n := pub.Spec.ProtectTotalReplicas; n != nil {
		cov.expected = *n
	}
	return cov, problem
}

// targetCoverage is kruise's GetPodsForRef: the workload's spec.replicas,
// and the active pods with an owner reference to it, or for a Deployment to
// one of its ReplicaSets. A missing or deleting workload, or one with zero
// replicas, covers nothing.
func (w pubWorkloads) targetCoverage(namespace string, ref *kruisebeta.TargetReference) (pubCoverage, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return pubCoverage{}, fmt.Errorf("spec.targetRef.apiVersion %q: %w; it covers no pods", ref.APIVersion, err)
	}
	gk := schema.GroupKind{Group: gv.Group, Kind: ref.Kind}
	if !pubKindSimulated(gk) {
		return pubCoverage{}, fmt.Errorf("spec.targetRef: kind %q of apiVersion %q is not simulated (the sandbox resolves Deployment, ReplicaSet and StatefulSet of apps, and ReplicationController); it covers no pods",
			ref.Kind, ref.APIVersion)
	}
	obj, replicas := w.workload(namespace, gk, ref.Name)
	if obj == nil || obj.GetDeletionTimestamp() != nil || replicas == 0 {
		return pubCoverage{}, nil
	}
	owners := []types.UID{obj.GetUID()}
	if d, ok := obj.(*appsv1.Deployment); ok {
		if rss := w.replicaSetsOf(d); len(rss) > 0 {
			owners = rss
		}
	}
	pods, _ := w.pods.Pods(namespace).List(labels.Everything())
	return pubCoverage{pods: activePods(pods, owners), expected: replicas}, nil
}

// pubKindSimulated reports whether gk is a workload kind that the simulation
// resolves.
func pubKindSimulated(gk schema.GroupKind) bool {
	switch gk {
	case pubKindReplicaSet, pubKindDeployment, pubKindStatefulSet, pubKindRC:
		return true
	}
	return false
}

// workload returns the workload of kind gk named name in namespace and its
// spec.replicas (1 when unset), or nil if there is none.
func (w pubWorkloads) workload(namespace string, gk schema.GroupKind, name string) (metav1.Object, int32) {
	switch gk {
	case pubKindReplicaSet:
		if rs, err := w.replicaSets.ReplicaSets(namespace).Get(name); err == nil {
			return rs, ptr.Deref(rs.Spec.Replicas, 1)
		}
	case pubKindDeployment:
		if d, err := w.deployments.Deployments(namespace).Get(name); err == nil {
			return d, ptr.Deref(d.Spec.Replicas, 1)
		}
	case pubKindStatefulSet:
		if ss, err := w.statefulSets.StatefulSets(namespace).Get(name); err == nil {
			return ss, ptr.Deref(ss.Spec.Replicas, 1)
		}
	case pubKindRC:
		if rc, err := w.rcs.ReplicationControllers(namespace).Get(name); err == nil {
			return rc, ptr.Deref(rc.Spec.Replicas, 1)
		}
	}
	return nil, 0
}

// replicaSetsOf returns the UIDs of d's ReplicaSets that are not being
// deleted, including those scaled to zero.
func (w pubWorkloads) replicaSetsOf(d *appsv1.Deployment) []types.UID {
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil
	}
	rss, _ := w.replicaSets.ReplicaSets(d.Namespace).List(sel)
	var uids []types.UID
	for _, rs := range rss {
		if ref := metav1.GetControllerOf(rs); rs.DeletionTimestamp == nil && ref != nil && ref.UID == d.UID {
			uids = append(uids, rs.UID)
		}
	}
	return uids
}

// activePods returns the active pods, only those with an owner reference to
// one of owners unless owners is nil.
func activePods(pods []*corev1.Pod, owners []types.UID) []*corev1.Pod {
	var out []*corev1.Pod
	for _, pod := range pods {
		if !podActive(pod) {
			continue
		}
		if owners != nil && !ownedByAny(pod, owners) {
			continue
		}
		out = append(out, pod)
	}
	return out
}

func ownedByAny(pod *corev1.Pod, owners []types.UID) bool {
	for _, ref := range pod.OwnerReferences {
		for _, uid := range owners {
			if ref.UID == uid {
				return true
			}
		}
	}
	return false
}

// expectedScale is kruise's GetExpectedScaleForPods: the sum of
// spec.replicas of the workloads that control pods, a ReplicaSet of a
// Deployment counting as the Deployment, each workload once. Pods without a
// controller add nothing. Kruise asks the scale subresource of other kinds
// (and counts -1 for an owner without one); the sandbox adds nothing for
// them.
func (w pubWorkloads) expectedScale(namespace string, pods []*corev1.Pod) int32 {
	seen := map[types.UID]bool{}
	scale := map[types.UID]int32{}
	for _, pod := range pods {
		ref := metav1.GetControllerOf(pod)
		if ref == nil || seen[ref.UID] {
			continue
		}
		seen[ref.UID] = true
		if uid, n, ok := w.workloadScale(namespace, ref); ok {
			scale[uid] = n
		}
	}
	var sum int32
	for _, n := range scale {
		sum += n
	}
	return sum
}

// workloadScale returns the UID and spec.replicas of the workload ref names,
// following a ReplicaSet to its Deployment, if it exists with ref's UID and
// is not being deleted.
func (w pubWorkloads) workloadScale(namespace string, ref *metav1.OwnerReference) (types.UID, int32, bool) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return "", 0, false
	}
	obj, replicas := w.workload(namespace, schema.GroupKind{Group: gv.Group, Kind: ref.Kind}, ref.Name)
	if obj == nil || obj.GetUID() != ref.UID {
		return "", 0, false
	}
	if rs, ok := obj.(*appsv1.ReplicaSet); ok {
		if owner := metav1.GetControllerOf(rs); owner != nil && owner.Kind == pubKindDeployment.Kind {
			return w.workloadScale(namespace, owner)
		}
	}
	if obj.GetDeletionTimestamp() != nil {
		return "", 0, false
	}
	return obj.GetUID(), replicas, true
}
