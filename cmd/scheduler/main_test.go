package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"

	"github.com/budgetguard/budgetguard/internal/schedulerconfig"
	"github.com/budgetguard/budgetguard/internal/testmain"
	"github.com/budgetguard/budgetguard/internal/testobj"
	"github.com/budgetguard/budgetguard/plugins/budget"
	"github.com/budgetguard/budgetguard/plugins/budgetpreemption"
)

func TestMain(m *testing.M) { testmain.Main(m, main) }

// run runs the scheduler command with args in a child process and returns
// all it wrote and its exit code.
func run(t *testing.T, args ...string) (string, int) {
	t.Helper()
	res := testmain.Run(t, args...)
	return res.Output(), res.Code
}

func TestHelp(t *testing.T) {
	out, code := run(t, "--help")
	for _, flag := range []string{"--config", "--validate-only"} {
		if code != 0 || !strings.Contains(out, flag) {
			t.Errorf("--help: exit code %d, output without %s:\n%s", code, flag, out)
		}
	}
}

// TestVersion: --version is budgetguard's version line, not kube-scheduler's
// (which says v0.0.0-master+$Format:%H$ in a binary built outside
// Kubernetes' own build).
func TestVersion(t *testing.T) {
	out, code := run(t, "--version")
	if code != 0 || !strings.Contains(out, "budgetguard v") || !strings.Contains(out, "Kubernetes v1.37.2") ||
		strings.Contains(out, "unknown") || strings.Contains(out, "$Format") {
		t.Errorf("--version: exit code %d, output %q", code, out)
	}
	out, code = run(t, "--version=raw")
	if code != 0 || !strings.Contains(out, `"version": "v`) || !strings.Contains(out, `"kubernetes": "v1.37.2"`) {
		t.Errorf("--version=raw: exit code %d, output %q", code, out)
	}
}

// withoutCluster is the head of a configuration whose clientConnection
// names no kubeconfig: outside a cluster, kube-scheduler can build no client
// from it, so an error that names the configuration shows the check ran
// before anything else.
const withoutCluster = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nleaderElection:\n  leaderElect: false\n"

