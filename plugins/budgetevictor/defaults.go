package budgetevictor

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// DefaultCacheSyncTimeoutSeconds is how long an extension point waits for
// the budget cache to sync unless the args say otherwise.
const DefaultCacheSyncTimeoutSeconds int32 = 30

// SetDefaultsBudgetAwareEvictorArgs fills the unset fields of
// BudgetAwareEvictorArgs. It has the descheduler registry's defaulter
// signature.
func SetDefaultsBudgetAwareEvictorArgs(obj runtime.Object) {
	args, ok := obj.(*BudgetAwareEvictorArgs)
	if !ok {
		return
	}
	if args.HonorSafeToEvict == nil {
		args.HonorSafeToEvict = ptr.To(true)
	}
	if args.CacheSyncTimeoutSeconds == nil {
		args.CacheSyncTimeoutSeconds = ptr.To(DefaultCacheSyncTimeoutSeconds)
	}
}
