package budgetpreemption

import (
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateBudgetAwarePreemptionArgs checks args; every error names its field
// under path, e.g. "profiles[0].pluginConfig[1].args.actuation".
func ValidateBudgetAwarePreemptionArgs(path *field.Path, args *BudgetAwarePreemptionArgs) error {
	var errs field.ErrorList
	switch args.Mode {
	case ModeStrict, ModeBestEffort:
	default:
		errs = append(errs, field.NotSupported(path.Child("mode"), args.Mode, []Mode{ModeStrict, ModeBestEffort}))
	}
	switch args.Actuation {
	case ActuationEvict, ActuationDelete:
	default:
		errs = append(errs, field.NotSupported(path.Child("actuation"), args.Actuation, []Actuation{ActuationEvict, ActuationDelete}))
	}
	if p := args.OverrideBudgetsAtPriority; p != nil && *p <= 0 {
		// Pods without a PriorityClass have priority 0: at 0 or below,
		// every one of them could break budgets.
		errs = append(errs, field.Invalid(path.Child("overrideBudgetsAtPriority"), *p,
			"must be above 0: pods without a priority class have priority 0, so every one of them would break budgets; "+
				"use a priority only critical pods reach, e.g. 2000000000 (system-cluster-critical), or leave it unset so that no preemptor breaks budgets"))
	}
	if v := args.ExpendablePodsPriorityCutoff; v > 0 {
		// Expendable victims are taken whatever their budgets: above 0,
		// every pod without a priority class would be.
		errs = append(errs, field.Invalid(path.Child("expendablePodsPriorityCutoff"), v,
			"must be 0 or below: pods without a priority class have priority 0, so above 0 every one of them would be preempted whatever its disruption budget; "+
				"set it to cluster-autoscaler's --expendable-pods-priority-cutoff (default -10)"))
	}
	pct, abs := path.Child("minCandidateNodesPercentage"), path.Child("minCandidateNodesAbsolute")
	if v := args.MinCandidateNodesPercentage; v < 0 || v > 100 {
		errs = append(errs, field.Invalid(pct, v, "not in valid range [0, 100]"))
	}
	if v := args.MinCandidateNodesAbsolute; v < 0 {
		errs = append(errs, field.Invalid(abs, v, "not in valid range [0, inf)"))
	}
	if args.MinCandidateNodesPercentage == 0 && args.MinCandidateNodesAbsolute == 0 {
		errs = append(errs,
			field.Invalid(pct, args.MinCandidateNodesPercentage, "cannot be zero at the same time as minCandidateNodesAbsolute"),
			field.Invalid(abs, args.MinCandidateNodesAbsolute, "cannot be zero at the same time as minCandidateNodesPercentage"))
	}
	return errs.ToAggregate()
}
