package runner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/budgetguard/budgetguard/internal/scenario"
	"github.com/budgetguard/budgetguard/internal/testobj"
)

// scenarioWithFiles returns a scenario, with no deschedule step, that uses
// the given scheduler configuration and descheduler policy; "" leaves the
// shipped file in place.
func scenarioWithFiles(t *testing.T, schedConfig, policy string) *scenario.Scenario {
	t.Helper()
	dir := t.TempDir()
	sc := &scenario.Scenario{
		Path:  filepath.Join(dir, "scenario.yaml"),
		Name:  "t",
		Steps: []scenario.Step{{Index: 0, Settle: &scenario.SettleStep{Duration: 1}}},
	}
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	if schedConfig != "" {
		sc.SchedulerConfig = write("sched.yaml", schedConfig)
	}
	if policy != "" {
		sc.DeschedulerPolicy = write("policy.yaml", policy)
	}
	return sc
}

func TestValidate(t *testing.T) {
	goodPolicy := testobj.DeschedulerPolicy{BudgetAware: true, Strategy: "RemoveDuplicates"}.YAML()
	tests := []struct {
		name        string
		schedConfig string
		policy      string
		// want are substrings of the error, each of which must occur
		// once; none: no error.
		want []string
	}{
		{
			name: "the shipped files",
		},
		{
			name:        "valid files of the scenario's own",
			schedConfig: testobj.SchedulerConfig{Args: "{actuation: Delete}"}.YAML(),
			policy:      goodPolicy,
		},
		{
			// An upstream run drops BudgetAwarePreemption's args; the
			// mistake must still be found, once, before any run.
			name:        "actuation Kill",
			schedConfig: testobj.SchedulerConfig{Args: "{actuation: Kill}"}.YAML(),
			want:        []string{"sched.yaml", "args.actuation", `"Kill"`},
		},
		{
			// No step deschedules, and the policy is checked all the same.
			name:   "bad policy without a deschedule step",
			policy: strings.Replace(goodPolicy, "name: BudgetAwareEvictor", "name: BudgetAwareEvictr", 1),
			want:   []string{"policy.yaml", "profiles[0].pluginConfig[1].name", "BudgetAwareEvictr"},
		},
		{
			name:        "both files bad",
			schedConfig: testobj.SchedulerConfig{Args: "{mode: Loose}"}.YAML(),
			policy:      "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofile: []\n",
			want:        []string{"sched.yaml", "args.mode", "policy.yaml", "profile"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sc := scenarioWithFiles(t, tc.schedConfig, tc.policy)
			err := Validate(context.Background(), sc)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate succeeded, want an error saying %q", tc.want)
			}
			t.Log(err)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %q:\n%v", w, err)
				}
			}
			if n := strings.Count(err.Error(), "scheduler configuration"); n > 1 {
				t.Errorf("the scheduler configuration's problem is reported %d times:\n%v", n, err)
			}
			current.Lock()
			started := current.cp != nil
			current.Unlock()
			if started {
				t.Error("Validate started a control plane")
			}
		})
	}
}
