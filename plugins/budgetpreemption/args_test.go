package budgetpreemption

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	schedscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	"k8s.io/utils/ptr"
)

// decode decodes a KubeSchedulerConfiguration with the kube-scheduler's
// strict codec and returns the args of the plugin in its first profile.
func decode(t *testing.T, pluginConfig string) (*BudgetAwarePreemptionArgs, error) {
	t.Helper()
	doc := `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: budgetguard-scheduler
  plugins:
    postFilter:
      enabled:
      - name: BudgetAwarePreemption
      disabled:
      - name: DefaultPreemption
` + pluginConfig
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
		MinCandidateNodesPercentage: 10, MinCandidateNodesAbsolute: 100,
	}
	tests := []struct {
		name         string
		pluginConfig string
		want         *BudgetAwarePreemptionArgs
		wantErr      string
	}{
		{name: "no pluginConfig: defaults", want: defaults},
		{
			name: "empty args: defaults",
			pluginConfig: `  pluginConfig:
  - name: BudgetAwarePreemption
    args: {}
`,
			want: defaults,
		},
		{
			name: "every field",
			pluginConfig: `  pluginConfig:
  - name: BudgetAwarePreemption
    args:
      mode: BestEffort
      actuation: Delete
      overrideBudgetsAtPriority: 2000000000
      honorSafeToEvictAnnotation: false
      minCandidateNodesPercentage: 50
      minCandidateNodesAbsolute: 5
`,
			want: &BudgetAwarePreemptionArgs{
				Mode: ModeBestEffort, Actuation: ActuationDelete, OverrideBudgetsAtPriority: ptr.To[int32](2000000000),
				MinCandidateNodesPercentage: 50, MinCandidateNodesAbsolute: 5,
			},
		},
		{
			name: "unknown field is rejected with its path",
			pluginConfig: `  pluginConfig:
  - name: BudgetAwarePreemption
    args:
      actuaton: Delete
`,
			wantErr: `decoding .profiles[0].pluginConfig[0]: strict decoding error: decoding args for plugin BudgetAwarePreemption: strict decoding error: unknown field "actuaton"`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decode(t, tc.pluginConfig)
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

func TestValidateArgs(t *testing.T) {
	path := field.NewPath("profiles").Index(0).Child("pluginConfig").Index(1).Child("args")
	tests := []struct {
		name    string
		mutate  func(*BudgetAwarePreemptionArgs)
		wantErr string
	}{
		{name: "defaults are valid", mutate: func(*BudgetAwarePreemptionArgs) {}},
		{
			name:    "unknown actuation",
			mutate:  func(a *BudgetAwarePreemptionArgs) { a.Actuation = "Kill" },
			wantErr: `profiles[0].pluginConfig[1].args.actuation: Unsupported value: "Kill": supported values: "Evict", "Delete"`,
		},
		{
			name:    "unknown mode",
			mutate:  func(a *BudgetAwarePreemptionArgs) { a.Mode = "Lenient" },
			wantErr: `profiles[0].pluginConfig[1].args.mode: Unsupported value: "Lenient"`,
		},
		{
			name:    "negative override priority",
			mutate:  func(a *BudgetAwarePreemptionArgs) { a.OverrideBudgetsAtPriority = ptr.To[int32](-1) },
			wantErr: `profiles[0].pluginConfig[1].args.overrideBudgetsAtPriority: Invalid value: -1`,
		},
		{
			name:    "percentage out of range",
			mutate:  func(a *BudgetAwarePreemptionArgs) { a.MinCandidateNodesPercentage = 101 },
			wantErr: `profiles[0].pluginConfig[1].args.minCandidateNodesPercentage: Invalid value: 101`,
		},
		{
			name: "both candidate numbers zero",
			mutate: func(a *BudgetAwarePreemptionArgs) {
				a.MinCandidateNodesPercentage, a.MinCandidateNodesAbsolute = 0, 0
			},
			wantErr: `profiles[0].pluginConfig[1].args.minCandidateNodesAbsolute: Invalid value: 0: cannot be zero`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := DefaultArgs()
			tc.mutate(a)
			err := ValidateBudgetAwarePreemptionArgs(path, a)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestNewRejectsInvalidArgs checks that New validates again, with the path
// of the plugin's args in the message.
func TestNewRejectsInvalidArgs(t *testing.T) {
	a := DefaultArgs()
	a.Actuation = "Kill"
	_, err := argsFrom(a)
	const want = `pluginConfig[BudgetAwarePreemption].args.actuation: Unsupported value: "Kill"`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error = %v, want one containing %q", err, want)
	}
	if _, err := argsFrom(&schedconfig.DefaultPreemptionArgs{}); err == nil || !strings.Contains(err.Error(), "*config.DefaultPreemptionArgs") {
		t.Fatalf("error = %v, want one naming the wrong type", err)
	}
}
