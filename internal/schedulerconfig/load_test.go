package schedulerconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/budgetguard/budgetguard/internal/testobj"
)

const header = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"

// load writes doc to a file and loads it.
func load(t *testing.T, doc string) *config.KubeSchedulerConfiguration {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(klog.Background(), path)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	return cfg
}

// lines splits an error into its lines; nil is none.
func lines(err error) []string {
	if err == nil {
		return nil
	}
	return strings.Split(err.Error(), "\n")
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []string
	}{
		{
			name: "BudgetAwarePreemption in place of DefaultPreemption",
			doc:  testobj.SchedulerConfig{Args: "{mode: BestEffort}"}.YAML(),
		},
		{
			name: "a stock profile",
			doc:  header + "profiles:\n- schedulerName: default-scheduler\n",
		},
		{
			name: "both preemption plugins at postFilter",
			doc:  header + "profiles:\n- {schedulerName: default-scheduler}\n- {schedulerName: budgetguard-scheduler, plugins: {postFilter: {enabled: [{name: BudgetAwarePreemption}]}}}\n",
			want: []string{`profiles[1] ("budgetguard-scheduler").plugins.postFilter: BudgetAwarePreemption and DefaultPreemption are both enabled; ` +
				`DefaultPreemption runs first and ignores budgets: add {name: DefaultPreemption} to plugins.postFilter.disabled`},
		},
		{
			name: "both, ours enabled through multiPoint",
			doc:  header + "profiles:\n- {schedulerName: bg, plugins: {multiPoint: {enabled: [{name: BudgetAwarePreemption}]}}}\n",
			want: []string{`profiles[0] ("bg").plugins.multiPoint: BudgetAwarePreemption and DefaultPreemption are both enabled; ` +
				`DefaultPreemption runs first and ignores budgets: add {name: DefaultPreemption} to plugins.postFilter.disabled`},
		},
		{
			name: "multiPoint disables DefaultPreemption: valid",
			doc:  header + "profiles:\n- {schedulerName: bg, plugins: {multiPoint: {enabled: [{name: BudgetAwarePreemption}], disabled: [{name: DefaultPreemption}]}}}\n",
		},
		{
			name: "both, DefaultPreemption enabled again after ours",
			doc:  header + "profiles:\n- {schedulerName: bg, plugins: {multiPoint: {enabled: [{name: BudgetAwarePreemption}, {name: DefaultPreemption}], disabled: [{name: DefaultPreemption}]}}}\n",
			want: []string{`profiles[0] ("bg").plugins.multiPoint: BudgetAwarePreemption and DefaultPreemption are both enabled; ` +
				`DefaultPreemption runs whenever BudgetAwarePreemption refuses, and ignores budgets: add {name: DefaultPreemption} to plugins.postFilter.disabled`},
		},
		{
			name: "both, DefaultPreemption listed in postFilter.enabled",
			doc:  header + "profiles:\n- {schedulerName: bg, plugins: {postFilter: {enabled: [{name: BudgetAwarePreemption}, {name: DefaultPreemption}], disabled: [{name: DefaultPreemption}]}}}\n",
			want: []string{`profiles[0] ("bg").plugins.postFilter: BudgetAwarePreemption and DefaultPreemption are both enabled; ` +
				`DefaultPreemption runs whenever BudgetAwarePreemption refuses, and ignores budgets: ` +
				`remove {name: DefaultPreemption} from plugins.postFilter.enabled and add it to plugins.postFilter.disabled`},
		},
		{
			name: "postFilter disables everything and enables ours: valid",
			doc:  header + "profiles:\n- {schedulerName: bg, plugins: {postFilter: {enabled: [{name: BudgetAwarePreemption}], disabled: [{name: '*'}]}}}\n",
		},
		{
			name: "configured but not enabled",
			doc:  header + "profiles:\n- {schedulerName: bg, pluginConfig: [{name: DefaultPreemption, args: {minCandidateNodesAbsolute: 50}}, {name: BudgetAwarePreemption, args: {mode: Strict}}]}\n",
			want: []string{`profiles[0] ("bg").pluginConfig[1]: BudgetAwarePreemption is configured but not enabled at postFilter; ` +
				`the profile preempts with DefaultPreemption, which ignores budgets: ` +
				`add {name: BudgetAwarePreemption} to plugins.postFilter.enabled and {name: DefaultPreemption} to plugins.postFilter.disabled`},
		},
		{
			name: "configured, and postFilter disables every plugin",
			doc:  header + "profiles:\n- {schedulerName: bg, plugins: {postFilter: {disabled: [{name: '*'}]}}, pluginConfig: [{name: BudgetAwarePreemption, args: {mode: Strict}}]}\n",
			want: []string{`profiles[0] ("bg").pluginConfig[0]: BudgetAwarePreemption is configured but not enabled at postFilter; ` +
				`the profile does not preempt: add {name: BudgetAwarePreemption} to plugins.postFilter.enabled`},
		},
		{
			name: "enabled through multiPoint, disabled at postFilter",
			doc:  header + "profiles:\n- {schedulerName: bg, plugins: {multiPoint: {enabled: [{name: BudgetAwarePreemption}], disabled: [{name: DefaultPreemption}]}, postFilter: {disabled: [{name: BudgetAwarePreemption}]}}}\n",
			want: []string{`profiles[0] ("bg").plugins.multiPoint: BudgetAwarePreemption is enabled there but plugins.postFilter.disabled turns it off at postFilter, where it preempts; ` +
				`the profile does not preempt: add {name: BudgetAwarePreemption} to plugins.postFilter.enabled`},
		},
		{
			name: "invalid args in two profiles, and both plugins in one",
			doc:  header + "profiles:\n- {schedulerName: a, plugins: {postFilter: {enabled: [{name: BudgetAwarePreemption}]}}, pluginConfig: [{name: BudgetAwarePreemption, args: {actuation: Kill, overrideBudgetsAtPriority: 0}}]}\n- {schedulerName: b, plugins: {postFilter: {enabled: [{name: BudgetAwarePreemption}], disabled: [{name: DefaultPreemption}]}}, pluginConfig: [{name: BudgetAwarePreemption, args: {mode: Lenient}}]}\n",
			want: []string{
				`profiles[0].pluginConfig[0].args.actuation: Unsupported value: "Kill": supported values: "Evict", "Delete"`,
				`profiles[0].pluginConfig[0].args.overrideBudgetsAtPriority: Invalid value: 0: must be above 0: pods without a priority class have priority 0, ` +
					`so every one of them would break budgets; use a priority only critical pods reach, e.g. 2000000000 (system-cluster-critical), ` +
					`or leave it unset so that no preemptor breaks budgets`,
				`profiles[1].pluginConfig[0].args.mode: Unsupported value: "Lenient": supported values: "Strict", "BestEffort"`,
				`profiles[0] ("a").plugins.postFilter: BudgetAwarePreemption and DefaultPreemption are both enabled; ` +
					`DefaultPreemption runs first and ignores budgets: add {name: DefaultPreemption} to plugins.postFilter.disabled`,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := load(t, tc.doc)
			if diff := cmp.Diff(tc.want, lines(Check(cfg))); diff != "" {
				t.Errorf("Check (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestCheckArgs: only the args are checked, as for a configuration the
// sandbox rewrites to run DefaultPreemption.
func TestCheckArgs(t *testing.T) {
	cfg := load(t, header+`profiles:
- schedulerName: bg
  pluginConfig:
  - name: BudgetAwarePreemption
    args: {actuation: Kill}
`)
	want := []string{`profiles[0].pluginConfig[0].args.actuation: Unsupported value: "Kill": supported values: "Evict", "Delete"`}
	if diff := cmp.Diff(want, lines(CheckArgs(cfg))); diff != "" {
		t.Errorf("CheckArgs (-want,+got):\n%s", diff)
	}
	cfg = load(t, header+"profiles:\n- schedulerName: bg\n  pluginConfig:\n  - name: BudgetAwarePreemption\n    args: {}\n")
	if err := CheckArgs(cfg); err != nil {
		t.Errorf("CheckArgs of a configured, not enabled plugin: %v, want nil", err)
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct{ name, doc, want string }{
		{name: "unknown field", doc: header + "profile: []\n", want: `unknown field "profile"`},
		{name: "misspelt args", doc: testobj.SchedulerConfig{Args: "{actuaton: Evict}"}.YAML(), want: `unknown field "actuaton"`},
		{name: "kube-scheduler's own validation", doc: header + "profiles:\n- schedulerName: a\n- schedulerName: a\n", want: `profiles[1].schedulerName: Duplicate value`},
		{name: "not a scheduler configuration", doc: "apiVersion: v1\nkind: Pod\n", want: "no kind"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(path, []byte(tc.doc), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := Load(klog.Background(), path); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load: %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if _, err := Load(klog.Background(), filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Error("Load of a missing file: no error")
	}
}
