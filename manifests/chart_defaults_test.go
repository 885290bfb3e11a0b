package manifests_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/descheduler/pkg/api"
	"sigs.k8s.io/descheduler/pkg/framework/pluginregistry"
	"sigs.k8s.io/descheduler/pkg/framework/plugins/defaultevictor"
	"sigs.k8s.io/descheduler/pkg/framework/plugins/nodeutilization"
	"sigs.k8s.io/descheduler/pkg/framework/plugins/removepodshavingtoomanyrestarts"
	"sigs.k8s.io/yaml"

	"github.com/budgetguard/budgetguard/internal/deschedulerpolicy"
	"github.com/budgetguard/budgetguard/internal/schedulerconfig"
	"github.com/budgetguard/budgetguard/plugins/budgetevictor"
	"github.com/budgetguard/budgetguard/plugins/budgetpreemption"
)

// helmTemplate renders charts/budgetguard with the pinned helm and the
// chart's default values, as `helm template budgetguard charts/budgetguard
// -n kube-system`, and returns the data of its ConfigMaps by name and key.
func helmTemplate(t *testing.T) map[string]map[string]string {
	t.Helper()
	cmd := exec.Command(filepath.Join("hack", "helm.sh"), "template", "budgetguard", "charts/budgetguard",
		"--namespace", "kube-system")
	cmd.Dir = ".."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, stderr.String())
	}
	configMaps := map[string]map[string]string{}
	for _, doc := range strings.Split(string(out), "\n---") {
		var cm struct {
			Kind     string                `json:"kind"`
			Metadata struct{ Name string } `json:"metadata"`
			Data     map[string]string     `json:"data"`
		}
		if err := yaml.Unmarshal([]byte(doc), &cm); err != nil {
			t.Fatalf("helm template's output: %v", err)
		}
		if cm.Kind == "ConfigMap" {
			configMaps[cm.Metadata.Name] = cm.Data
		}
	}
	return configMaps
}

