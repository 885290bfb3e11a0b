package budget

import (
	"sort"
	"strings"
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
)

// A profile without budgetguard's plugins runs without protection, and
// nothing else would say so: each component reports, per profile, where
// budgetguard's plugins are enabled, in its log and as the gauge
// budgetguard_profile_plugin_enabled{component,profile,plugin,extension_point}
// (1 per enabled pair) with budgetguard_profile_protected{component,profile}
// (1 when the profile has any budgetguard plugin enabled, else 0).
var (
	profilePluginEnabled = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      MetricsNamespace,
		Subsystem:      "profile",
		Name:           "plugin_enabled",
		Help:           "1 for each budgetguard plugin enabled at an extension point of a scheduler or descheduler profile.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"component", "profile", "plugin", "extension_point"})
	profileProtected = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      MetricsNamespace,
		Subsystem:      "profile",
		Name:           "protected",
		Help:           "1 when a scheduler or descheduler profile enables a budgetguard plugin, 0 when it runs without budget protection.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"component", "profile"})
	registerProfiles sync.Once

	// reported holds the plugin/extension-point pairs last set per
	// component and profile, so that a profile reported again (the sandbox
	// runs the same profiles upstream and with budgetguard) loses the
	// series it no longer has.
	reportedMu sync.Mutex
	reported   = map[[2]string][][2]string{}
)

// ProfilePlugins says where budgetguard's plugins are enabled in one
// profile: extension point -> plugin names.
type ProfilePlugins map[string][]string

// ReportProfile logs and exports where budgetguard's plugins are enabled in
// the profile named profile of component ("scheduler" or "descheduler").
// A profile with none is logged as a warning.
func ReportProfile(logger klog.Logger, component, profile string, enabled ProfilePlugins) {
	registerProfiles.Do(func() { legacyregistry.MustRegister(profilePluginEnabled, profileProtected) })
	points := make([]string, 0, len(enabled))
	for point, plugins := range enabled {
		if len(plugins) > 0 {
			points = append(points, point)
		}
	}
	sort.Strings(points)
	key := [2]string{component, profile}
	reportedMu.Lock()
	for _, pp := range reported[key] {
		profilePluginEnabled.DeleteLabelValues(component, profile, pp[0], pp[1])
	}
	var where []string
	var set [][2]string
	for _, point := range points {
		for _, plugin := range enabled[point] {
			profilePluginEnabled.WithLabelValues(component, profile, plugin, point).Set(1)
			where = append(where, plugin+"@"+point)
			set = append(set, [2]string{plugin, point})
		}
	}
	reported[key] = set
	reportedMu.Unlock()
	if len(where) == 0 {
		profileProtected.WithLabelValues(component, profile).Set(0)
		logger.Info("Warning: this profile runs without budgetguard; its disruptions are not checked against disruption budgets", "component", component, "profile", profile)
		return
	}
	profileProtected.WithLabelValues(component, profile).Set(1)
	logger.Info("budgetguard plugins enabled", "component", component, "profile", profile, "plugins", strings.Join(where, ","))
}
