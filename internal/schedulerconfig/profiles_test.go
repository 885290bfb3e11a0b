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
	// With its PreEnqueue gate, which the shipped profile enables and
	// multiPoint enables with the rest.
	gated := budget.ProfilePlugins{"postFilter": {"BudgetAwarePreemption"}, "preEnqueue": {"BudgetAwarePreemption"}}
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
			want: gated,
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
			want: gated,
		},
		{
			// kube-scheduler's defaults leave DefaultPreemption's gate at
			// preEnqueue, which never holds a preemptor of ours back.
			name: "postFilter only: no gate",
			doc:  header + "profiles:\n- schedulerName: bg\n  plugins:\n    postFilter:\n      enabled: [{name: BudgetAwarePreemption}]\n      disabled: [{name: DefaultPreemption}]\n",
			run:  []string{"BudgetAwarePreemption"},
			want: ours,
		},
		{
			name: "preEnqueue only: nothing",
			doc:  header + "profiles:\n- schedulerName: bg\n  plugins:\n    preEnqueue:\n      enabled: [{name: BudgetAwarePreemption}]\n",
			run:  []string{"DefaultPreemption"},
			want: budget.ProfilePlugins{},
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

// With the GenericWorkload gate on, a profile that enables
// BudgetAwarePreemption at podGroupPostFilter (as the shipped one does)
// preempts for pod groups through it; with the gate off it does not, and a
// profile without it reports nothing either way.
func TestProfilePluginsPodGroups(t *testing.T) {
	ours := testobj.SchedulerConfig{SchedulerName: "bg"}.YAML()
	stock := header + "profiles:\n- schedulerName: bg\n"
	if got := ProfilePlugins(&load(t, ours).Profiles[0]); got["podGroupPostFilter"] != nil {
		t.Errorf("gate off: %v, want no podGroupPostFilter", got)
	}
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.GenericWorkload, true)
	want := budget.ProfilePlugins{"postFilter": {"BudgetAwarePreemption"}, "preEnqueue": {"BudgetAwarePreemption"}, "podGroupPostFilter": {"BudgetAwarePreemption"}}
	if diff := cmp.Diff(want, ProfilePlugins(&load(t, ours).Profiles[0])); diff != "" {
		t.Errorf("gate on (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(budget.ProfilePlugins{}, ProfilePlugins(&load(t, stock).Profiles[0])); diff != "" {
		t.Errorf("stock profile, gate on (-want,+got):\n%s", diff)
	}
}

// A profile that runs BudgetAwarePreemption at postFilter but leaves pod
// groups to DefaultPreemption (kube-scheduler's default at
// podGroupPostFilter with the GenericWorkload gate) is refused, naming the
// field; with the gate on, one that does not run BudgetAwarePreemption at
// podGroupPostFilter is refused too.
func TestCheckPodGroupPostFilter(t *testing.T) {
	postFilterOnly := header + "profiles:\n- schedulerName: bg\n  plugins:\n    postFilter:\n      enabled: [{name: BudgetAwarePreemption}]\n      disabled: [{name: DefaultPreemption}]\n"
	theirsEnabled := postFilterOnly + "    podGroupPostFilter:\n      enabled: [{name: DefaultPreemption}]\n"
	shipped := testobj.SchedulerConfig{SchedulerName: "bg"}.YAML()

	for _, doc := range []string{postFilterOnly, theirsEnabled} {
		if err := Check(load(t, doc)); err != nil {
			t.Errorf("gate off (kube-scheduler runs no podGroupPostFilter): %v, want valid", err)
		}
	}

	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.GenericWorkload, true)
	want := `profiles[0] ("bg").plugins.podGroupPostFilter: DefaultPreemption is enabled there and preempts for pod groups without budgets: ` +
		`remove {name: DefaultPreemption} from plugins.podGroupPostFilter.enabled and add it to plugins.podGroupPostFilter.disabled, and {name: BudgetAwarePreemption} to plugins.podGroupPostFilter.enabled`
	if diff := cmp.Diff([]string{want}, lines(Check(load(t, theirsEnabled)))); diff != "" {
		t.Errorf("DefaultPreemption at podGroupPostFilter (-want,+got):\n%s", diff)
	}
	want = `profiles[0] ("bg").plugins.podGroupPostFilter: DefaultPreemption is enabled there and preempts for pod groups without budgets: ` +
		`add {name: DefaultPreemption} to plugins.podGroupPostFilter.disabled, and {name: BudgetAwarePreemption} to plugins.podGroupPostFilter.enabled`
	if diff := cmp.Diff([]string{want}, lines(Check(load(t, postFilterOnly)))); diff != "" {
		t.Errorf("gate on, postFilter only (-want,+got):\n%s", diff)
	}
	if err := Check(load(t, shipped)); err != nil {
		t.Errorf("gate on, the shipped profile: %v, want valid", err)
	}
}