// writeTemp writes data into a file of its own and returns its path.
func writeTemp(t *testing.T, data string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestChartDefaultsAreTheBinariesDefaults renders the chart with its default
// values and loads the KubeSchedulerConfiguration and the DeschedulerPolicy
// as the binaries do (internal/schedulerconfig, internal/deschedulerpolicy).
// The scheduler's configuration must be kube-scheduler's defaults, apart
// from the lease's name and namespace, with BudgetAwarePreemption's default
// args. The descheduler binary has no policy of its own, so the policy's
// args are compared with each plugin's defaults, and the differences
// listed here are the ones values.yaml states beside the value: a default
// changed in the chart without a word fails here.
func TestChartDefaultsAreTheBinariesDefaults(t *testing.T) {
	configMaps := helmTemplate(t)

	t.Run("scheduler", func(t *testing.T) {
		doc, ok := configMaps["budgetguard-scheduler-config"]["scheduler-config.yaml"]
		if !ok {
			t.Fatalf("no ConfigMap budgetguard-scheduler-config with scheduler-config.yaml: %v", configMaps)
		}
		got, err := schedulerconfig.Load(klog.Background(), writeTemp(t, doc))
		if err != nil {
			t.Fatalf("load the chart's KubeSchedulerConfiguration: %v", err)
		}
		if err := schedulerconfig.Check(got); err != nil {
			t.Errorf("the chart's KubeSchedulerConfiguration: %v", err)
		}
		stock, err := schedulerconfig.Load(klog.Background(), writeTemp(t, "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"))
		if err != nil {
			t.Fatal(err)
		}
		// The one difference: a Lease of its own, in the release's namespace,
		// not the cluster's kube-scheduler's.
		stock.LeaderElection.ResourceName = "budgetguard-scheduler"
		stock.LeaderElection.ResourceNamespace = "kube-system"
		if diff := cmp.Diff(stock, got, cmpopts.IgnoreFields(schedconfig.KubeSchedulerConfiguration{}, "Profiles")); diff != "" {
			t.Errorf("the chart's KubeSchedulerConfiguration differs from kube-scheduler's defaults (-stock,+chart):\n%s", diff)
		}
		var args runtime.Object
		for _, prof := range got.Profiles {
			for _, pc := range prof.PluginConfig {
				if pc.Name == budgetpreemption.Name {
					args = pc.Args
				}
			}
		}
		if diff := cmp.Diff(budgetpreemption.DefaultArgs(), args); diff != "" {
			t.Errorf("the chart's BudgetAwarePreemption args differ from the binary's defaults (-binary,+chart):\n%s", diff)
		}
	})

	t.Run("descheduler", func(t *testing.T) {
		doc, ok := configMaps["budgetguard-descheduler-policy"]["policy.yaml"]
		if !ok {
			t.Fatalf("no ConfigMap budgetguard-descheduler-policy with policy.yaml: %v", configMaps)
		}
		deschedulerpolicy.SetupPlugins(budgetevictor.Options{})
		registry := pluginregistry.PluginRegistry
		got, err := deschedulerpolicy.ValidatePolicyFile(writeTemp(t, doc), registry)
		if err != nil {
			t.Fatalf("load the chart's DeschedulerPolicy: %v", err)
		}
		stock, err := deschedulerpolicy.ValidatePolicyFile(writeTemp(t, `apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: budgetguard
  pluginConfig:
  - name: DefaultEvictor
  - name: BudgetAwareEvictor
  - name: RemoveDuplicates
  plugins:
    filter: {enabled: [DefaultEvictor, BudgetAwareEvictor]}
    preevictionfilter: {enabled: [DefaultEvictor, BudgetAwareEvictor]}
    balance: {enabled: [RemoveDuplicates]}
`), registry)
		if err != nil {
			t.Fatal(err)
		}
		// values.yaml: descheduler.deschedulerPolicy.maxNoOfPodsToEvictPer*.
		stock.MaxNoOfPodsToEvictPerNode = ptr.To[uint](5)
		stock.MaxNoOfPodsToEvictPerNamespace = ptr.To[uint](5)
		if diff := cmp.Diff(stock, got, cmpopts.IgnoreFields(api.DeschedulerPolicy{}, "Profiles")); diff != "" {
			t.Errorf("the chart's DeschedulerPolicy differs from the descheduler's defaults beyond what values.yaml states (-stated,+chart):\n%s", diff)
		}

		// The args each plugin has with none given: as the descheduler's
		// loading defaults them where a policy without args can show it (it
		// gives DefaultEvictor a priorityThreshold, which the plugin's own
		// defaulter does not), else as the plugin's defaulter does; then
		// changed as values.yaml states beside each value.
		stockArgs := map[string]runtime.Object{}
		for _, pc := range stock.Profiles[0].PluginConfigs {
			stockArgs[pc.Name] = pc.Args
		}
		stated := map[string]func(runtime.Object){
			"DefaultEvictor": func(o runtime.Object) { o.(*defaultevictor.DefaultEvictorArgs).NodeFit = true },
			"RemovePodsHavingTooManyRestarts": func(o runtime.Object) {
				a := o.(*removepodshavingtoomanyrestarts.RemovePodsHavingTooManyRestartsArgs)
				a.PodRestartThreshold = 10 // no default: at least 1 is required
				a.IncludingInitContainers = true
			},
			"LowNodeUtilization": func(o runtime.Object) {
				a := o.(*nodeutilization.LowNodeUtilizationArgs)
				// No default: both are required.
				a.Thresholds = api.ResourceThresholds{"cpu": 20, "memory": 20, "pods": 20}
				a.TargetThresholds = api.ResourceThresholds{"cpu": 50, "memory": 50, "pods": 50}
			},
		}
		seen := map[string]bool{}
		for _, prof := range got.Profiles {
			for _, pc := range prof.PluginConfigs {
				seen[pc.Name] = true
				util, ok := registry[pc.Name]
				if !ok {
					t.Errorf("profile %s configures %s, which the registry does not hold", prof.Name, pc.Name)
					continue
				}
				if util.PluginArgInstance == nil {
					if pc.Args != nil {
						t.Errorf("profile %s: %s takes no args, got %T", prof.Name, pc.Name, pc.Args)
					}
					continue
				}
				want, ok := stockArgs[pc.Name]
				if ok {
					want = want.DeepCopyObject()
				} else {
					want = reflect.New(reflect.TypeOf(util.PluginArgInstance).Elem()).Interface().(runtime.Object)
					util.PluginArgDefaulter(want)
				}
				if f, ok := stated[pc.Name]; ok {
					f(want)
				}
				if diff := cmp.Diff(want, pc.Args); diff != "" {
					t.Errorf("profile %s: %s args differ from its defaults beyond what values.yaml states (-stated,+chart):\n%s", prof.Name, pc.Name, diff)
				}
			}
		}
		for name := range stated {
			if !seen[name] {
				t.Errorf("the policy no longer configures %s: drop it from the stated differences", name)
			}
		}
		if !seen[budgetevictor.PluginName] {
			t.Errorf("the policy does not configure %s", budgetevictor.PluginName)
		}
	})
}

// TestChartSchemaKnowsEveryPluginArg: values.schema.json closes
// scheduler.pluginArgs to the fields of BudgetAwarePreemption's versioned
// args, so a misspelt arg fails at helm template; the two lists must stay
// the same, or a new arg would be refused by the chart.
func TestChartSchemaKnowsEveryPluginArg(t *testing.T) {
	data, err := os.ReadFile("../charts/budgetguard/values.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties struct {
			Scheduler struct {
				Properties struct {
					PluginArgs struct {
						AdditionalProperties *bool          `json:"additionalProperties"`
						Properties           map[string]any `json:"properties"`
					} `json:"pluginArgs"`
				} `json:"properties"`
			} `json:"scheduler"`
		} `json:"properties"`
	}
	if err := yaml.Unmarshal(data, &schema); err != nil {
		t.Fatal(err)
	}
	pa := schema.Properties.Scheduler.Properties.PluginArgs
	if pa.AdditionalProperties == nil || *pa.AdditionalProperties {
		t.Errorf("scheduler.pluginArgs accepts unknown fields in values.schema.json")
	}
	var got, want []string
	for name := range pa.Properties {
		got = append(got, name)
	}
	typ := reflect.TypeOf(budgetpreemption.VersionedArgs{})
	for i := range typ.NumField() {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		if name != "" {
			want = append(want, name)
		}
	}
	if diff := cmp.Diff(want, got, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("values.schema.json's scheduler.pluginArgs and BudgetAwarePreemption's args differ (-args,+schema):\n%s", diff)
	}
}
