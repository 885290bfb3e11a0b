package schedulerconfig

import (
	"errors"
	"fmt"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/validation"

	"github.com/budgetguard/budgetguard/plugins/budgetpreemption"
)

// Load reads the KubeSchedulerConfiguration at path with kube-scheduler's
// own loading (options.LoadConfigFromFile: strict decoding, defaulting,
// plugin args included) and validates it as kube-scheduler does. It does
// not run Check.
func Load(logger klog.Logger, path string) (*config.KubeSchedulerConfiguration, error) {
	cfg, err := options.LoadConfigFromFile(logger, path)
	if err != nil {
		return nil, err
	}
	if err := validation.ValidateKubeSchedulerConfiguration(cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

// Check checks what kube-scheduler does not in a loaded configuration: the
// BudgetAwarePreemption args (CheckArgs), that every plugin a profile
// enables is registered (pluginNameErrors; kube-scheduler finds out only
// once it runs) and, in every profile, that DefaultPreemption does not run
// beside BudgetAwarePreemption and that BudgetAwarePreemption runs at
// postFilter wherever it is configured. It
// returns every problem, one per line; each names the profile and the field
// and says what to write instead.
func Check(cfg *config.KubeSchedulerConfiguration) error {
	errs := argsErrors(cfg)
	errs = append(errs, pluginNameErrors(cfg)...)
	for i := range cfg.Profiles {
		errs = append(errs, profileErrors(i, &cfg.Profiles[i])...)
	}
	return errors.Join(errs...)
}

// CheckArgs validates the BudgetAwarePreemption args of every profile;
// errors name the field, e.g. profiles[0].pluginConfig[1].args.actuation.
// It is the part of Check that applies to a configuration the sandbox
// rewrites to run upstream DefaultPreemption.
func CheckArgs(cfg *config.KubeSchedulerConfiguration) error {
	return errors.Join(argsErrors(cfg)...)
}

func argsErrors(cfg *config.KubeSchedulerConfiguration) []error {
	var errs []error
	for i, prof := range cfg.Profiles {
		for j, pc := range prof.PluginConfig {
			if pc.Name != budgetpreemption.Name {
				continue
			}
			path := field.NewPath("profiles").Index(i).Child("pluginConfig").Index(j).Child("args")
			args, ok := pc.Args.(*budgetpreemption.BudgetAwarePreemptionArgs)
			if !ok {
				errs = append(errs, field.TypeInvalid(path, fmt.Sprintf("%T", pc.Args), "want args of kind "+budgetpreemption.Kind))
				continue
			}
			err := budgetpreemption.ValidateBudgetAwarePreemptionArgs(path, args)
			var agg utilerrors.Aggregate
			switch {
			case err == nil:
			case errors.As(err, &agg):
				errs = append(errs, agg.Errors()...)
			default:
				errs = append(errs, err)
			}
		}
	}
	return errs
}
