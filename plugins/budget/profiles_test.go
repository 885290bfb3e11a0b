package budget

import (
	"strings"
	"testing"

	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2/ktesting"
)

func TestReportProfile(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	ReportProfile(logger, "scheduler", "budgetguard-scheduler", ProfilePlugins{"postFilter": {"BudgetAwarePreemption"}})
	ReportProfile(logger, "scheduler", "default-scheduler", nil)
	ReportProfile(logger, "descheduler", "p", ProfilePlugins{"filter": {"BudgetAwareEvictor"}, "preEvictionFilter": {"BudgetAwareEvictor"}})
	// Reported again without the plugin (the sandbox's upstream run), then
	// with it: only what the last report says is exported.
	ReportProfile(logger, "scheduler", "again", ProfilePlugins{"postFilter": {"BudgetAwarePreemption"}})
	ReportProfile(logger, "scheduler", "again", nil)
	ReportProfile(logger, "scheduler", "upstream-first", nil)
	ReportProfile(logger, "scheduler", "upstream-first", ProfilePlugins{"postFilter": {"BudgetAwarePreemption"}})
	want := `
# HELP budgetguard_profile_plugin_enabled [ALPHA] 1 for each budgetguard plugin enabled at an extension point of a scheduler or descheduler profile.
# TYPE budgetguard_profile_plugin_enabled gauge
budgetguard_profile_plugin_enabled{component="descheduler",extension_point="filter",plugin="BudgetAwareEvictor",profile="p"} 1
budgetguard_profile_plugin_enabled{component="descheduler",extension_point="preEvictionFilter",plugin="BudgetAwareEvictor",profile="p"} 1
budgetguard_profile_plugin_enabled{component="scheduler",extension_point="postFilter",plugin="BudgetAwarePreemption",profile="budgetguard-scheduler"} 1
budgetguard_profile_plugin_enabled{component="scheduler",extension_point="postFilter",plugin="BudgetAwarePreemption",profile="upstream-first"} 1
# HELP budgetguard_profile_protected [ALPHA] 1 when a scheduler or descheduler profile enables a budgetguard plugin, 0 when it runs without budget protection.
# TYPE budgetguard_profile_protected gauge
budgetguard_profile_protected{component="descheduler",profile="p"} 1
budgetguard_profile_protected{component="scheduler",profile="again"} 0
budgetguard_profile_protected{component="scheduler",profile="budgetguard-scheduler"} 1
budgetguard_profile_protected{component="scheduler",profile="default-scheduler"} 0
budgetguard_profile_protected{component="scheduler",profile="upstream-first"} 1
`
	if err := testutil.GatherAndCompare(legacyregistry.DefaultGatherer, strings.NewReader(want), "budgetguard_profile_plugin_enabled", "budgetguard_profile_protected"); err != nil {
		t.Error(err)
	}
}
