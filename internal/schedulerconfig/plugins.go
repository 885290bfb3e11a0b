package schedulerconfig

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"unicode"

	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	frameworkplugins "k8s.io/kubernetes/pkg/scheduler/framework/plugins"

	"github.com/budgetguard/budgetguard/internal/suggest"
	"github.com/budgetguard/budgetguard/plugins/budgetpreemption"
)

// registeredPlugins are the plugin names bin/scheduler builds profiles
// from: kube-scheduler's in-tree registry and BudgetAwarePreemption, which
// cmd/scheduler adds (app.WithPlugin).
func registeredPlugins() []string {
	names := slices.Collect(maps.Keys(frameworkplugins.NewInTreeRegistry()))
	names = append(names, budgetpreemption.Name)
	slices.Sort(names)
	return names
}

// pluginNameErrors checks that every plugin a profile enables, at any
// extension point or multiPoint, is registered. kube-scheduler's
// validation does not: its start fails later, once it has a cluster,
// with "PostFilterPlugin "X" does not exist", so --validate-only passed
// such a file. The loaded configuration has kube-scheduler's defaults
// merged into each list, which moves the file's entries, so the errors
// name the list and the plugin as written rather than an index. Whether a
// registered plugin implements the extension point it is enabled at is
// left to kube-scheduler's start: it takes building the plugin.
func pluginNameErrors(cfg *config.KubeSchedulerConfiguration) []error {
	registered := registeredPlugins()
	var errs []error
	for i, prof := range cfg.Profiles {
		if prof.Plugins == nil {
			continue
		}
		v := reflect.ValueOf(*prof.Plugins)
		for f := range v.NumField() {
			set, ok := v.Field(f).Interface().(config.PluginSet)
			if !ok {
				continue
			}
			for _, p := range set.Enabled {
				if slices.Contains(registered, p.Name) {
					continue
				}
				hint := "; registered plugins: " + strings.Join(registered, ", ")
				if best, ok := suggest.Closest(p.Name, registered); ok {
					hint = fmt.Sprintf("; did you mean %q?", best)
				}
				errs = append(errs, fmt.Errorf("profiles[%d] (%q).plugins.%s.enabled: unknown plugin %q%s",
					i, prof.SchedulerName, lowerFirst(v.Type().Field(f).Name), p.Name, hint))
			}
		}
	}
	return errs
}

// lowerFirst turns a field of config.Plugins into its name in
// kubescheduler.config.k8s.io/v1 (PostFilter: postFilter).
func lowerFirst(s string) string {
	r := []rune(s)
	r[0] = unicode.ToLower(r[0])
	return string(r)
}
