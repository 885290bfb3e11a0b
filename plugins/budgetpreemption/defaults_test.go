package budgetpreemption

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	schedscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	"k8s.io/utils/ptr"

	"github.com/budgetguard/budgetguard/internal/testobj"
)

// decode decodes a KubeSchedulerConfiguration whose profile enables the
// plugin with args (a YAML flow mapping; "" for no pluginConfig) with the
// kube-scheduler's strict codec, and returns the plugin's args after
// defaulting.
func decode(t *testing.T, args string) (*BudgetAwarePreemptionArgs, error) {
	t.Helper()
	doc := testobj.SchedulerConfig{Args: args}.YAML()
	obj, _, err := schedscheme.Codecs.UniversalDecoder().Decode([]byte(doc), nil, nil)
	if err != nil {
		return nil, err
	}
	cfg, ok := obj.(*schedconfig.KubeSchedulerConfiguration)
	if !ok {
		t.Fatalf("decoded a %T", obj)
	}
	for _, pc := range cfg.Profiles[0].PluginConfig {
		if pc.Name == Name {
			args, ok := pc.Args.(*BudgetAwarePreemptionArgs)
			if !ok {
				t.Fatalf("args of %s are a %T", Name, pc.Args)
			}
			return args, nil
		}
	}
	t.Fatalf("no pluginConfig for %s after defaulting", Name)
	return nil, nil
}

func TestDecodeArgs(t *testing.T) {
	defaults := &BudgetAwarePreemptionArgs{
		Mode: ModeStrict, Actuation: ActuationEvict, HonorSafeToEvictAnnotation: true,
		MinCandidateNodesPercentage: 10, MinCandidateNodesAbsolute: 100, ExpendablePodsPriorityCutoff: -10,
	}
	tests := []struct {
		name    string
		args    string
		want    *BudgetAwarePreemptionArgs
		wantErr string
	}{
		{name: "no pluginConfig: defaults", want: defaults},
		{name: "empty args: defaults", args: "{}", want: defaults},
		{
			name: "every field",
			args: "{mode: BestEffort, actuation: Delete, overrideBudgetsAtPriority: 2000000000, honorSafeToEvictAnnotation: false, " +
				"minCandidateNodesPercentage: 50, minCandidateNodesAbsolute: 5, expendablePodsPriorityCutoff: -100}",
			want: &BudgetAwarePreemptionArgs{
				Mode: ModeBestEffort, Actuation: ActuationDelete, OverrideBudgetsAtPriority: ptr.To[int32](2000000000),
				MinCandidateNodesPercentage: 50, MinCandidateNodesAbsolute: 5, ExpendablePodsPriorityCutoff: -100,
			},
		},
		{
			name: "expendable cutoff 0 is kept, not defaulted",
			args: "{expendablePodsPriorityCutoff: 0}",
			want: func() *BudgetAwarePreemptionArgs { a := *defaults; a.ExpendablePodsPriorityCutoff = 0; return &a }(),
		},
		{
			name:    "unknown field is rejected with its path",
			args:    "{actuaton: Delete}",
			wantErr: `decoding .profiles[0].pluginConfig[0]: strict decoding error: decoding args for plugin BudgetAwarePreemption: strict decoding error: unknown field "actuaton"`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decode(t, tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got.TypeMeta = defaults.TypeMeta
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("args (-want,+got):\n%s", diff)
			}
		})
	}
}
