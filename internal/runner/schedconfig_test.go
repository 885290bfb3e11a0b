package runner

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/klog/v2"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/budgetguard/budgetguard/internal/report"
	"github.com/budgetguard/budgetguard/internal/testobj"
	"github.com/budgetguard/budgetguard/manifests"
	"github.com/budgetguard/budgetguard/plugins/budgetpreemption"
)

// effectivePostFilter is the list of PostFilter plugins a profile runs:
// those multiPoint enables, in kube-scheduler's default order, minus what
// postFilter disables, plus what postFilter enables.
func effectivePostFilter(p schedconfig.KubeSchedulerProfile) []string {
	disabled := map[string]bool{}
	for _, d := range p.Plugins.PostFilter.Disabled {
		disabled[d.Name] = true
	}
	var out []string
	if !disabled["*"] {
		for _, e := range p.Plugins.MultiPoint.Enabled {
			// Of the default multiPoint plugins, only the preemption
			// plugins have a PostFilter extension.
			if (e.Name == defaultPreemption || e.Name == budgetpreemption.Name) && !disabled[e.Name] {
				out = append(out, e.Name)
			}
		}
	}
	for _, e := range p.Plugins.PostFilter.Enabled {
		if !slices.Contains(out, e.Name) {
			out = append(out, e.Name)
		}
	}
	return out
}

func profileNamed(t *testing.T, cfg *schedconfig.KubeSchedulerConfiguration, name string) schedconfig.KubeSchedulerProfile {
	t.Helper()
	for _, p := range cfg.Profiles {
		if p.SchedulerName == name {
			return p
		}
	}
	t.Fatalf("no profile %s in %v", name, cfg.Profiles)
	return schedconfig.KubeSchedulerProfile{}
}

func hasPluginConfig(p schedconfig.KubeSchedulerProfile, name string) bool {
	return slices.ContainsFunc(p.PluginConfig, func(pc schedconfig.PluginConfig) bool { return pc.Name == name })
}

func TestShippedSchedulerConfigInBothModes(t *testing.T) {
	for _, tc := range []struct {
		mode report.Mode
		want string // the PostFilter plugin of budgetguard-scheduler
	}{
		{report.ModeBudgetguard, budgetpreemption.Name},
		{report.ModeUpstream, defaultPreemption},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			sc, err := loadSchedulerConfig(klog.Background(), t.TempDir(), "shipped", manifests.SchedulerConfig, tc.mode)
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			if sc.config.LeaderElection.LeaderElect {
				t.Error("leader election is on, want off")
			}
			bg := profileNamed(t, sc.config, "budgetguard-scheduler")
			if got := effectivePostFilter(bg); !slices.Equal(got, []string{tc.want}) {
				t.Errorf("budgetguard-scheduler runs PostFilter %v, want [%s]", got, tc.want)
			}
			if got, want := hasPluginConfig(bg, budgetpreemption.Name), tc.mode == report.ModeBudgetguard; got != want {
				t.Errorf("budgetguard-scheduler has %s pluginConfig: %v, want %v", budgetpreemption.Name, got, want)
			}
			if !hasPluginConfig(bg, defaultPreemption) && tc.mode == report.ModeUpstream {
				t.Errorf("budgetguard-scheduler has no %s args after the rewrite", defaultPreemption)
			}
			// The shipped file has no default-scheduler profile; the runner
			// adds the stock one and says so.
			def := profileNamed(t, sc.config, defaultSchedulerName)
			if got := effectivePostFilter(def); !slices.Equal(got, []string{defaultPreemption}) {
				t.Errorf("default-scheduler runs PostFilter %v, want [%s]", got, defaultPreemption)
			}
			if !slices.ContainsFunc(sc.notes, func(n string) bool { return strings.Contains(n, "added kube-scheduler's stock one") }) {
				t.Errorf("notes %q do not mention the added default-scheduler profile", sc.notes)
			}
			upstreamNote := slices.ContainsFunc(sc.notes, func(n string) bool {
				return strings.Contains(n, "profile budgetguard-scheduler uses DefaultPreemption")
			})
			if upstreamNote != (tc.mode == report.ModeUpstream) {
				t.Errorf("notes %q: upstream rewrite mentioned %v, want %v", sc.notes, upstreamNote, tc.mode == report.ModeUpstream)
			}
		})
	}
}

