package main

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientscheme "k8s.io/client-go/kubernetes/scheme"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	schedscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	schedvalidation "k8s.io/kubernetes/pkg/scheduler/apis/config/validation"

	"github.com/budgetguard/budgetguard/internal/testmain"
	"github.com/budgetguard/budgetguard/internal/testobj"
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

func TestHelpAndVersion(t *testing.T) {
	out, code := run(t, "--help")
	if code != 0 || !strings.Contains(out, "--config") {
		t.Errorf("--help: exit code %d, output without --config:\n%s", code, out)
	}
	out, code = run(t, "--version")
	if code != 0 || !strings.Contains(out, "Kubernetes v") {
		t.Errorf("--version: exit code %d, output %q", code, out)
	}
}

// TestInvalidArgs runs the binary with invalid plugin args: it must exit
// non-zero with the path of the offending field in the message.
func TestInvalidArgs(t *testing.T) {
	tests := []struct {
		name string
		args string
		want string
	}{
		{
			name: "unsupported actuation, rejected by the plugin's validation",
			args: "{actuation: Kill}",
			want: `pluginConfig[BudgetAwarePreemption].args.actuation: Unsupported value: "Kill"`,
		},
		{
			name: "unknown field, rejected by the strict codec",
			args: "{actuaton: Delete}",
			want: `decoding .profiles[0].pluginConfig[0]: strict decoding error: decoding args for plugin BudgetAwarePreemption: strict decoding error: unknown field "actuaton"`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			// Nothing listens there: the command must fail before it connects.
			kubeconfig := testmain.WriteFile(t, dir, "kubeconfig", `apiVersion: v1
kind: Config
clusters:
- name: none
  cluster:
    server: https://127.0.0.1:1
contexts:
- name: none
  context:
    cluster: none
    user: none
users:
- name: none
  user:
    token: none
current-context: none
`)
			config := testmain.WriteFile(t, dir, "config.yaml", testobj.SchedulerConfig{Kubeconfig: kubeconfig, Args: tc.args}.YAML())
			out, code := run(t, "--config="+config, "--secure-port=0")
			if code == 0 {
				t.Fatalf("exit code 0, want non-zero; output:\n%s", out)
			}
			// klog quotes the error: unescape its quotes before matching.
			if !strings.Contains(strings.ReplaceAll(out, `\"`, `"`), tc.want) {
				t.Errorf("output does not contain %q:\n%s", tc.want, out)
			}
		})
	}
}

// TestShippedManifests decodes every document in manifests/scheduler: each
// KubeSchedulerConfiguration (also inside ConfigMaps) through the binary's
// own scheme, strictly, and everything else through client-go's scheme.
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
			if bytes.Contains(doc, []byte("kind: KubeSchedulerConfiguration")) && !bytes.Contains(doc, []byte("kind: ConfigMap")) {
				checkSchedulerConfig(t, where, doc)
				configs++
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
	if configs < 2 {
		t.Errorf("found %d scheduler configurations, want the file and the ConfigMap", configs)
	}
}

func checkSchedulerConfig(t *testing.T, where string, doc []byte) {
	t.Helper()
	obj, _, err := schedscheme.Codecs.UniversalDecoder().Decode(doc, nil, nil)
	if err != nil {
		t.Errorf("%s: %v", where, err)
		return
	}
	cfg, ok := obj.(*schedconfig.KubeSchedulerConfiguration)
	if !ok {
		t.Errorf("%s: decoded a %T", where, obj)
		return
	}
	if err := schedvalidation.ValidateKubeSchedulerConfiguration(cfg); err != nil {
		t.Errorf("%s: %v", where, err)
	}
	found := false
	for _, prof := range cfg.Profiles {
		if prof.SchedulerName != "budgetguard-scheduler" {
			continue
		}
		for _, p := range prof.Plugins.PostFilter.Enabled {
			if p.Name == "DefaultPreemption" {
				t.Errorf("%s: profile %s still enables DefaultPreemption", where, prof.SchedulerName)
			}
			found = found || p.Name == budgetpreemption.Name
		}
		for _, pc := range prof.PluginConfig {
			if pc.Name != budgetpreemption.Name {
				continue
			}
			args, ok := pc.Args.(*budgetpreemption.BudgetAwarePreemptionArgs)
			if !ok {
				t.Errorf("%s: args are a %T", where, pc.Args)
				continue
			}
			if err := budgetpreemption.ValidateBudgetAwarePreemptionArgs(nil, args); err != nil {
				t.Errorf("%s: %v", where, err)
			}
		}
	}
	if !found {
		t.Errorf("%s: no budgetguard-scheduler profile enabling %s at PostFilter", where, budgetpreemption.Name)
	}
}
