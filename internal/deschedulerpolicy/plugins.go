package deschedulerpolicy

import (
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/descheduler/pkg/api/v1alpha2"
	"sigs.k8s.io/descheduler/pkg/framework/pluginregistry"
	frameworktypes "sigs.k8s.io/descheduler/pkg/framework/types"

	suggestpkg "github.com/budgetguard/budgetguard/internal/suggest"
	"github.com/budgetguard/budgetguard/plugins/budgetevictor"
)

// extensionPoint is one list of enabled plugins that the descheduler builds
// a profile from, by its field name in v1alpha2.
type extensionPoint struct {
	field   string
	enabled []string
	// implements reports whether a registered plugin's PluginType runs at
	// this point, as frameworkprofile's registryToExtensionPoints decides.
	implements func(pluginType any) bool
}

// extensionPoints are the points NewProfile checks against the registry
// (pkg/framework/profile/profile.go). presort and sort are decoded but
// never read, so the descheduler starts whatever they list.
func extensionPoints(p v1alpha2.Plugins) []extensionPoint {
	isEvictor := func(t any) bool { _, ok := t.(frameworktypes.EvictorPlugin); return ok }
	return []extensionPoint{
		{"deschedule", p.Deschedule.Enabled, func(t any) bool { _, ok := t.(frameworktypes.DeschedulePlugin); return ok }},
		{"balance", p.Balance.Enabled, func(t any) bool { _, ok := t.(frameworktypes.BalancePlugin); return ok }},
		{"filter", p.Filter.Enabled, isEvictor},
		{"preevictionfilter", p.PreEvictionFilter.Enabled, isEvictor},
	}
}

// checkEnabledPlugins checks the plugins profile i enables, as the
// descheduler does when it builds the profile at start
// (frameworkprofile.NewProfile, buildPlugin) and refuses to run: each
// enabled name must be a registered plugin that runs at that extension
// point, and have a pluginConfig entry (DefaultEvictor excepted: the
// descheduler adds its entry). Without this, --validate-only passed a
// policy whose misspelt plugin name only the start found ("configures
// deschedule extension point of non-existing plugins"). Each error names
// the field and the name as written, with the registered name it is
// closest to. BudgetAwareEvictor's own pluginConfig rule is
// checkBudgetAwareEvictor's, which says more.
func checkEnabledPlugins(i int, prof v1alpha2.DeschedulerProfile, registry pluginregistry.Registry) []error {
	var errs []error
	for _, ep := range extensionPoints(prof.Plugins) {
		for j, name := range ep.enabled {
			path := fmt.Sprintf("profiles[%d].plugins.%s.enabled[%d]", i, ep.field, j)
			util, ok := registry[name]
			if !ok {
				errs = append(errs, fmt.Errorf("%s: unknown plugin %q%s", path, name, suggest(name, ep.field, pluginsAt(ep, registry))))
				continue
			}
			if !ep.implements(util.PluginType) {
				errs = append(errs, fmt.Errorf("%s: plugin %q does not run at %s; %s plugins: %s",
					path, name, ep.field, ep.field, strings.Join(pluginsAt(ep, registry), ", ")))
				continue
			}
			if name == "DefaultEvictor" || name == budgetevictor.PluginName {
				continue
			}
			if !slices.ContainsFunc(prof.PluginConfigs, func(pc v1alpha2.PluginConfig) bool { return pc.Name == name }) {
				errs = append(errs, fmt.Errorf("%s: plugin %q is enabled but not configured, which the descheduler refuses; add \"- name: %s\" to profiles[%d].pluginConfig",
					path, name, name, i))
			}
		}
	}
	return errs
}

// pluginsAt returns the registered plugins that run at ep, sorted.
func pluginsAt(ep extensionPoint, registry pluginregistry.Registry) []string {
	var out []string
	for _, name := range registeredNames(registry) {
		if ep.implements(registry[name].PluginType) {
			out = append(out, name)
		}
	}
	return out
}

// suggest returns "; did you mean X?" for the candidate name is likely a
// misspelling of, else the list of the candidates, the plugins of point.
func suggest(name, point string, candidates []string) string {
	if best, ok := suggestpkg.Closest(name, candidates); ok {
		return fmt.Sprintf("; did you mean %q?", best)
	}
	if len(candidates) == 0 {
		return ""
	}
	return fmt.Sprintf("; %s plugins: %s", point, strings.Join(candidates, ", "))
}