// TestConfigErrors runs the binary with configurations that would start a
// scheduler without budget protection, or with invalid plugin args: it must
// exit non-zero, before it needs a cluster, with the profile and the field
// in the message and what to write instead. --validate-only says the same.
func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want string
	}{
		{
			name: "both preemption plugins",
			doc: withoutCluster + `profiles:
- schedulerName: default-scheduler
- schedulerName: budgetguard-scheduler
  plugins:
    postFilter:
      enabled: [{name: BudgetAwarePreemption}]
`,
			want: `profiles[1] ("budgetguard-scheduler").plugins.postFilter: BudgetAwarePreemption and DefaultPreemption are both enabled; ` +
				`DefaultPreemption runs first and ignores budgets: add {name: DefaultPreemption} to plugins.postFilter.disabled`,
		},
		{
			name: "configured but not enabled",
			doc: withoutCluster + `profiles:
- schedulerName: budgetguard-scheduler
  pluginConfig:
  - name: BudgetAwarePreemption
    args: {mode: Strict}
`,
			want: `profiles[0] ("budgetguard-scheduler").pluginConfig[0]: BudgetAwarePreemption is configured but not enabled at postFilter`,
		},
		{
			// kube-scheduler's validation passes an unknown plugin name,
			// and its start fails on it ("PostFilterPlugin ... does not
			// exist") once it has a cluster.
			name: "misspelt plugin at postFilter",
			doc: withoutCluster + `profiles:
- schedulerName: budgetguard-scheduler
  plugins:
    postFilter:
      enabled: [{name: BudgetAwarePreemptoin}]
      disabled: [{name: DefaultPreemption}]
`,
			want: `profiles[0] ("budgetguard-scheduler").plugins.postFilter.enabled: unknown plugin "BudgetAwarePreemptoin"; did you mean "BudgetAwarePreemption"?`,
		},
		{
			name: "misspelt plugin at score, beside BudgetAwarePreemption",
			doc: testobj.SchedulerConfig{}.YAML() + `    score:
      enabled: [{name: NodeResourcesFitt, weight: 1}]
`,
			want: `profiles[0] ("budgetguard-scheduler").plugins.score.enabled: unknown plugin "NodeResourcesFitt"; did you mean "NodeResourcesFit"?`,
		},
		{
			name: "unsupported actuation",
			doc:  testobj.SchedulerConfig{Args: "{actuation: Kill}"}.YAML(),
			want: `profiles[0].pluginConfig[0].args.actuation: Unsupported value: "Kill"`,
		},
		{
			name: "override priority 0",
			doc:  testobj.SchedulerConfig{Args: "{overrideBudgetsAtPriority: 0}"}.YAML(),
			want: `profiles[0].pluginConfig[0].args.overrideBudgetsAtPriority: Invalid value: 0: must be above 0`,
		},
		{
			name: "unknown field, rejected by the strict codec",
			doc:  testobj.SchedulerConfig{Args: "{actuaton: Delete}"}.YAML(),
			want: `decoding .profiles[0].pluginConfig[0]: strict decoding error: decoding args for plugin BudgetAwarePreemption: strict decoding error: unknown field "actuaton"`,
		},
	}
	for _, tc := range tests {
		for _, validateOnly := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/validate-only=%v", tc.name, validateOnly), func(t *testing.T) {
				config := testmain.WriteFile(t, t.TempDir(), "config.yaml", tc.doc)
				args := []string{"--config=" + config, "--secure-port=0"}
				if validateOnly {
					args = append(args, "--validate-only")
				}
				out, code := run(t, args...)
				if code == 0 {
					t.Fatalf("exit code 0, want non-zero; output:\n%s", out)
				}
				// The error has several lines, which klog prints as they
				// are, without quoting.
				if !strings.Contains(out, tc.want) {
					t.Errorf("output does not contain %q:\n%s", tc.want, out)
				}
				if strings.Contains(out, "no configuration has been provided") {
					t.Errorf("the scheduler looked for a cluster before it checked the configuration:\n%s", out)
				}
			})
		}
	}
}

// TestValidateOnly: a valid configuration is reported valid on one line,
// without a cluster.
func TestValidateOnly(t *testing.T) {
	const config = "../../manifests/scheduler/scheduler-config.yaml"
	res := testmain.Run(t, "--config", config, "--validate-only")
	if res.Code != 0 || res.Stdout != "config "+config+" is valid\n" {
		t.Errorf("exit code %d, stdout %q, want 0 and %q; stderr:\n%s", res.Code, res.Stdout, "config "+config+" is valid", res.Stderr)
	}
	if out, code := run(t, "--validate-only"); code == 0 || !strings.Contains(out, "--validate-only needs --config") {
		t.Errorf("--validate-only without --config: exit code %d, output:\n%s", code, out)
	}
}

// TestReportsProfiles: at start, after the configuration is checked and
// before kube-scheduler looks for a cluster, the binary logs per profile
// where BudgetAwarePreemption runs, and warns of a profile without it or
// without its preEnqueue gate.
func TestReportsProfiles(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{
			name: "shipped configuration",
			args: []string{"--config=../../manifests/scheduler/scheduler-config.yaml"},
			want: `"budgetguard plugins enabled" component="scheduler" profile="budgetguard-scheduler" plugins="BudgetAwarePreemption@postFilter,BudgetAwarePreemption@preEnqueue"`,
		},
		{
			// Preemption is asynchronous by default (SchedulerAsyncPreemption);
			// without its PreEnqueue gate a preemptor may preempt twice.
			name: "BudgetAwarePreemption at postFilter only",
			args: []string{"--config=" + testmain.WriteFile(t, t.TempDir(), "config.yaml", postFilterOnly)},
			want: `Warning: BudgetAwarePreemption preempts here but is not enabled at preEnqueue, so a preemptor may preempt again while its victims are still being disrupted: add {name: BudgetAwarePreemption} to plugins.preEnqueue.enabled and {name: DefaultPreemption} to plugins.preEnqueue.disabled" component="scheduler" profile="budgetguard-scheduler" field="profiles[0].plugins.preEnqueue"`,
		},
		{
			name: "no configuration: kube-scheduler's default",
			want: `this profile runs without budgetguard; its disruptions are not checked against disruption budgets" component="scheduler" profile="default-scheduler"`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// No cluster: the scheduler stops when it builds its client.
			out, code := run(t, append(tc.args, "--secure-port=0", "--leader-elect=false")...)
			if code == 0 || !strings.Contains(out, tc.want) {
				t.Errorf("exit code %d, output without %q:\n%s", code, tc.want, out)
			}
		})
	}
}

