package budgetevictor

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// BudgetAwareEvictorArgs configure the BudgetAwareEvictor plugin.
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

// DeepCopyInto copies the receiver into out.
func (in *BudgetAwareEvictorArgs) DeepCopyInto(out *BudgetAwareEvictorArgs) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	if in.HonorSafeToEvict != nil {
		v := *in.HonorSafeToEvict
		out.HonorSafeToEvict = &v
	}
	if in.CacheSyncTimeoutSeconds != nil {
		v := *in.CacheSyncTimeoutSeconds
		out.CacheSyncTimeoutSeconds = &v
	}
}

// DeepCopy returns a deep copy of the receiver.
func (in *BudgetAwareEvictorArgs) DeepCopy() *BudgetAwareEvictorArgs {
	if in == nil {
		return nil
	}
	out := new(BudgetAwareEvictorArgs)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *BudgetAwareEvictorArgs) DeepCopyObject() runtime.Object {
	if c := in.DeepCopy(); c != nil {
		return c
	}
	return nil
}
