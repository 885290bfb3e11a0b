package schedulerconfig

import (
	"fmt"
	"slices"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"

	"github.com/budgetguard/budgetguard/plugins/budget"
	"github.com/budgetguard/budgetguard/plugins/budgetpreemption"
)

// component is the scheduler's name in budget.ReportProfile.
const component = "scheduler"

// preemption holds the plugins whose PostFilter extension preempts.
var preemption = []string{names.DefaultPreemption, budgetpreemption.Name}

// preemptionAtPostFilter returns the preemption plugins that run at
// postFilter in profile p, in the order the framework runs them. As
// expandMultiPointPlugins does, a multiPoint plugin runs at postFilter
// unless postFilter.disabled lists it or "*"; a plugin postFilter.enabled
// lists always runs. Plugins enabled both ways run first in
// postFilter.enabled's order, then multiPoint's, then the rest of
// postFilter.enabled. Other plugins with a PostFilter extension (such as
// DynamicResources) are left out.
func preemptionAtPostFilter(p *config.KubeSchedulerProfile) []string {
	if p.Plugins == nil {
		return nil
	}
	return preemptionAt(p.Plugins, p.Plugins.PostFilter)
}

// preemptionAtPodGroupPostFilter is preemptionAtPostFilter at
// podGroupPostFilter, where pod groups preempt (the GenericWorkload gate).
func preemptionAtPodGroupPostFilter(p *config.KubeSchedulerProfile) []string {
	if p.Plugins == nil {
		return nil
	}
	return preemptionAt(p.Plugins, p.Plugins.PodGroupPostFilter)
}

// preemptionAt returns the preemption plugins that run at the extension
// point whose plugin set is pf, with multiPoint expanded into it.
func preemptionAt(plugins *config.Plugins, pf config.PluginSet) []string {
	var explicit []string
	for _, e := range pf.Enabled {
		if slices.Contains(preemption, e.Name) && !slices.Contains(explicit, e.Name) {
			explicit = append(explicit, e.Name)
		}
	}
	var overrides, fromMultiPoint []string
	if !listed(pf.Disabled, "*") {
		for _, e := range plugins.MultiPoint.Enabled {
			switch {
			case !slices.Contains(preemption, e.Name) || listed(pf.Disabled, e.Name):
			case slices.Contains(explicit, e.Name):
				overrides = append(overrides, e.Name)
			case !slices.Contains(fromMultiPoint, e.Name):
				fromMultiPoint = append(fromMultiPoint, e.Name)
			}
		}
	}
	var run []string
	for _, name := range explicit {
		if slices.Contains(overrides, name) {
			run = append(run, name)
		}
	}
	run = append(run, fromMultiPoint...)
	for _, name := range explicit {
		if !slices.Contains(overrides, name) {
			run = append(run, name)
		}
	}
	return run
}

// gangPreemption reports whether kube-scheduler runs workload-aware (pod
// group) preemption: the GenericWorkload feature gate, as --feature-gates
// set it before the check runs.
func gangPreemption() bool {
	return utilfeature.DefaultFeatureGate.Enabled(features.GenericWorkload)
}

func listed(plugins []config.Plugin, name string) bool {
	return slices.ContainsFunc(plugins, func(p config.Plugin) bool { return p.Name == name })
}

// profileErrors checks profile i: DefaultPreemption must not run beside
// BudgetAwarePreemption, and BudgetAwarePreemption, when configured or
// enabled anywhere, must run at postFilter.
func profileErrors(i int, p *config.KubeSchedulerProfile) []error {
	const ours, theirs = budgetpreemption.Name, names.DefaultPreemption
	where := fmt.Sprintf("profiles[%d] (%q)", i, p.SchedulerName)
	run := preemptionAtPostFilter(p)
	ourAt, theirAt := slices.Index(run, ours), slices.Index(run, theirs)
	var plugins config.Plugins
	if p.Plugins != nil {
		plugins = *p.Plugins
	}

	if ourAt >= 0 && theirAt >= 0 {
		point := "postFilter"
		if !listed(plugins.PostFilter.Enabled, ours) {
			point = "multiPoint"
		}
		why := theirs + " runs first and ignores budgets"
		if theirAt > ourAt {
			why = theirs + " runs whenever " + ours + " refuses, and ignores budgets"
		}
		fix := "add {name: " + theirs + "} to plugins.postFilter.disabled"
		if listed(plugins.PostFilter.Enabled, theirs) {
			fix = "remove {name: " + theirs + "} from plugins.postFilter.enabled and add it to plugins.postFilter.disabled"
		}
		return []error{fmt.Errorf("%s.plugins.%s: %s and %s are both enabled; %s: %s", where, point, ours, theirs, why, fix)}
	}
	if ourAt >= 0 {
		return podGroupErrors(where, p, plugins)
	}

	// BudgetAwarePreemption does not run at postFilter. kube-scheduler's
	// defaulting adds its pluginConfig wherever it is enabled, so name the
	// extension point that enables it, else the pluginConfig.
	var field string
	switch {
	case listed(plugins.MultiPoint.Enabled, ours):
		field = ".plugins.multiPoint: " + ours + " is enabled there but plugins.postFilter.disabled turns it off at postFilter, where it preempts"
	case listed(plugins.PreEnqueue.Enabled, ours):
		field = ".plugins.preEnqueue: " + ours + " is enabled there but not at postFilter, where it preempts"
	default:
		j := slices.IndexFunc(p.PluginConfig, func(pc config.PluginConfig) bool { return pc.Name == ours })
		if j < 0 {
			return nil
		}
		field = fmt.Sprintf(".pluginConfig[%d]: %s is configured but not enabled at postFilter", j, ours)
	}
	consequence := "the profile does not preempt"
	fix := "add {name: " + ours + "} to plugins.postFilter.enabled"
	if theirAt >= 0 {
		consequence = "the profile preempts with " + theirs + ", which ignores budgets"
		fix += " and {name: " + theirs + "} to plugins.postFilter.disabled"
	}
	return []error{fmt.Errorf("%s%s; %s: %s", where, field, consequence, fix)}
}

