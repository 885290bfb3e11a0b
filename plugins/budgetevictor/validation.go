package budgetevictor

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// MaxCacheSyncTimeoutSeconds is the largest accepted cacheSyncTimeoutSeconds.
const MaxCacheSyncTimeoutSeconds int32 = 600

// ValidateBudgetAwareEvictorArgs checks args; errors name the field below
// path, e.g. "profiles[0].pluginConfig[1].args.cacheSyncTimeoutSeconds".
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

// ValidateArgs adapts ValidateBudgetAwareEvictorArgs to the descheduler
// registry's validator signature; its errors name the field below "args".
func ValidateArgs(obj runtime.Object) error {
	args, ok := obj.(*BudgetAwareEvictorArgs)
	if !ok {
		return fmt.Errorf("want args of type BudgetAwareEvictorArgs, got %T", obj)
	}
	return ValidateBudgetAwareEvictorArgs(field.NewPath("args"), args)
}
