package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// PubOperation is an operation on a pod that a PodUnavailableBudget can
// protect.
//
// +kubebuilder:validation:Enum=DELETE;UPDATE;EVICT;RESIZE
type PubOperation string

// The operations, as OpenKruise names them.
const (
	PubDeleteOperation PubOperation = "DELETE"
	PubUpdateOperation PubOperation = "UPDATE"
	PubEvictOperation  PubOperation = "EVICT"
	PubResizeOperation PubOperation = "RESIZE"
)

// Annotations of the PodUnavailableBudget API. The first three are the
// v1alpha1 forms of spec fields (deprecated by OpenKruise, still read).
const (
	// PubProtectOperationAnnotation on a PUB: the operations it protects,
	// comma separated (spec.protectOperations in v1beta1).
	PubProtectOperationAnnotation = "kruise.io/pub-protect-operations"
	// PubProtectTotalReplicasAnnotation on a PUB: the replicas to count
	// when the pods' workload has no scale (spec.protectTotalReplicas).
	PubProtectTotalReplicasAnnotation = "pub.kruise.io/protect-total-replicas"
	// PodPubNoProtectionAnnotation on a pod, a true boolean: no PUB
	// protects it (spec.ignoredPodSelector selects pods in v1beta1).
	PodPubNoProtectionAnnotation = "pub.kruise.io/no-protect"
	// PodRelatedPubAnnotation on a pod names its PUB; OpenKruise's
	// mutating webhook writes it when the pod is created.
	PodRelatedPubAnnotation = "pub.kruise.io/related-pub"
	// DeprecatedPodRelatedPubAnnotation is the older name of
	// PodRelatedPubAnnotation, still on pods created before it.
	DeprecatedPodRelatedPubAnnotation = "kruise.io/related-pub"
)

// PodUnavailableBudgetSpec is what the budget protects and how much.
type PodUnavailableBudgetSpec struct {
	// Selector selects the pods of the budget, when TargetReference is
	// not set.
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// TargetReference names the workload whose pods the budget covers;
	// it takes priority over Selector.
	TargetReference *TargetReference `json:"targetRef,omitempty"`

	// MaxUnavailable is how many of the pods may be unavailable after a
	// protected operation; it takes priority over MinAvailable.
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// MinAvailable is how many of the pods must stay available after a
	// protected operation.
	MinAvailable *intstr.IntOrString `json:"minAvailable,omitempty"`

	// ProtectOperations lists the operations the budget protects; empty
	// means DELETE, UPDATE and EVICT.
	// +optional
	ProtectOperations []PubOperation `json:"protectOperations,omitempty"`

	// ProtectTotalReplicas is the number of replicas to count when the
	// pods have no workload, or one without the scale subresource.
	// +optional
	// +kubebuilder:validation:Minimum=1
	ProtectTotalReplicas *int32 `json:"protectTotalReplicas,omitempty"`

	// IgnoredPodSelector selects pods that the budget never protects.
	// +optional
	IgnoredPodSelector *metav1.LabelSelector `json:"ignoredPodSelector,omitempty"`
}

// TargetReference names a workload.
type TargetReference struct {
	// APIVersion of the workload.
	APIVersion string `json:"apiVersion,omitempty"`
	// Kind of the workload.
	Kind string `json:"kind,omitempty"`
	// Name of the workload.
	Name string `json:"name,omitempty"`
}

// PodUnavailableBudgetStatus is what OpenKruise's controller and webhook
// observed and recorded.
type PodUnavailableBudgetStatus struct {
	// ObservedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// DisruptedPods are the pods whose eviction or deletion the webhook
	// allowed and the controller has not observed yet, with the time.
	// +optional
	DisruptedPods map[string]metav1.Time `json:"disruptedPods,omitempty"`

	// UnavailablePods are the pods whose update the webhook allowed, until
	// they are available again.
	// +optional
	UnavailablePods map[string]metav1.Time `json:"unavailablePods,omitempty"`

	// UnavailableAllowed is how many more pods may become unavailable.
	UnavailableAllowed int32 `json:"unavailableAllowed"`

	// CurrentAvailable is how many of the pods are available.
	CurrentAvailable int32 `json:"currentAvailable"`

	// DesiredAvailable is how many of the pods must stay available.
	DesiredAvailable int32 `json:"desiredAvailable"`

	// TotalReplicas is how many pods the budget counts.
	TotalReplicas int32 `json:"totalReplicas"`
}

// PodUnavailableBudget is OpenKruise's disruption budget for pods: it
// protects deletes, evictions and in-place updates alike.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=pub
// +kubebuilder:storageversion
// +kubebuilder:printcolumn:name="Allowed",type="integer",JSONPath=".status.unavailableAllowed",description="UnavailableAllowed number of pod unavailable that are currently allowed"
// +kubebuilder:printcolumn:name="Current",type="integer",JSONPath=".status.currentAvailable",description="CurrentAvailable current number of available pods"
// +kubebuilder:printcolumn:name="Desired",type="integer",JSONPath=".status.desiredAvailable",description="DesiredAvailable minimum desired number of available pods"
// +kubebuilder:printcolumn:name="Total",type="integer",JSONPath=".status.totalReplicas",description="TotalReplicas total number of pods counted by this budget"
type PodUnavailableBudget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PodUnavailableBudgetSpec   `json:"spec,omitempty"`
	Status PodUnavailableBudgetStatus `json:"status,omitempty"`
}

// PodUnavailableBudgetList is a list of PodUnavailableBudgets.
//
// +kubebuilder:object:root=true
type PodUnavailableBudgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PodUnavailableBudget `json:"items"`
}
