package budgetevictor

import "k8s.io/utils/ptr"

// DefaultCacheSyncTimeoutSeconds is how long an extension point waits for
// the budget cache to sync unless the args say otherwise.
const DefaultCacheSyncTimeoutSeconds int32 = 30

// SetDefaultsBudgetAwareEvictorArgs fills the unset fields of args. The
// scheme's and the descheduler registry's defaulters (register.go) call it.
func SetDefaultsBudgetAwareEvictorArgs(args *BudgetAwareEvictorArgs) {
	if args.HonorSafeToEvict == nil {
		args.HonorSafeToEvict = ptr.To(true)
	}
	if args.CacheSyncTimeoutSeconds == nil {
		args.CacheSyncTimeoutSeconds = ptr.To(DefaultCacheSyncTimeoutSeconds)
	}
}