func TestUpstreamSchedulerConfigRewrites(t *testing.T) {
	const header = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
	tests := []struct {
		name string
		doc  string
		// budgetguard profile's PostFilter plugins after the rewrite
		want []string
		// notes: how many profiles were rewritten
		rewritten int
	}{
		{"postFilter enables ours and disables DefaultPreemption", testobj.SchedulerConfig{SchedulerName: "bg", Args: "{mode: BestEffort}"}.YAML(), []string{defaultPreemption}, 1},
		{"postFilter disables everything", header + "profiles:\n- {schedulerName: bg, plugins: {postFilter: {enabled: [{name: BudgetAwarePreemption}], disabled: [{name: '*'}]}}}\n", []string{defaultPreemption}, 1},
		{"enabled through multiPoint", header + "profiles:\n- {schedulerName: bg, plugins: {multiPoint: {enabled: [{name: BudgetAwarePreemption}], disabled: [{name: DefaultPreemption}]}}}\n", []string{defaultPreemption}, 1},
		{"a stock profile is left alone", header + "profiles:\n- schedulerName: bg\n", []string{defaultPreemption}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, err := decodeVersioned([]byte(tc.doc))
			if err != nil {
				t.Fatal(err)
			}
			if notes := UpstreamSchedulerConfig(v); len(notes) != tc.rewritten {
				t.Errorf("notes %q, want %d", notes, tc.rewritten)
			}
			sc, err := loadSchedulerConfig(klog.Background(), t.TempDir(), "test", []byte(tc.doc), report.ModeUpstream)
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			p := profileNamed(t, sc.config, "bg")
			if got := effectivePostFilter(p); !slices.Equal(got, tc.want) {
				t.Errorf("PostFilter %v, want %v", got, tc.want)
			}
			if hasPluginConfig(p, budgetpreemption.Name) {
				t.Errorf("%s pluginConfig survived the rewrite", budgetpreemption.Name)
			}
		})
	}
}

func TestSchedulerConfigErrorsNameTheFile(t *testing.T) {
	tests := []struct {
		name, doc, want string
	}{
		{
			name: "unknown field",
			doc:  "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofile: []\n",
			want: `unknown field "profile"`,
		},
		{
			name: "invalid plugin args are caught in upstream mode too",
			doc: `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: bg
  pluginConfig:
  - name: BudgetAwarePreemption
    args: {actuaton: Evict}
`,
			want: "actuaton",
		},
		{
			name: "not a scheduler configuration",
			doc:  "apiVersion: v1\nkind: Pod\n",
			want: "no kind",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadSchedulerConfig(klog.Background(), t.TempDir(), "my-config.yaml", []byte(tc.doc), report.ModeUpstream)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), "my-config.yaml") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not name the file and %q", err, tc.want)
			}
		})
	}
}

// TestSchedulerConfigIsChecked: the sandbox checks the scheduler
// configuration as cmd/scheduler does (package schedulerconfig) before
// anything starts. A budgetguard run refuses a profile where
// DefaultPreemption still runs, one that configures BudgetAwarePreemption
// without enabling it, and invalid args; an upstream run replaces
// BudgetAwarePreemption with DefaultPreemption, so only the args apply.
func TestSchedulerConfigIsChecked(t *testing.T) {
	const header = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
	both := header + `profiles:
- schedulerName: bg
  plugins:
    postFilter:
      enabled: [{name: BudgetAwarePreemption}]
`
	configuredOnly := header + `profiles:
- schedulerName: bg
  pluginConfig:
  - name: BudgetAwarePreemption
    args: {mode: Strict}
`
	kill := testobj.SchedulerConfig{SchedulerName: "bg", Args: "{actuation: Kill}"}.YAML()
	tests := []struct {
		name string
		doc  string
		mode report.Mode
		want string // "" when the configuration loads
	}{
		{"both preemption plugins", both, report.ModeBudgetguard,
			`profiles[0] ("bg").plugins.postFilter: BudgetAwarePreemption and DefaultPreemption are both enabled`},
		{"both preemption plugins, upstream", both, report.ModeUpstream, ""},
		{"configured but not enabled", configuredOnly, report.ModeBudgetguard,
			`profiles[0] ("bg").pluginConfig[0]: BudgetAwarePreemption is configured but not enabled at postFilter`},
		{"configured but not enabled, upstream", configuredOnly, report.ModeUpstream, ""},
		{"invalid args", kill, report.ModeBudgetguard, `profiles[0].pluginConfig[0].args.actuation: Unsupported value: "Kill"`},
		{"invalid args, upstream", kill, report.ModeUpstream, `profiles[0].pluginConfig[0].args.actuation: Unsupported value: "Kill"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadSchedulerConfig(klog.Background(), t.TempDir(), "my-config.yaml", []byte(tc.doc), tc.mode)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("load: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), "my-config.yaml") || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v does not name the file and %q", err, tc.want)
			}
		})
	}
}
