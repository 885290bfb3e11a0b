package testobj

import (
	"time"

	kruisepolicy "github.com/openkruise/kruise-api/policy/v1alpha1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// PDBWrapper builds a PodDisruptionBudget.
type PDBWrapper struct{ policyv1.PodDisruptionBudget }

// MakePDB returns a builder of an empty PodDisruptionBudget.
func MakePDB() *PDBWrapper { return &PDBWrapper{} }

// Obj returns the PDB.
func (w *PDBWrapper) Obj() *policyv1.PodDisruptionBudget { return &w.PodDisruptionBudget }

// Name sets the name.
func (w *PDBWrapper) Name(s string) *PDBWrapper { w.ObjectMeta.Name = s; return w }

// Namespace sets the namespace.
func (w *PDBWrapper) Namespace(s string) *PDBWrapper { w.ObjectMeta.Namespace = s; return w }

// UID sets the UID.
func (w *PDBWrapper) UID(s string) *PDBWrapper { w.ObjectMeta.UID = types.UID(s); return w }

// Generation sets metadata.generation.
func (w *PDBWrapper) Generation(g int64) *PDBWrapper { w.ObjectMeta.Generation = g; return w }

// Selector sets spec.selector (nil matches no pod, {} every pod).
func (w *PDBWrapper) Selector(s *metav1.LabelSelector) *PDBWrapper {
	w.Spec.Selector = s
	return w
}

// MatchLabels sets spec.selector to match the key-value pairs kv.
func (w *PDBWrapper) MatchLabels(kv ...string) *PDBWrapper { return w.Selector(Selector(kv...)) }

// MinAvailable sets spec.minAvailable to an integer.
func (w *PDBWrapper) MinAvailable(n int32) *PDBWrapper {
	return w.MinAvailableValue(intstr.FromInt32(n))
}

// MinAvailableValue sets spec.minAvailable (an integer or a percentage).
func (w *PDBWrapper) MinAvailableValue(v intstr.IntOrString) *PDBWrapper {
	w.Spec.MinAvailable = &v
	return w
}

// MaxUnavailable sets spec.maxUnavailable to an integer.
func (w *PDBWrapper) MaxUnavailable(n int32) *PDBWrapper {
	return w.MaxUnavailableValue(intstr.FromInt32(n))
}

// MaxUnavailableValue sets spec.maxUnavailable (an integer or a percentage).
func (w *PDBWrapper) MaxUnavailableValue(v intstr.IntOrString) *PDBWrapper {
	w.Spec.MaxUnavailable = &v
	return w
}

// UnhealthyPodEvictionPolicy sets spec.unhealthyPodEvictionPolicy; "" leaves
// it unset.
func (w *PDBWrapper) UnhealthyPodEvictionPolicy(p policyv1.UnhealthyPodEvictionPolicyType) *PDBWrapper {
	w.Spec.UnhealthyPodEvictionPolicy = nil
	if p != "" {
		w.Spec.UnhealthyPodEvictionPolicy = ptr.To(p)
	}
	return w
}

// Status sets an up-to-date status (observedGeneration = generation) with
// currentHealthy healthy, desiredHealthy desired and disruptionsAllowed
// allowed; expectedPods is healthy.
func (w *PDBWrapper) Status(healthy, desired, allowed int32) *PDBWrapper {
	w.PodDisruptionBudget.Status.ObservedGeneration = w.ObjectMeta.Generation
	w.PodDisruptionBudget.Status.CurrentHealthy = healthy
	w.PodDisruptionBudget.Status.DesiredHealthy = desired
	w.PodDisruptionBudget.Status.DisruptionsAllowed = allowed
	w.PodDisruptionBudget.Status.ExpectedPods = healthy
	return w
}

// ExpectedPods sets status.expectedPods.
func (w *PDBWrapper) ExpectedPods(n int32) *PDBWrapper {
	w.PodDisruptionBudget.Status.ExpectedPods = n
	return w
}

// ObservedGeneration sets status.observedGeneration.
func (w *PDBWrapper) ObservedGeneration(g int64) *PDBWrapper {
	w.PodDisruptionBudget.Status.ObservedGeneration = g
	return w
}

// Disrupted records pods in status.disruptedPods at at.
func (w *PDBWrapper) Disrupted(at time.Time, pods ...string) *PDBWrapper {
	if w.PodDisruptionBudget.Status.DisruptedPods == nil {
		w.PodDisruptionBudget.Status.DisruptedPods = map[string]metav1.Time{}
	}
	for _, p := range pods {
		w.PodDisruptionBudget.Status.DisruptedPods[p] = metav1.NewTime(at)
	}
	return w
}

// PUBWrapper builds an OpenKruise PodUnavailableBudget.
type PUBWrapper struct {
	kruisepolicy.PodUnavailableBudget
}

// MakePUB returns a builder of an empty PodUnavailableBudget.
func MakePUB() *PUBWrapper { return &PUBWrapper{} }

// Obj returns the PUB.
func (w *PUBWrapper) Obj() *kruisepolicy.PodUnavailableBudget { return &w.PodUnavailableBudget }

// Name sets the name.
func (w *PUBWrapper) Name(s string) *PUBWrapper { w.ObjectMeta.Name = s; return w }

// Namespace sets the namespace.
func (w *PUBWrapper) Namespace(s string) *PUBWrapper { w.ObjectMeta.Namespace = s; return w }

// UID sets the UID.
func (w *PUBWrapper) UID(s string) *PUBWrapper { w.ObjectMeta.UID = types.UID(s); return w }

// Generation sets metadata.generation.
func (w *PUBWrapper) Generation(g int64) *PUBWrapper { w.ObjectMeta.Generation = g; return w }

// Annotation adds an annotation.
func (w *PUBWrapper) Annotation(k, v string) *PUBWrapper {
	w.Annotations = with(w.Annotations, k, v)
	return w
}

// Selector sets spec.selector.
func (w *PUBWrapper) Selector(s *metav1.LabelSelector) *PUBWrapper {
	w.Spec.Selector = s
	return w
}

// MatchLabels sets spec.selector to match the key-value pairs kv.
func (w *PUBWrapper) MatchLabels(kv ...string) *PUBWrapper { return w.Selector(Selector(kv...)) }

// TargetRef sets spec.targetRef.
func (w *PUBWrapper) TargetRef(apiVersion, kind, name string) *PUBWrapper {
	w.Spec.TargetReference = &kruisepolicy.TargetReference{APIVersion: apiVersion, Kind: kind, Name: name}
	return w
}

// MaxUnavailable sets spec.maxUnavailable (an integer or a percentage).
func (w *PUBWrapper) MaxUnavailable(v intstr.IntOrString) *PUBWrapper {
	w.Spec.MaxUnavailable = &v
	return w
}

// MinAvailable sets spec.minAvailable (an integer or a percentage).
func (w *PUBWrapper) MinAvailable(v intstr.IntOrString) *PUBWrapper {
	w.Spec.MinAvailable = &v
	return w
}

// Status sets an up-to-date status (observedGeneration = generation) with
// currentAvailable available, desiredAvailable desired and
// unavailableAllowed allowed; totalReplicas is available.
func (w *PUBWrapper) Status(available, desired, allowed int32) *PUBWrapper {
	w.PodUnavailableBudget.Status.ObservedGeneration = w.ObjectMeta.Generation
	w.PodUnavailableBudget.Status.CurrentAvailable = available
	w.PodUnavailableBudget.Status.DesiredAvailable = desired
	w.PodUnavailableBudget.Status.UnavailableAllowed = allowed
	w.PodUnavailableBudget.Status.TotalReplicas = available
	return w
}

// Disrupted records pods in status.disruptedPods at at.
func (w *PUBWrapper) Disrupted(at time.Time, pods ...string) *PUBWrapper {
	w.PodUnavailableBudget.Status.DisruptedPods = withTimes(w.PodUnavailableBudget.Status.DisruptedPods, at, pods)
	return w
}

// Unavailable records pods in status.unavailablePods at at.
func (w *PUBWrapper) Unavailable(at time.Time, pods ...string) *PUBWrapper {
	w.PodUnavailableBudget.Status.UnavailablePods = withTimes(w.PodUnavailableBudget.Status.UnavailablePods, at, pods)
	return w
}

func withTimes(m map[string]metav1.Time, at time.Time, keys []string) map[string]metav1.Time {
	if m == nil {
		m = map[string]metav1.Time{}
	}
	for _, k := range keys {
		m[k] = metav1.NewTime(at)
	}
	return m
}
