package budgetevictor

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BudgetAwareEvictorArgs configure the BudgetAwareEvictor plugin.
//
// +kubebuilder:object:generate=true
// +kubebuilder:object:root=true
type BudgetAwareEvictorArgs struct {
	metav1.TypeMeta `json:",inline"`

	// HonorSafeToEvict refuses pods annotated
	// cluster-autoscaler.kubernetes.io/safe-to-evict: "false", so that the
	// descheduler and cluster-autoscaler agree on what may be disrupted.
	// Defaults to true. "true" never bypasses a budget.
	HonorSafeToEvict *bool `json:"honorSafeToEvict,omitempty"`

	// CacheSyncTimeoutSeconds bounds how long an extension point waits for
	// the budget cache to sync before it refuses the pod. Defaults to 30.
	CacheSyncTimeoutSeconds *int32 `json:"cacheSyncTimeoutSeconds,omitempty"`
}
