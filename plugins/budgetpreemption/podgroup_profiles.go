package budgetpreemption

import (
	"sync"

	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/profile"
)

// kube-scheduler calls PodGroupPostFilter on one plugin only: the one its
// profile enables under the in-tree name DefaultPreemption
// (frameworkruntime.NewFramework); a plugin registered under another name
// is never asked, and kube-scheduler's registry refuses a second plugin of
// that name. So a profile that runs BudgetAwarePreemption in place of
// DefaultPreemption has no gang preemption at all unless the binary that
// builds the scheduler hands the plugin to the profile itself:
// EnablePodGroupPreemption does that, on the profiles of a scheduler built
// but not yet running (cmd/scheduler does it between app.Setup and app.Run).

// gangPlugins maps each framework handle to the plugin built on it, when
// the WorkloadAwarePreemption gate is on.
var gangPlugins sync.Map

// podGroupFramework is a profile's framework whose PodGroupPostFilter
// plugin is BudgetAwarePreemption.
type podGroupFramework struct {
	framework.Framework
	plugins []framework.PodGroupPostFilterPlugin
}

// PodGroupPostFilterPlugins returns BudgetAwarePreemption.
func (f *podGroupFramework) PodGroupPostFilterPlugins() []framework.PodGroupPostFilterPlugin {
	return f.plugins
}

// EnablePodGroupPreemption makes BudgetAwarePreemption the PodGroupPostFilter
// plugin of every profile in profiles that builds it, and returns their
// names. It takes the place of DefaultPreemption where the profile still
// builds that one (the shipped profile disables DefaultPreemption at
// postFilter only, so kube-scheduler builds it for preEnqueue and would
// hand it every pod group's preemption, without budgets). Call it before
// the scheduler runs; with the WorkloadAwarePreemption gate off it changes
// nothing.
func EnablePodGroupPreemption(profiles profile.Map) []string {
	var names []string
	for name, f := range profiles {
		v, ok := gangPlugins.Load(fwk.Handle(f))
		if !ok {
			continue
		}
		profiles[name] = &podGroupFramework{Framework: f, plugins: []framework.PodGroupPostFilterPlugin{v.(*BudgetAwarePreemption)}}
		names = append(names, name)
	}
	return names
}
