package deschedulerpolicy

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/descheduler/pkg/api"
	"sigs.k8s.io/descheduler/pkg/descheduler"
	"sigs.k8s.io/descheduler/pkg/framework/pluginregistry"
	"sigs.k8s.io/yaml"

	"github.com/budgetguard/budgetguard/plugins/budgetevictor"
)

func setup(t *testing.T) pluginregistry.Registry {
	t.Helper()
	SetupPlugins(budgetevictor.Options{})
	return pluginregistry.PluginRegistry
}

func writePolicy(t *testing.T, data string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// shippedPolicies returns every DeschedulerPolicy under manifests/descheduler,
// standalone or inside a ConfigMap, by a name that says where it came from.
func shippedPolicies(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("../../manifests/descheduler/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range bytes.Split(data, []byte("\n---")) {
			var head struct {
				Kind string            `json:"kind"`
				Data map[string]string `json:"data"`
			}
			if err := yaml.Unmarshal(doc, &head); err != nil {
				t.Fatalf("%s document %d: %v", f, i, err)
			}
			switch head.Kind {
			case "DeschedulerPolicy":
				out[filepath.Base(f)] = string(doc)
			case "ConfigMap":
				for k, v := range head.Data {
					if strings.Contains(v, "kind: DeschedulerPolicy") {
						out[filepath.Base(f)+":"+k] = v
					}
				}
			}
		}
	}
	return out
}

func TestShippedPoliciesLoad(t *testing.T) {
	registry := setup(t)
	policies := shippedPolicies(t)
	if len(policies) < 2 {
		t.Fatalf("found %d shipped policies (want policy.yaml and the ConfigMap's): %v", len(policies), policies)
	}
	for name, data := range policies {
		t.Run(name, func(t *testing.T) {
			policy, err := LoadPolicy(writePolicy(t, data), fake.NewClientset(), registry)
			if err != nil {
				t.Fatalf("LoadPolicy: %v", err)
			}
			if len(policy.Profiles) == 0 {
				t.Fatal("policy has no profiles")
			}
			for _, prof := range policy.Profiles {
				for _, set := range []struct {
					point   string
					enabled []string
				}{{"filter", prof.Plugins.Filter.Enabled}, {"preEvictionFilter", prof.Plugins.PreEvictionFilter.Enabled}} {
					if !contains(set.enabled, budgetevictor.PluginName) || !contains(set.enabled, "DefaultEvictor") {
						t.Errorf("profile %s: %s enables %v, want DefaultEvictor and %s", prof.Name, set.point, set.enabled, budgetevictor.PluginName)
					}
				}
				args := pluginArgs(prof, budgetevictor.PluginName)
				a, ok := args.(*budgetevictor.BudgetAwareEvictorArgs)
				if !ok {
					t.Fatalf("profile %s: %s args are %T", prof.Name, budgetevictor.PluginName, args)
				}
				if a.HonorSafeToEvict == nil || !*a.HonorSafeToEvict {
					t.Errorf("profile %s: honorSafeToEvict = %v, want true", prof.Name, a.HonorSafeToEvict)
				}
				for _, want := range []string{"RemoveDuplicates", "RemovePodsHavingTooManyRestarts"} {
					if !contains(prof.Plugins.Balance.Enabled, want) && !contains(prof.Plugins.Deschedule.Enabled, want) {
						t.Errorf("profile %s enables no %s", prof.Name, want)
					}
				}
				if !contains(prof.Plugins.Balance.Enabled, "LowNodeUtilization") && !contains(prof.Plugins.Balance.Enabled, "HighNodeUtilization") {
					t.Errorf("profile %s enables neither LowNodeUtilization nor HighNodeUtilization", prof.Name)
				}
			}
		})
	}
}

func TestShippedPolicyCopiesAgree(t *testing.T) {
	policies := shippedPolicies(t)
	var standalone, inConfigMap any
	if err := yaml.Unmarshal([]byte(policies["policy.yaml"]), &standalone); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(policies["configmap.yaml:policy.yaml"]), &inConfigMap); err != nil {
		t.Fatal(err)
	}
	a, _ := yaml.Marshal(standalone)
	b, _ := yaml.Marshal(inConfigMap)
	if standalone == nil || string(a) != string(b) {
		t.Errorf("configmap.yaml's policy differs from policy.yaml:\n%s\n---\n%s", a, b)
	}
}

