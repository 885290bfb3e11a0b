package deschedulerpolicy

import (
	"bytes"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
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
// standalone or inside a ConfigMap, by a name that says where it came from
// (its path below manifests/descheduler, then ":" and the ConfigMap key).
func shippedPolicies(t *testing.T) map[string]string {
	t.Helper()
	const root = "../../manifests/descheduler"
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".yaml") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(root, f)
		name = filepath.ToSlash(name)
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
				out[name] = string(doc)
			case "ConfigMap":
				for k, v := range head.Data {
					if strings.Contains(v, "kind: DeschedulerPolicy") {
						out[name+":"+k] = v
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
	if _, ok := policies["policy.yaml"]; !ok {
		t.Fatalf("found no policy.yaml among the shipped policies: %v", policies)
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

// TestShippedPolicyCopiesAgree: a policy shipped inside a ConfigMap says
// the same as policy.yaml. (kustomize generates the ConfigMap from
// policy.yaml; this catches a copy written by hand.)
func TestShippedPolicyCopiesAgree(t *testing.T) {
	policies := shippedPolicies(t)
	var standalone any
	if err := yaml.Unmarshal([]byte(policies["policy.yaml"]), &standalone); err != nil || standalone == nil {
		t.Fatalf("policy.yaml: %v", err)
	}
	a, _ := yaml.Marshal(standalone)
	for name, data := range policies {
		if !strings.Contains(name, ":") {
			continue
		}
		var copied any
		if err := yaml.Unmarshal([]byte(data), &copied); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if b, _ := yaml.Marshal(copied); string(a) != string(b) {
			t.Errorf("%s differs from policy.yaml:\n%s\n---\n%s", name, a, b)
		}
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
		{
			name:   "valid: a profile without BudgetAwareEvictor",
			policy: base + "- name: stock\n  pluginConfig:\n  - name: RemoveDuplicates\n  plugins:\n    balance:\n      enabled: [RemoveDuplicates]\n",
		},
		// The descheduler decodes a policy case-sensitively and drops a
		// field written in another case (see
		// TestStockDecodingDropsCaseVariants).
		{
			name:    "field name in another case: preEvictionFilter",
			policy:  strings.Replace(base, "preevictionfilter:", "preEvictionFilter:", 1),
			wantErr: []string{`profiles[0].plugins.preEvictionFilter: unknown field; field names are case-sensitive, write "preevictionfilter"`},
		},
		{
			name:    "field name in another case: Filter",
			policy:  strings.Replace(base, "    filter:", "    Filter:", 1),
			wantErr: []string{`profiles[0].plugins.Filter: unknown field; field names are case-sensitive, write "filter"`},
		},
		{
			name:    "top-level field name in another case",
			policy:  base + "MaxNoOfPodsToEvictPerNode: 3\n",
			wantErr: []string{`MaxNoOfPodsToEvictPerNode: unknown field; field names are case-sensitive, write "maxNoOfPodsToEvictPerNode"`},
		},
		{
			name:    "field name in another case in args",
			policy:  strings.Replace(base, "honorSafeToEvict: true", "HonorSafeToEvict: true", 1),
			wantErr: []string{`profiles[0].pluginConfig[1].args.HonorSafeToEvict: unknown field; field names are case-sensitive, write "honorSafeToEvict"`},
		},
		{
			name:    "the same field in two cases",
			policy:  strings.Replace(base, "    balance:", "    preEvictionFilter:\n      enabled: [BudgetAwareEvictor]\n    balance:", 1),
			wantErr: []string{`profiles[0].plugins.preEvictionFilter: unknown field; field names are case-sensitive and "preevictionfilter" is set as well: remove "preEvictionFilter"`},
		},
		{
			name:    "v1alpha1",
			policy:  "apiVersion: descheduler/v1alpha1\nkind: DeschedulerPolicy\nstrategies:\n  RemoveDuplicates:\n    enabled: true\n",
			wantErr: []string{"descheduler/v1alpha1 is not supported; use descheduler/v1alpha2"},
		},
		{
			name:    "document is a list",
			policy:  "- apiVersion: descheduler/v1alpha2\n- kind: DeschedulerPolicy\n",
			wantErr: []string{"policy: must be a mapping (a DeschedulerPolicy object), got a list"},
		},
		{
			name:    "document is a scalar",
			policy:  "descheduler/v1alpha2\n",
			wantErr: []string{"policy: must be a mapping (a DeschedulerPolicy object), got a string"},
		},
		{
			name:    "document is empty",
			policy:  "# nothing\n",
			wantErr: []string{"policy: must be a mapping (a DeschedulerPolicy object), got an empty document"},
		},
		{
			name:    "profiles is not a list",
			policy:  "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles:\n  name: p\n",
			wantErr: []string{"profiles: must be a list of profiles, got a mapping"},
		},
		{
			name:    "profile is not a mapping",
			policy:  "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles:\n- p\n",
			wantErr: []string{"profiles[0]: must be a mapping (a profile), got a string"},
		},
		{
			name:    "pluginConfig entry is not a mapping",
			policy:  strings.Replace(base, "  - name: RemoveDuplicates\n", "  - RemoveDuplicates\n", 1),
			wantErr: []string{"profiles[0].pluginConfig[2]: must be a mapping (a plugin's name and args), got a string"},
		},
		{
			name:    "args is not a mapping",
			policy:  strings.Replace(base, "    args:\n      honorSafeToEvict: true\n", "    args: [honorSafeToEvict]\n", 1),
			wantErr: []string{"profiles[0].pluginConfig[1].args: must be a mapping (the plugin's args), got a list"},
		},
		{
			name:    "BudgetAwareEvictor configured but not enabled",
			policy:  strings.Replace(base, "    filter:\n      enabled: [BudgetAwareEvictor]\n    preevictionfilter:\n      enabled: [BudgetAwareEvictor]\n", "", 1),
			wantErr: []string{`profiles[0] ("p").pluginConfig[1]: BudgetAwareEvictor is configured but not enabled at filter or preevictionfilter; add it to plugins.filter.enabled and plugins.preevictionfilter.enabled`},
		},
		{
			name:    "BudgetAwareEvictor enabled at filter only",
			policy:  strings.Replace(base, "    preevictionfilter:\n      enabled: [BudgetAwareEvictor]\n", "", 1),
			wantErr: []string{`profiles[0] ("p").plugins.preevictionfilter.enabled: BudgetAwareEvictor is enabled at filter but not at preevictionfilter; enable it at both`},
		},
		{
			name:    "BudgetAwareEvictor enabled at preevictionfilter only",
			policy:  strings.Replace(base, "    filter:\n      enabled: [BudgetAwareEvictor]\n", "    filter:\n      enabled: [DefaultEvictor]\n", 1),
			wantErr: []string{`profiles[0] ("p").plugins.filter.enabled: BudgetAwareEvictor is enabled at preevictionfilter but not at filter; enable it at both`},
		},
		{
			name:    "BudgetAwareEvictor enabled but not configured",
			policy:  strings.Replace(base, "  - name: BudgetAwareEvictor\n    args:\n      honorSafeToEvict: true\n", "", 1),
			wantErr: []string{`profiles[0] ("p").pluginConfig: BudgetAwareEvictor is enabled at filter and preevictionfilter but not configured; add "- name: BudgetAwareEvictor" to pluginConfig`},
		},
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
			name:   "unregistered plugin",
			policy: strings.Replace(base, "name: RemoveDuplicates\n", "name: RemoveDuplicate\n", 1),
			wantErr: []string{
				`profiles[0].pluginConfig[2].name: Unsupported value: "RemoveDuplicate"`,
				// in alphabetical order
				`supported values: "` + strings.Join(slices.Sorted(maps.Keys(registry)), `", "`) + `"`,
			},
		},
		// The descheduler refuses these when it builds the profile at
		// start (frameworkprofile.NewProfile), after the stock loading
		// has accepted them.
		{
			name:    "misspelt plugin enabled at balance",
			policy:  strings.Replace(base, "enabled: [RemoveDuplicates]", "enabled: [RemoveDuplicats]", 1),
			wantErr: []string{`profiles[0].plugins.balance.enabled[0]: unknown plugin "RemoveDuplicats"; did you mean "RemoveDuplicates"?`},
		},
		{
			name:   "misspelt BudgetAwareEvictor enabled at filter",
			policy: strings.Replace(base, "    filter:\n      enabled: [BudgetAwareEvictor]", "    filter:\n      enabled: [BudgetAwareEvicter]", 1),
			wantErr: []string{
				`profiles[0].plugins.filter.enabled[0]: unknown plugin "BudgetAwareEvicter"; did you mean "BudgetAwareEvictor"?`,
				`BudgetAwareEvictor is enabled at preevictionfilter but not at filter`,
			},
		},
		{
			name:    "plugin in another case",
			policy:  strings.Replace(base, "enabled: [RemoveDuplicates]", "enabled: [removeduplicates]", 1),
			wantErr: []string{`profiles[0].plugins.balance.enabled[0]: unknown plugin "removeduplicates"; did you mean "RemoveDuplicates"?`},
		},
		{
			name:   "unknown plugin like none registered",
			policy: strings.Replace(base, "enabled: [RemoveDuplicates]", "enabled: [RemoveDuplicates, Shuffle]", 1),
			wantErr: []string{
				`profiles[0].plugins.balance.enabled[1]: unknown plugin "Shuffle"; balance plugins: `,
				"LowNodeUtilization", "RemoveDuplicates",
			},
		},
		{
			name:    "plugin at an extension point it does not implement",
			policy:  strings.Replace(base, "    balance:\n      enabled: [RemoveDuplicates]", "    deschedule:\n      enabled: [RemoveDuplicates]", 1),
			wantErr: []string{`profiles[0].plugins.deschedule.enabled[0]: plugin "RemoveDuplicates" does not run at deschedule; deschedule plugins: `},
		},
		{
			name:    "plugin enabled but not configured",
			policy:  strings.Replace(base, "enabled: [RemoveDuplicates]", "enabled: [RemoveDuplicates, LowNodeUtilization]", 1),
			wantErr: []string{`profiles[0].plugins.balance.enabled[1]: plugin "LowNodeUtilization" is enabled but not configured, which the descheduler refuses; add "- name: LowNodeUtilization" to profiles[0].pluginConfig`},
		},
		{
			name:   "DefaultEvictor enabled without its pluginConfig, which the descheduler adds",
			policy: strings.Replace(strings.Replace(base, "  - name: DefaultEvictor\n", "", 1), "enabled: [BudgetAwareEvictor]", "enabled: [DefaultEvictor, BudgetAwareEvictor]", 2),
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

// TestStockDecodingDropsCaseVariants documents why CheckPolicy is
// case-sensitive: the descheduler decodes a policy with the apimachinery
// JSON serializer (kjson.UnmarshalCaseSensitivePreserveInts) and drops a
// field written in another case without a word, so BudgetAwareEvictor
// would never run at preevictionfilter.
func TestStockDecodingDropsCaseVariants(t *testing.T) {
	registry := setup(t)
	doc := strings.Replace(base, "preevictionfilter:", "preEvictionFilter:", 1) + "MaxNoOfPodsToEvictPerNode: 3\n"
	policy, err := descheduler.LoadPolicyConfig(writePolicy(t, doc), fake.NewClientset(), registry)
	if err != nil {
		t.Fatalf("stock LoadPolicyConfig now rejects the policy (%v); CheckPolicy's case check may be redundant", err)
	}
	if got := policy.Profiles[0].Plugins.PreEvictionFilter.Enabled; contains(got, budgetevictor.PluginName) {
		t.Errorf("stock decoding kept preEvictionFilter: %v", got)
	}
	if policy.MaxNoOfPodsToEvictPerNode != nil {
		t.Errorf("stock decoding kept MaxNoOfPodsToEvictPerNode = %d", *policy.MaxNoOfPodsToEvictPerNode)
	}
}
