package deschedulerpolicy

import (
	"fmt"
	"slices"

	"sigs.k8s.io/descheduler/pkg/api"
	"sigs.k8s.io/descheduler/pkg/api/v1alpha2"

	"github.com/budgetguard/budgetguard/plugins/budget"
	"github.com/budgetguard/budgetguard/plugins/budgetevictor"
)

// checkBudgetAwareEvictor checks how profile i uses BudgetAwareEvictor. A
// profile may leave it out (it then runs without budgetguard, and the
// start-up report says so), but one that has it at all must both configure
// it (pluginConfig) and enable it at filter and at preevictionfilter:
//
//   - configured but enabled nowhere, the plugin is never built: the
//     descheduler runs the profile without budget protection and says
//     nothing;
//   - enabled but not configured, the descheduler fails to build the
//     profile (pkg/framework/profile/profile.go, buildPlugin);
//   - enabled at one point only, half of it is missing: Filter alone takes
//     no live decision (strategies collect 429s, and where the eviction
//     gate cannot be installed nothing reserves the budgets);
//     PreEvictionFilter alone leaves pods that can never go (several PDBs,
//     safe-to-evict "false") among the candidates the node-utilization
//     strategies count. An operator who writes BudgetAwareEvictor at all
//     means the whole of it, as the shipped policy has it.
func checkBudgetAwareEvictor(i int, prof v1alpha2.DeschedulerProfile) []error {
	name := budgetevictor.PluginName
	where := fmt.Sprintf("profiles[%d] (%q)", i, prof.Name)
	configured := slices.IndexFunc(prof.PluginConfigs, func(pc v1alpha2.PluginConfig) bool { return pc.Name == name })
	atFilter := slices.Contains(prof.Plugins.Filter.Enabled, name)
	atPreEviction := slices.Contains(prof.Plugins.PreEvictionFilter.Enabled, name)
	switch {
	case configured < 0 && !atFilter && !atPreEviction:
		return nil
	case configured < 0:
		return []error{fmt.Errorf("%s.pluginConfig: %s is enabled at %s but not configured; add \"- name: %s\" to pluginConfig", where, name, enabledAt(atFilter, atPreEviction), name)}
	case !atFilter && !atPreEviction:
		return []error{fmt.Errorf("%s.pluginConfig[%d]: %s is configured but not enabled at filter or preevictionfilter; add it to plugins.filter.enabled and plugins.preevictionfilter.enabled", where, configured, name)}
	case !atPreEviction:
		return []error{fmt.Errorf("%s.plugins.preevictionfilter.enabled: %s is enabled at filter but not at preevictionfilter; enable it at both (filter drops the pods that can never go, preevictionfilter takes the live budget decision)", where, name)}
	case !atFilter:
		return []error{fmt.Errorf("%s.plugins.filter.enabled: %s is enabled at preevictionfilter but not at filter; enable it at both (filter drops the pods that can never go, preevictionfilter takes the live budget decision)", where, name)}
	}
	return nil
}

func enabledAt(atFilter, atPreEviction bool) string {
	switch {
	case atFilter && atPreEviction:
		return "filter and preevictionfilter"
	case atFilter:
		return "filter"
	}
	return "preevictionfilter"
}

// Profile says where budgetguard's plugins are enabled in one profile of a
// policy, as budget.ReportProfile takes it.
type Profile struct {
	Name    string
	Plugins budget.ProfilePlugins
}

// ProfilePlugins returns, for each profile of policy in order, where
// BudgetAwareEvictor is enabled: at "filter" and "preEvictionFilter" (the
// extension point names of the descheduler's framework, as reported by
// budget.ReportProfile). A profile without it has empty Plugins.
func ProfilePlugins(policy *api.DeschedulerPolicy) []Profile {
	if policy == nil {
		return nil
	}
	name := budgetevictor.PluginName
	out := make([]Profile, 0, len(policy.Profiles))
	for _, prof := range policy.Profiles {
		p := Profile{Name: prof.Name, Plugins: budget.ProfilePlugins{}}
		if slices.Contains(prof.Plugins.Filter.Enabled, name) {
			p.Plugins["filter"] = []string{name}
		}
		if slices.Contains(prof.Plugins.PreEvictionFilter.Enabled, name) {
			p.Plugins["preEvictionFilter"] = []string{name}
		}
		out = append(out, p)
	}
	return out
}
