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
	pf := p.Plugins.PostFilter
	var explicit []string
	for _, e := range pf.Enabled {
		if slices.Contains(preemption, e.Name) && !slices.Contains(explicit, e.Name) {
			explicit = append(explicit, e.Name)
		}
	}
	var overrides, fromMultiPoint []string
	if !listed(pf.Disabled, "*") {
		for _, e := range p.Plugins.MultiPoint.Enabled {
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
// group) preemption: the WorkloadAwarePreemption feature gate, as
// --feature-gates set it before the check runs.
func gangPreemption() bool {
	return utilfeature.DefaultFeatureGate.Enabled(features.WorkloadAwarePreemption)
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
		return nil
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

// ProfilePlugins says where budgetguard's plugins run in profile p, for
// budget.ReportProfile: BudgetAwarePreemption at postFilter, or nothing;
// and, with the WorkloadAwarePreemption gate on, at podGroupPostFilter too.
// kube-scheduler hands a pod group's preemption to the plugin built under
// the name DefaultPreemption, which the shipped profile still builds (it
// is disabled at postFilter only); budgetguard's scheduler hands it to
// BudgetAwarePreemption instead in every profile that runs it at
// postFilter (budgetpreemption.EnablePodGroupPreemption), so such a
// profile never preempts for a pod group without budgets.
func ProfilePlugins(p *config.KubeSchedulerProfile) budget.ProfilePlugins {
	out := budget.ProfilePlugins{}
	if slices.Contains(preemptionAtPostFilter(p), budgetpreemption.Name) {
		out["postFilter"] = []string{budgetpreemption.Name}
		if gangPreemption() {
			out["podGroupPostFilter"] = []string{budgetpreemption.Name}
		}
	}
	return out
}

// Report logs and exports, per profile of cfg, where budgetguard's plugins
// run (budget.ReportProfile); a profile without them is logged as a
// warning.
func Report(logger klog.Logger, cfg *config.KubeSchedulerConfiguration) {
	for i := range cfg.Profiles {
		p := &cfg.Profiles[i]
		budget.ReportProfile(logger, component, p.SchedulerName, ProfilePlugins(p))
	}
}