func pluginArgs(prof api.DeschedulerProfile, name string) any {
	for _, pc := range prof.PluginConfigs {
		if pc.Name == name {
			return pc.Args
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

const base = `apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: p
  pluginConfig:
  - name: DefaultEvictor
  - name: BudgetAwareEvictor
    args:
      honorSafeToEvict: true
  - name: RemoveDuplicates
  plugins:
    filter:
      enabled: [BudgetAwareEvictor]
    preevictionfilter:
      enabled: [BudgetAwareEvictor]
    balance:
      enabled: [RemoveDuplicates]
`

func TestCheckPolicy(t *testing.T) {
	registry := setup(t)
	tests := []struct {
		name    string
		policy  string
		wantErr []string // substrings; empty means valid
	}{
		{name: "valid", policy: base},
		{name: "field name in another case, as the stock decoder accepts", policy: strings.Replace(base, "preevictionfilter:", "preEvictionFilter:", 1)},
		{
			name:    "duplicate field",
			policy:  strings.Replace(base, "profiles:", "maxNoOfPodsToEvictTotal: 1\nmaxNoOfPodsToEvictTotal: 2\nprofiles:", 1),
			wantErr: []string{`key "maxNoOfPodsToEvictTotal" already set`},
		},
		{
			name:    "unknown top-level field",
			policy:  base + "maxNoOfPodsToEvictPerNod: 3\n",
			wantErr: []string{`unknown field "maxNoOfPodsToEvictPerNod"`},
		},
		{
			name:    "unknown profile field",
			policy:  strings.Replace(base, "  pluginConfig:", "  pluginConfigs: []\n  pluginConfig:", 1),
			wantErr: []string{`unknown field "profiles[0].pluginConfigs"`},
		},
		{
			name:    "unknown field in BudgetAwareEvictor args",
			policy:  strings.Replace(base, "honorSafeToEvict: true", "honorSafeToEvict: true\n      honourSafeToEvict: true", 1),
			wantErr: []string{`unknown field "profiles[0].pluginConfig[1].args.honourSafeToEvict"`},
		},
		{
			name:    "unknown field in a stock plugin's args",
			policy:  strings.Replace(base, "  - name: RemoveDuplicates\n", "  - name: RemoveDuplicates\n    args:\n      excludeOwnerKind: [Job]\n", 1),
			wantErr: []string{`unknown field "profiles[0].pluginConfig[2].args.excludeOwnerKind"`},
		},
		{
			name:    "invalid BudgetAwareEvictor args",
			policy:  strings.Replace(base, "honorSafeToEvict: true", "cacheSyncTimeoutSeconds: 0", 1),
			wantErr: []string{"profiles[0].pluginConfig[1].args.cacheSyncTimeoutSeconds: Invalid value: 0"},
		},
		{
			name:    "unregistered plugin",
			policy:  strings.Replace(base, "name: RemoveDuplicates\n", "name: RemoveDuplicate\n", 1),
			wantErr: []string{`profiles[0].pluginConfig[2].name: Unsupported value: "RemoveDuplicate"`},
		},
		{
			name:    "wrong kind",
			policy:  strings.Replace(base, "kind: DeschedulerPolicy", "kind: Policy", 1),
			wantErr: []string{`apiVersion/kind is "descheduler/v1alpha2"/"Policy"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckPolicy([]byte(tt.policy), registry)
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("CheckPolicy: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("CheckPolicy accepted the policy, want an error containing %q", tt.wantErr)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// TestStockDecodingAcceptsUnknownTopLevelField documents why the strict
// check exists: the stock loader silently drops a misspelled field.
func TestStockDecodingAcceptsUnknownTopLevelField(t *testing.T) {
	registry := setup(t)
	path := writePolicy(t, base+"maxNoOfPodsToEvictPerNod: 3\n")
	policy, err := descheduler.LoadPolicyConfig(path, fake.NewClientset(), registry)
	if err != nil {
		t.Fatalf("stock LoadPolicyConfig now rejects the policy (%v); the strict check may be redundant", err)
	}
	if policy.MaxNoOfPodsToEvictPerNode != nil {
		t.Errorf("MaxNoOfPodsToEvictPerNode = %v from a misspelled field", *policy.MaxNoOfPodsToEvictPerNode)
	}
	if _, err := LoadPolicy(path, fake.NewClientset(), registry); err == nil {
		t.Fatal("LoadPolicy accepted the misspelled field")
	}
}

func TestLoadPolicyKeepsStockDefaults(t *testing.T) {
	registry := setup(t)
	policy, err := LoadPolicy(writePolicy(t, base), fake.NewClientset(), registry)
	if err != nil {
		t.Fatal(err)
	}
	prof := policy.Profiles[0]
	if got := prof.Plugins.Filter.Enabled; len(got) == 0 || got[0] != "DefaultEvictor" {
		t.Errorf("filter plugins %v: the stock loader should put DefaultEvictor first", got)
	}
	args := pluginArgs(prof, budgetevictor.PluginName).(*budgetevictor.BudgetAwareEvictorArgs)
	if args.CacheSyncTimeoutSeconds == nil || *args.CacheSyncTimeoutSeconds != budgetevictor.DefaultCacheSyncTimeoutSeconds {
		t.Errorf("cacheSyncTimeoutSeconds = %v, want the default %d", args.CacheSyncTimeoutSeconds, budgetevictor.DefaultCacheSyncTimeoutSeconds)
	}
}
