package budgetevictor

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// MaxCacheSyncTimeoutSeconds is the largest accepted cacheSyncTimeoutSeconds.
const MaxCacheSyncTimeoutSeconds int32 = 600

// ValidateBudgetAwareEvictorArgs checks args; every error names its field
// under path, e.g. "profiles[0].pluginConfig[1].args.cacheSyncTimeoutSeconds".
func ValidateBudgetAwareEvictorArgs(path *field.Path, args *BudgetAwareEvictorArgs) error {
	var errs field.ErrorList
	if args == nil {
		return field.ErrorList{field.Required(path, "BudgetAwareEvictorArgs are required")}.ToAggregate()
	}
	if t := args.CacheSyncTimeoutSeconds; t != nil && (*t < 1 || *t > MaxCacheSyncTimeoutSeconds) {
		errs = append(errs, field.Invalid(path.Child("cacheSyncTimeoutSeconds"), *t,
			fmt.Sprintf("must be between 1 and %d", MaxCacheSyncTimeoutSeconds)))
	}
	return errs.ToAggregate()
}
