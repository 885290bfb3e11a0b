package v1beta1

import (
	"fmt"
	"strconv"
	"strings"

	kruisev1alpha1 "github.com/openkruise/kruise-api/policy/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FromV1alpha1 returns src in the v1beta1 shape, as OpenKruise converts it:
// the spec as it is, the status as it is, and the annotations
// kruise.io/pub-protect-operations and pub.kruise.io/protect-total-replicas
// promoted into spec.protectOperations and spec.protectTotalReplicas; the
// annotations stay. src is not changed.
//
// Where Kruise's conversion would fail on an annotation that does not
// parse, FromV1alpha1 leaves that field unset and returns the object with
// an error naming the annotation: the object is still usable, and an unset
// spec.protectOperations falls back to the annotation as Kruise's webhook
// reads it.
func FromV1alpha1(src *kruisev1alpha1.PodUnavailableBudget) (*PodUnavailableBudget, error) {
	in := src.DeepCopy()
	dst := &PodUnavailableBudget{
		TypeMeta:   kindOf(GroupVersion.String()),
		ObjectMeta: in.ObjectMeta,
		Spec: PodUnavailableBudgetSpec{
			Selector:       in.Spec.Selector,
			MaxUnavailable: in.Spec.MaxUnavailable,
			MinAvailable:   in.Spec.MinAvailable,
		},
		Status: PodUnavailableBudgetStatus{
			ObservedGeneration: in.Status.ObservedGeneration,
			DisruptedPods:      in.Status.DisruptedPods,
			UnavailablePods:    in.Status.UnavailablePods,
			UnavailableAllowed: in.Status.UnavailableAllowed,
			CurrentAvailable:   in.Status.CurrentAvailable,
			DesiredAvailable:   in.Status.DesiredAvailable,
			TotalReplicas:      in.Status.TotalReplicas,
		},
	}
	if r := in.Spec.TargetReference; r != nil {
		dst.Spec.TargetReference = &TargetReference{APIVersion: r.APIVersion, Kind: r.Kind, Name: r.Name}
	}
	var errs []string
	ops, err := ParseProtectOperations(in.Annotations[PubProtectOperationAnnotation])
	if err != nil {
		errs = append(errs, err.Error())
	} else {
		dst.Spec.ProtectOperations = ops
	}
	if v, ok := in.Annotations[PubProtectTotalReplicasAnnotation]; ok && v != "" {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			errs = append(errs, fmt.Sprintf("annotation %s: %q is not a 32-bit integer", PubProtectTotalReplicasAnnotation, v))
		} else {
			dst.Spec.ProtectTotalReplicas = ptrTo(int32(n))
		}
	}
	if len(errs) > 0 {
		return dst, fmt.Errorf("podunavailablebudget %s/%s: %s", src.Namespace, src.Name, strings.Join(errs, "; "))
	}
	return dst, nil
}

// ToV1alpha1 returns src in the v1alpha1 shape, as OpenKruise converts it:
// spec.protectOperations and spec.protectTotalReplicas are written into
// their annotations (and an annotation without its field is removed);
// spec.ignoredPodSelector has no v1alpha1 form and is dropped. src is not
// changed.
func ToV1alpha1(src *PodUnavailableBudget) *kruisev1alpha1.PodUnavailableBudget {
	in := src.DeepCopy()
	dst := &kruisev1alpha1.PodUnavailableBudget{
		TypeMeta:   kindOf(kruisev1alpha1.GroupVersion.String()),
		ObjectMeta: in.ObjectMeta,
		Spec: kruisev1alpha1.PodUnavailableBudgetSpec{
			Selector:       in.Spec.Selector,
			MaxUnavailable: in.Spec.MaxUnavailable,
			MinAvailable:   in.Spec.MinAvailable,
		},
		Status: kruisev1alpha1.PodUnavailableBudgetStatus{
			ObservedGeneration: in.Status.ObservedGeneration,
			DisruptedPods:      in.Status.DisruptedPods,
			UnavailablePods:    in.Status.UnavailablePods,
			UnavailableAllowed: in.Status.UnavailableAllowed,
			CurrentAvailable:   in.Status.CurrentAvailable,
			DesiredAvailable:   in.Status.DesiredAvailable,
			TotalReplicas:      in.Status.TotalReplicas,
		},
	}
	if r := in.Spec.TargetReference; r != nil {
		dst.Spec.TargetReference = &kruisev1alpha1.TargetReference{APIVersion: r.APIVersion, Kind: r.Kind, Name: r.Name}
	}
	if dst.Annotations == nil {
		dst.Annotations = map[string]string{}
	}
	if len(in.Spec.ProtectOperations) > 0 {
		ops := make([]string, 0, len(in.Spec.ProtectOperations))
		for _, o := range in.Spec.ProtectOperations {
			if o != "" {
				ops = append(ops, string(o))
			}
		}
		dst.Annotations[PubProtectOperationAnnotation] = strings.Join(ops, ",")
	} else {
		delete(dst.Annotations, PubProtectOperationAnnotation)
	}
	if in.Spec.ProtectTotalReplicas != nil {
		dst.Annotations[PubProtectTotalReplicasAnnotation] = strconv.FormatInt(int64(*in.Spec.ProtectTotalReplicas), 10)
	} else {
		delete(dst.Annotations, PubProtectTotalReplicasAnnotation)
	}
	return dst
}

// ParseProtectOperations parses the value of the annotation
// kruise.io/pub-protect-operations ("DELETE,EVICT") as Kruise's conversion
// does: empty items are skipped, and an item that is not an operation is an
// error. An empty value gives nil.
func ParseProtectOperations(value string) ([]PubOperation, error) {
	if value == "" {
		return nil, nil
	}
	var ops []PubOperation
	for _, item := range strings.Split(value, ",") {
		op := PubOperation(strings.TrimSpace(item))
		if op == "" {
			continue
		}
		if !ValidOperation(op) {
			return nil, fmt.Errorf("annotation %s: %q is not one of DELETE, UPDATE, EVICT, RESIZE", PubProtectOperationAnnotation, op)
		}
		ops = append(ops, op)
	}
	return ops, nil
}

// ValidOperation reports whether op is one of the four operations.
func ValidOperation(op PubOperation) bool {
	switch op {
	case PubDeleteOperation, PubUpdateOperation, PubEvictOperation, PubResizeOperation:
		return true
	}
	return false
}

func ptrTo[T any](v T) *T { return &v }

// kindOf is the TypeMeta of a PodUnavailableBudget in apiVersion.
func kindOf(apiVersion string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: "PodUnavailableBudget"}
}