// TestShippedManifests loads every KubeSchedulerConfiguration in
// manifests/scheduler (also inside ConfigMaps) as the binary does, checks it
// with budgetguard's checks and requires a budgetguard-scheduler profile
// that runs BudgetAwarePreemption at postFilter and preEnqueue; everything else but
// kustomize's own files is decoded strictly through client-go's scheme.
func TestShippedManifests(t *testing.T) {
	const dir = "../../manifests/scheduler"
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", dir, err)
	}
	shipped, err := os.ReadFile(filepath.Join(dir, "scheduler-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	kube := serializer.NewCodecFactory(clientscheme.Scheme, serializer.EnableStrict).UniversalDeserializer()
	configs := 0
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for i := 0; ; i++ {
			doc, err := r.Read()
			if err != nil {
				break
			}
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			where := file + " document " + strconv.Itoa(i)
			switch {
			case bytes.Contains(doc, []byte("kind: KubeSchedulerConfiguration")) && !bytes.Contains(doc, []byte("kind: ConfigMap")):
				checkSchedulerConfig(t, where, doc)
				configs++
				continue
			case bytes.Contains(doc, []byte("apiVersion: kustomize.config.k8s.io/")):
				continue
			}
			obj, _, err := kube.Decode(doc, nil, nil)
			if err != nil {
				t.Errorf("%s: %v", where, err)
				continue
			}
			if cm, ok := obj.(*corev1.ConfigMap); ok {
				for key, value := range cm.Data {
					checkSchedulerConfig(t, where+" key "+key, []byte(value))
					configs++
					if key == "scheduler-config.yaml" && value != string(shipped) {
						t.Errorf("%s: ConfigMap key %s differs from scheduler-config.yaml", where, key)
					}
				}
			}
		}
	}
	if configs == 0 {
		t.Errorf("found no scheduler configuration in %s", dir)
	}
}

func checkSchedulerConfig(t *testing.T, where string, doc []byte) {
	t.Helper()
	cfg, err := schedulerconfig.Load(klog.Background(), testmain.WriteFile(t, t.TempDir(), "config.yaml", string(doc)))
	if err == nil {
		err = schedulerconfig.Check(cfg)
	}
	if err != nil {
		t.Errorf("%s: %v", where, err)
		return
	}
	want := budget.ProfilePlugins{"postFilter": {budgetpreemption.Name}, "preEnqueue": {budgetpreemption.Name}}
	for i := range cfg.Profiles {
		if p := &cfg.Profiles[i]; p.SchedulerName == "budgetguard-scheduler" {
			if diff := cmp.Diff(want, schedulerconfig.ProfilePlugins(p)); diff != "" {
				t.Errorf("%s: budgetguard-scheduler's plugins (-want,+got):\n%s", where, diff)
			}
			return
		}
	}
	t.Errorf("%s: no budgetguard-scheduler profile", where)
}

// postFilterOnly is the shipped profile before it enabled
// BudgetAwarePreemption at preEnqueue.
const postFilterOnly = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: budgetguard-scheduler
  plugins:
    postFilter:
      enabled:
      - name: BudgetAwarePreemption
      disabled:
      - name: DefaultPreemption
`
