package runner

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/descheduler/pkg/api"

	"github.com/budgetguard/budgetguard/internal/report"
	"github.com/budgetguard/budgetguard/internal/testenv"
	"github.com/budgetguard/budgetguard/manifests"
	"github.com/budgetguard/budgetguard/plugins/budgetevictor"
)

func pluginConfigNames(p api.DeschedulerProfile) []string {
	var names []string
	for _, pc := range p.PluginConfigs {
		names = append(names, pc.Name)
	}
	return names
}

func TestShippedPolicyInBothModes(t *testing.T) {
	for _, tc := range []struct {
		mode      report.Mode
		wantOurs  bool
		wantNotes int
	}{
		{report.ModeBudgetguard, true, 0},
		{report.ModeUpstream, false, 1},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			path, err := checkPolicy(t.TempDir(), "shipped", manifests.DeschedulerPolicy)
			if err != nil {
				t.Fatalf("check: %v", err)
			}
			policy, notes, err := loadPolicy(path, "shipped", fake.NewClientset(), tc.mode)
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			if len(notes) != tc.wantNotes {
				t.Errorf("notes %q, want %d", notes, tc.wantNotes)
			}
			if len(policy.Profiles) == 0 {
				t.Fatal("no profiles")
			}
			for _, p := range policy.Profiles {
				for point, enabled := range map[string][]string{
					"filter":            p.Plugins.Filter.Enabled,
					"preEvictionFilter": p.Plugins.PreEvictionFilter.Enabled,
					"pluginConfig":      pluginConfigNames(p),
				} {
					if got := slices.Contains(enabled, budgetevictor.PluginName); got != tc.wantOurs {
						t.Errorf("profile %s %s %v: has %s %v, want %v", p.Name, point, enabled, budgetevictor.PluginName, got, tc.wantOurs)
					}
					if !slices.Contains(enabled, "DefaultEvictor") {
						t.Errorf("profile %s %s %v lost DefaultEvictor", p.Name, point, enabled)
					}
				}
				// The strategies are untouched.
				if !slices.Contains(p.Plugins.Balance.Enabled, "LowNodeUtilization") {
					t.Errorf("profile %s balance %v lost LowNodeUtilization", p.Name, p.Plugins.Balance.Enabled)
				}
			}
		})
	}
}

func TestUpstreamPolicyOnlyRemovesBudgetAwareEvictor(t *testing.T) {
	policy := &api.DeschedulerPolicy{Profiles: []api.DeschedulerProfile{
		{
			Name: "ours",
			PluginConfigs: []api.PluginConfig{
				{Name: "DefaultEvictor"}, {Name: budgetevictor.PluginName}, {Name: "RemoveDuplicates"},
			},
			Plugins: api.Plugins{
				Filter:            api.PluginSet{Enabled: []string{"DefaultEvictor", budgetevictor.PluginName}},
				PreEvictionFilter: api.PluginSet{Enabled: []string{budgetevictor.PluginName, "DefaultEvictor"}},
				Balance:           api.PluginSet{Enabled: []string{"RemoveDuplicates"}},
			},
		},
		{
			Name:          "stock",
			PluginConfigs: []api.PluginConfig{{Name: "DefaultEvictor"}},
			Plugins: api.Plugins{
				Filter:            api.PluginSet{Enabled: []string{"DefaultEvictor"}},
				PreEvictionFilter: api.PluginSet{Enabled: []string{"DefaultEvictor"}},
			},
		},
	}}
	notes := UpstreamPolicy(policy)
	if len(notes) != 1 || !strings.Contains(notes[0], "profile ours") {
		t.Errorf("notes %q, want one about profile ours", notes)
	}
	ours := policy.Profiles[0]
	for _, got := range [][]string{ours.Plugins.Filter.Enabled, ours.Plugins.PreEvictionFilter.Enabled} {
		if !slices.Equal(got, []string{"DefaultEvictor"}) {
			t.Errorf("evictors %v, want [DefaultEvictor]", got)
		}
	}
	if got := pluginConfigNames(ours); !slices.Equal(got, []string{"DefaultEvictor", "RemoveDuplicates"}) {
		t.Errorf("pluginConfig %v, want [DefaultEvictor RemoveDuplicates]", got)
	}
	if got := ours.Plugins.Balance.Enabled; !slices.Equal(got, []string{"RemoveDuplicates"}) {
		t.Errorf("balance %v changed", got)
	}
}

func TestPolicyErrorsNameTheFile(t *testing.T) {
	doc := "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles:\n- name: p\n  pluginConfig:\n  - name: BudgetAwareEvictor\n    args: {honorSafeToEvct: true}\n"
	_, err := checkPolicy(t.TempDir(), "my-policy.yaml", []byte(doc))
	if err == nil || !strings.Contains(err.Error(), "my-policy.yaml") || !strings.Contains(err.Error(), "honorSafeToEvct") {
		t.Errorf("error %v does not name the file and the field", err)
	}
	// The scratch copy the descheduler later reads is not the user's file.
	if err != nil && strings.Contains(err.Error(), "descheduler-policy.yaml") {
		t.Errorf("error %v names the sandbox's scratch copy", err)
	}
}

// TestPolicyCaseVariantIsAnError: the descheduler decodes field names
// case-sensitively and would drop "preEvictionFilter", so BudgetAwareEvictor
// would never run there; the sandbox refuses the policy before any control
// plane starts.
func TestPolicyCaseVariantIsAnError(t *testing.T) {
	doc := strings.Replace(string(manifests.DeschedulerPolicy), "preevictionfilter:", "preEvictionFilter:", 1)
	_, err := checkPolicy(t.TempDir(), "shipped", []byte(doc))
	const want = `profiles[0].plugins.preEvictionFilter: unknown field; field names are case-sensitive, write "preevictionfilter"`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("checkPolicy: error %v, want one containing %q", err, want)
	}
}

// TestLoadPolicyReportsProfiles: loading a policy exports, per profile,
// whether BudgetAwareEvictor protects it (budgetguard_profile_protected);
// the upstream run's copy of the shipped profile is unprotected.
func TestLoadPolicyReportsProfiles(t *testing.T) {
	path, err := checkPolicy(t.TempDir(), "shipped", manifests.DeschedulerPolicy)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mode report.Mode
		want float64
	}{{report.ModeUpstream, 0}, {report.ModeBudgetguard, 1}} {
		if _, _, err := loadPolicy(path, "shipped", fake.NewClientset(), tc.mode); err != nil {
			t.Fatalf("%s: load: %v", tc.mode, err)
		}
		if got, ok := profileProtected(t, "descheduler", "budgetguard"); !ok || got != tc.want {
			t.Errorf("%s: budgetguard_profile_protected{component=descheduler,profile=budgetguard} = %v (reported: %v), want %v", tc.mode, got, ok, tc.want)
		}
	}
}

// profileProtected reads budgetguard_profile_protected{component,profile}
// from the legacy registry; ok is false when it is not reported.
func profileProtected(t *testing.T, component, profile string) (value float64, ok bool) {
	t.Helper()
	return testenv.Metric(t, "budgetguard_profile_protected", map[string]string{"component": component, "profile": profile})
}
