package schedulerconfig

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/pkg/features"

	"github.com/budgetguard/budgetguard/internal/testobj"
	"github.com/budgetguard/budgetguard/plugins/budget"
)

func TestProfilePlugins(t *testing.T) {
	ours := budget.ProfilePlugins{"postFilter": {"BudgetAwarePreemption"}}
	tests := []struct {
		name string
		doc  string
		// run is the preemption plugins at postFilter, in order.
		run  []string
		want budget.ProfilePlugins
	}{
		{
			name: "in place of DefaultPreemption",
			doc:  testobj.SchedulerConfig{SchedulerName: "bg"}.YAML(),
			run:  []string{"BudgetAwarePreemption"},
			want: ours,
		},
		{
			name: "stock",
			doc:  header + "profiles:\n- schedulerName: bg\n",
			run:  []string{"DefaultPreemption"},
			want: budget.ProfilePlugins{},
		},
		{
			name: "both: DefaultPreemption from multiPoint runs first",
			doc:  header + "profiles:\n- schedulerName: bg\n  plugins:\n    postFilter:\n      enabled: [{name: BudgetAwarePreemption}]\n",
			run:  []string{"DefaultPreemption", "BudgetAwarePreemption"},
			want: ours,
		},
		{
			name: "through multiPoint",
			doc:  header + "profiles:\n- schedulerName: bg\n  plugins:\n    multiPoint:\n      enabled: [{name: BudgetAwarePreemption}]\n      disabled: [{name: DefaultPreemption}]\n",
			run:  []string{"BudgetAwarePreemption"},
			want: ours,
		},
		{
			name: "postFilter disables every plugin",
			doc:  header + "profiles:\n- schedulerName: bg\n  plugins:\n    postFilter:\n      disabled: [{name: \"*\"}]\n",
			want: budget.ProfilePlugins{},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := &load(t, tc.doc).Profiles[0]
			if diff := cmp.Diff(tc.run, preemptionAtPostFilter(p)); diff != "" {
				t.Errorf("preemption plugins at postFilter (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, ProfilePlugins(p)); diff != "" {
				t.Errorf("ProfilePlugins (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestReport(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	Report(logger, load(t, header+`profiles:
- schedulerName: report-stock
- schedulerName: report-bg
  plugins:
    postFilter:
      enabled: [{name: BudgetAwarePreemption}]
      disabled: [{name: DefaultPreemption}]
`))
	want := `
# HELP budgetguard_profile_protected [ALPHA] 1 when a scheduler or descheduler profile enables a budgetguard plugin, 0 when it runs without budget protection.
# TYPE budgetguard_profile_protected gauge
budgetguard_profile_protected{component="scheduler",profile="report-bg"} 1
budgetguard_profile_protected{component="scheduler",profile="report-stock"} 0
`
	if err := testutil.GatherAndCompare(legacyregistry.DefaultGatherer, strings.NewReader(want), "budgetguard_profile_protected"); err != nil {
		t.Error(err)
	}
}

// With the WorkloadAwarePreemption gate on, a profile that runs
// BudgetAwarePreemption also preempts for pod groups through it (see
// budgetpreemption.EnablePodGroupPreemption); with the gate off it does
// not, and a profile without it reports nothing either way.
func TestProfilePluginsPodGroups(t *testing.T) {
	ours := testobj.SchedulerConfig{SchedulerName: "bg"}.YAML()
	stock := header + "profiles:\n- schedulerName: bg\n"
	if got := ProfilePlugins(&load(t, ours).Profiles[0]); got["podGroupPostFilter"] != nil {
		t.Errorf("gate off: %v, want no podGroupPostFilter", got)
	}
	featuregatetesting.SetFeatureGatesDuringTest(t, utilfeature.DefaultFeatureGate, featuregatetesting.FeatureOverrides{
		features.GenericWorkload:         true,
		features.GangScheduling:          true,
		features.WorkloadAwarePreemption: true,
	})
	want := budget.ProfilePlugins{"postFilter": {"BudgetAwarePreemption"}, "podGroupPostFilter": {"BudgetAwarePreemption"}}
	if diff := cmp.Diff(want, ProfilePlugins(&load(t, ours).Profiles[0])); diff != "" {
		t.Errorf("gate on (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(budget.ProfilePlugins{}, ProfilePlugins(&load(t, stock).Profiles[0])); diff != "" {
		t.Errorf("stock profile, gate on (-want,+got):\n%s", diff)
	}
}