// podGroupErrors checks, in a profile that runs BudgetAwarePreemption at
// postFilter and with the GenericWorkload gate on (without it
// kube-scheduler runs no podGroupPostFilter plugin), where pod groups
// preempt: not DefaultPreemption (kube-scheduler's defaults enable it at
// podGroupPostFilter), and BudgetAwarePreemption, so that a gang never
// preempts without budgets nor goes without the preemption its pods get.
func podGroupErrors(where string, p *config.KubeSchedulerProfile, plugins config.Plugins) []error {
	const ours, theirs = budgetpreemption.Name, names.DefaultPreemption
	if !gangPreemption() {
		// kube-scheduler runs no podGroupPostFilter plugin then.
		return nil
	}
	run := preemptionAtPodGroupPostFilter(p)
	if slices.Contains(run, theirs) {
		fix := "add {name: " + theirs + "} to plugins.podGroupPostFilter.disabled"
		if listed(plugins.PodGroupPostFilter.Enabled, theirs) {
			fix = "remove {name: " + theirs + "} from plugins.podGroupPostFilter.enabled and add it to plugins.podGroupPostFilter.disabled"
		}
		if !slices.Contains(run, ours) {
			fix += ", and {name: " + ours + "} to plugins.podGroupPostFilter.enabled"
		}
		return []error{fmt.Errorf("%s.plugins.podGroupPostFilter: %s is enabled there and preempts for pod groups without budgets: %s", where, theirs, fix)}
	}
	if !slices.Contains(run, ours) {
		return []error{fmt.Errorf("%s.plugins.podGroupPostFilter: %s is not enabled there, so pod groups do not preempt (the GenericWorkload gate is on): add {name: %s} to plugins.podGroupPostFilter.enabled", where, ours, ours)}
	}
	return nil
}

// ProfilePlugins says where budgetguard's plugins run in profile p, for
// budget.ReportProfile: BudgetAwarePreemption at postFilter, at preEnqueue
// where the profile enables it there as well, and, with the GenericWorkload
// gate on, at podGroupPostFilter where the profile enables it there; or
// nothing.
func ProfilePlugins(p *config.KubeSchedulerProfile) budget.ProfilePlugins {
	out := budget.ProfilePlugins{}
	if !slices.Contains(preemptionAtPostFilter(p), budgetpreemption.Name) {
		return out
	}
	out["postFilter"] = []string{budgetpreemption.Name}
	if slices.Contains(preemptionAt(p.Plugins, p.Plugins.PreEnqueue), budgetpreemption.Name) {
		out["preEnqueue"] = []string{budgetpreemption.Name}
	}
	if gangPreemption() && slices.Contains(preemptionAtPodGroupPostFilter(p), budgetpreemption.Name) {
		out["podGroupPostFilter"] = []string{budgetpreemption.Name}
	}
	return out
}

// Report logs and exports, per profile of cfg, where budgetguard's plugins
// run (budget.ReportProfile); a profile without them is logged as a
// warning, and so is one that preempts with BudgetAwarePreemption without
// its preEnqueue gate while preemption is asynchronous.
func Report(logger klog.Logger, cfg *config.KubeSchedulerConfiguration) {
	for i := range cfg.Profiles {
		p := &cfg.Profiles[i]
		plugins := ProfilePlugins(p)
		budget.ReportProfile(logger, component, p.SchedulerName, plugins)
		if len(plugins["postFilter"]) > 0 && len(plugins["preEnqueue"]) == 0 && asyncPreemption() {
			logger.Info("Warning: "+noGateWarning, "component", component, "profile", p.SchedulerName,
				"field", fmt.Sprintf("profiles[%d].plugins.preEnqueue", i))
		}
	}
}

// noGateWarning is logged for a profile that runs BudgetAwarePreemption at
// postFilter but not at preEnqueue while the SchedulerAsyncPreemption gate
// is on. Its PreEnqueue keeps a preemptor out of the queue while its
// victims are being disrupted (as DefaultPreemption's does); without it the
// preemptor is scheduled again meanwhile and may preempt a second time,
// taking more victims than one preemption needs (each within its budgets).
const noGateWarning = "BudgetAwarePreemption preempts here but is not enabled at preEnqueue, so a preemptor may preempt again while its victims are still being disrupted: add {name: BudgetAwarePreemption} to plugins.preEnqueue.enabled and {name: DefaultPreemption} to plugins.preEnqueue.disabled"

// asyncPreemption reports whether kube-scheduler preempts asynchronously:
// the SchedulerAsyncPreemption feature gate, as --feature-gates set it
// before the check runs.
func asyncPreemption() bool {
	return utilfeature.DefaultFeatureGate.Enabled(features.SchedulerAsyncPreemption)
}
