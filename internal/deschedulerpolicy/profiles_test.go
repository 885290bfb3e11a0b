package deschedulerpolicy

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/descheduler/pkg/api"

	"github.com/budgetguard/budgetguard/plugins/budget"
	"github.com/budgetguard/budgetguard/plugins/budgetevictor"
)

func TestProfilePlugins(t *testing.T) {
	ours := budgetevictor.PluginName
	policy := &api.DeschedulerPolicy{Profiles: []api.DeschedulerProfile{
		{Name: "both", Plugins: api.Plugins{
			Filter:            api.PluginSet{Enabled: []string{"DefaultEvictor", ours}},
			PreEvictionFilter: api.PluginSet{Enabled: []string{ours, "DefaultEvictor"}},
			Balance:           api.PluginSet{Enabled: []string{"RemoveDuplicates"}},
		}},
		{Name: "filter-only", Plugins: api.Plugins{
			Filter:            api.PluginSet{Enabled: []string{ours}},
			PreEvictionFilter: api.PluginSet{Enabled: []string{"DefaultEvictor"}},
		}},
		{Name: "stock", Plugins: api.Plugins{
			Filter:            api.PluginSet{Enabled: []string{"DefaultEvictor"}},
			PreEvictionFilter: api.PluginSet{Enabled: []string{"DefaultEvictor"}},
			// not an evictor extension point: not reported
			Deschedule: api.PluginSet{Enabled: []string{ours}},
		}},
	}}
	want := []Profile{
		{Name: "both", Plugins: budget.ProfilePlugins{"filter": {ours}, "preEvictionFilter": {ours}}},
		{Name: "filter-only", Plugins: budget.ProfilePlugins{"filter": {ours}}},
		{Name: "stock", Plugins: budget.ProfilePlugins{}},
	}
	if diff := cmp.Diff(want, ProfilePlugins(policy)); diff != "" {
		t.Errorf("ProfilePlugins (-want,+got):\n%s", diff)
	}
	if got := ProfilePlugins(nil); len(got) != 0 {
		t.Errorf("ProfilePlugins(nil) = %v, want none", got)
	}
}
