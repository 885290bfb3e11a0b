package runner

import (
	"context"
	"errors"
	"fmt"
	"os"

	"k8s.io/klog/v2"

	"github.com/budgetguard/budgetguard/internal/report"
	"github.com/budgetguard/budgetguard/internal/scenario"
	"github.com/budgetguard/budgetguard/manifests"
)

// Shipped files a scenario uses when its header names none, as errors name
// them.
const (
	shippedSchedulerConfig   = "manifests/scheduler/scheduler-config.yaml"
	shippedDeschedulerPolicy = "manifests/descheduler/policy.yaml"
)

// Validate checks the files every run of sc reads, without starting a
// control plane: the scheduler configuration as written and as each mode
// rewrites it (upstream and budgetguard), and the descheduler policy,
// whether or not a step deschedules. It returns every problem it finds,
// joined; each names its file. The scenario itself was checked when it was
// parsed.
//
// Run checks the same files for its own mode only; a caller that runs more
// than one mode calls Validate first, so that a mistake that only the last
// mode would trip on is found before the first control plane starts.
func Validate(ctx context.Context, sc *scenario.Scenario) error {
	if sc == nil {
		return errors.New("runner: no scenario")
	}
	dir, err := os.MkdirTemp("", "budgetguard-validate-")
	if err != nil {
		return fmt.Errorf("create a temporary directory: %w", err)
	}
	defer os.RemoveAll(dir)

	var errs []error
	if source, data, err := readOrShipped(sc, sc.SchedulerConfig, shippedSchedulerConfig, manifests.SchedulerConfig); err != nil {
		errs = append(errs, err)
	} else {
		// Budgetguard's run checks the file as written with every check,
		// upstream's with the args checks only, so a problem of the file as
		// written shows in budgetguard's run, and would be repeated by
		// upstream's. Once budgetguard's run passes, upstream's can only
		// fail on its rewrite.
		logger := klog.FromContext(ctx)
		if _, err := loadSchedulerConfig(logger, dir, source, data, report.ModeBudgetguard); err != nil {
			errs = append(errs, err)
		} else if _, err := loadSchedulerConfig(logger, dir, source, data, report.ModeUpstream); err != nil {
			errs = append(errs, err)
		}
	}
	if source, data, err := readOrShipped(sc, sc.DeschedulerPolicy, shippedDeschedulerPolicy, manifests.DeschedulerPolicy); err != nil {
		errs = append(errs, err)
	} else if _, err := checkPolicy(dir, source, data); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
