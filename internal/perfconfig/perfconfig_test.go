package perfconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

const upstreamFile = `
- name: SchedulingBasic
  workloadTemplate:
  - opcode: createNodes
    countParam: $initNodes
  workloads:
  - name: 5Nodes
    params: {initNodes: 5}
- name: PreemptionBasic
  workloadTemplate:
  - opcode: createNodes
    countParam: $initNodes
  - opcode: createPods
    countParam: $initPods
    podTemplatePath: ../templates/pod-low-priority.yaml
  - opcode: createPods
    countParam: $measurePods
    podTemplatePath: ../templates/pod-high-priority.yaml
    collectMetrics: true
  workloads:
  - name: 5Nodes
    featureGates:
      SchedulerQueueingHints: false
    labels: [integration-test, short]
    params: {initNodes: 5, initPods: 20, measurePods: 5}
- name: PreemptionPodGroupDisruptionMode
  featureGates: {GenericWorkload: true}
  workloadTemplate:
  - opcode: createNodes
    countParam: $initNodes
  workloads:
  - name: FastTest_NoPodGroup
    labels: [integration-test, short]
    params: {initNodes: 2, lowPriorityGroups: 2, disruptionMode: ""}
  - name: 1000Nodes_1000Candidates_DisruptionAll
    labels: [performance]
    params: {initNodes: 1000, lowPriorityGroups: 1000, disruptionMode: all}
`

const budgetsFile = `
- name: PreemptionBasicBudgets
  workloadTemplate:
  - opcode: createPods
    countParam: $initPods
    podTemplatePath: templates/app.yaml
  - opcode: churn
    mode: create
    templatePaths: [templates/app.yaml, upstream:../templates/pod-high-priority.yaml]
  workloads:
  - name: nodes=100
    params: {initPods: 400}
`

// tree writes upstream's layout (misc/, templates/) and a budgets directory
// under a temporary directory, and returns the options that read it.
func tree(t *testing.T, upstream, budgets string) Options {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"k8s/misc/performance-config.yaml":       upstream,
		"k8s/templates/pod-low-priority.yaml":    "kind: Pod",
		"k8s/templates/pod-high-priority.yaml":   "kind: Pod",
		"perf/config/budgets.yaml":               budgets,
		"perf/config/templates/app.yaml":         "kind: Pod",
		"perf/config/scheduler-budgetguard.yaml": "kind: KubeSchedulerConfiguration",
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return Options{
		UpstreamConfig:    filepath.Join(dir, "k8s/misc/performance-config.yaml"),
		UpstreamTestCases: []string{"PreemptionBasic"},
		BudgetsConfig:     filepath.Join(dir, "perf/config/budgets.yaml"),
		SchedulerConfig:   filepath.Join(dir, "perf/config/scheduler-budgetguard.yaml"),
		Nodes:             []int{100},
		Label:             "budgetguard",
	}
}

func TestGenerate(t *testing.T) {
	o := tree(t, upstreamFile, budgetsFile)
	data, err := Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	if err := yaml.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	k8s := filepath.Dir(filepath.Dir(o.UpstreamConfig))
	perf := filepath.Dir(o.BudgetsConfig)
	want := []map[string]any{
		{
			"name": "PreemptionBasic",
			"workloadTemplate": []any{
				map[string]any{"opcode": "createNodes", "countParam": "$initNodes"},
				map[string]any{"opcode": "createPods", "countParam": "$initPods",
					"podTemplatePath": filepath.Join(k8s, "templates/pod-low-priority.yaml")},
				map[string]any{"opcode": "createPods", "countParam": "$measurePods", "collectMetrics": true,
					"podTemplatePath": filepath.Join(k8s, "templates/pod-high-priority.yaml")},
			},
			"workloads": []any{
				map[string]any{"name": "5Nodes", "featureGates": map[string]any{"SchedulerQueueingHints": false},
					"labels": []any{"integration-test", "short"},
					"params": map[string]any{"initNodes": float64(5), "initPods": float64(20), "measurePods": float64(5)}},
				map[string]any{"name": "nodes=100", "labels": []any{"budgetguard", "nodes-100"},
					"params": map[string]any{"initNodes": float64(100), "initPods": float64(400), "measurePods": float64(100)}},
			},
			"schedulerConfigPath":    o.SchedulerConfig,
			"metricsCollectorConfig": roundTrip(t, MetricsCollectorConfig),
		},
		{
			"name": "PreemptionBasicBudgets",
			"workloadTemplate": []any{
				map[string]any{"opcode": "createPods", "countParam": "$initPods",
					"podTemplatePath": filepath.Join(perf, "templates/app.yaml")},
				map[string]any{"opcode": "churn", "mode": "create", "templatePaths": []any{
					filepath.Join(perf, "templates/app.yaml"),
					filepath.Join(k8s, "templates/pod-high-priority.yaml"),
				}},
			},
			"workloads": []any{
				map[string]any{"name": "nodes=100", "params": map[string]any{"initPods": float64(400)}},
			},
			"schedulerConfigPath":    o.SchedulerConfig,
			"metricsCollectorConfig": roundTrip(t, MetricsCollectorConfig),
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("generated workload file (-want,+got):\n%s", diff)
	}
}

// A test case whose workloads have parameters of their own runs upstream's
// workloads as they are, labelled for the size they have; none is added.
func TestGenerateKeepsUpstreamWorkloads(t *testing.T) {
	o := tree(t, upstreamFile, budgetsFile)
	o.UpstreamTestCases = []string{"PreemptionBasic", "PreemptionPodGroupDisruptionMode"}
	o.UpstreamWorkloads = map[string][]string{"PreemptionPodGroupDisruptionMode": {"1000Nodes_1000Candidates_DisruptionAll"}}
	data, err := Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	if err := yaml.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[1]["name"] != "PreemptionPodGroupDisruptionMode" {
		t.Fatalf("want PreemptionBasic, PreemptionPodGroupDisruptionMode and the budgets' test case, got %d: %v", len(got), got)
	}
	want := []any{
		map[string]any{"name": "FastTest_NoPodGroup", "labels": []any{"integration-test", "short"},
			"params": map[string]any{"initNodes": float64(2), "lowPriorityGroups": float64(2), "disruptionMode": ""}},
		map[string]any{"name": "1000Nodes_1000Candidates_DisruptionAll", "labels": []any{"performance", "budgetguard", "nodes-1000"},
			"params": map[string]any{"initNodes": float64(1000), "lowPriorityGroups": float64(1000), "disruptionMode": "all"}},
	}
	if diff := cmp.Diff(want, got[1]["workloads"]); diff != "" {
		t.Errorf("the gang test case's workloads (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]any{"GenericWorkload": true}, got[1]["featureGates"]); diff != "" {
		t.Errorf("the gang test case's feature gates are not upstream's (-want,+got):\n%s", diff)
	}
}

func roundTrip(t *testing.T, v any) any {
	t.Helper()
	data, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := yaml.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestGenerateRefusesMalformedInput(t *testing.T) {
	tests := []struct {
		name     string
		upstream string
		budgets  string
		edit     func(*Options)
		want     string
	}{
		{
			name:    "not a list",
			budgets: "name: PreemptionBasicBudgets\n",
			want:    "budgets.yaml: want a list of test cases, got a mapping",
		},
		{
			name:    "not YAML",
			budgets: "- name: [\n",
			want:    "budgets.yaml: error converting YAML to JSON",
		},
		{
			name:    "test case without a name",
			budgets: "- workloadTemplate: [{opcode: sleep}]\n  workloads: [{name: a}]\n",
			want:    "budgets.yaml: test case 0: no name",
		},
		{
			name:    "no ops",
			budgets: "- name: X\n  workloads: [{name: a}]\n",
			want:    `budgets.yaml: test case "X": workloadTemplate must be a non-empty list of ops`,
		},
		{
			name:    "workload without a name",
			budgets: "- name: X\n  workloadTemplate: [{opcode: sleep}]\n  workloads: [{params: {a: 1}}]\n",
			want:    `budgets.yaml: test case "X": workload 0: no name`,
		},
		{
			name:    "missing template",
			budgets: "- name: X\n  workloadTemplate: [{opcode: createPods, podTemplatePath: templates/gone.yaml}]\n  workloads: [{name: a}]\n",
			want:    `budgets.yaml: test case "X": op 0 (createPods): podTemplatePath:`,
		},
		{
			name:    "template path not a string",
			budgets: "- name: X\n  workloadTemplate: [{opcode: createPods, podTemplatePath: [a]}]\n  workloads: [{name: a}]\n",
			want:    `budgets.yaml: test case "X": op 0 (createPods): podTemplatePath must be a path, got a list`,
		},
		{
			name:    "name of an upstream test case",
			budgets: strings.Replace(budgetsFile, "PreemptionBasicBudgets", "PreemptionBasic", 1),
			want:    `budgets.yaml: test case "PreemptionBasic" has the name of an upstream test case`,
		},
		{
			name:     "upstream test case gone",
			upstream: strings.Replace(upstreamFile, "PreemptionBasic", "PreemptionRenamed", 1),
			want:     `performance-config.yaml: no test case "PreemptionBasic" (upstream renamed or removed it)`,
		},
		{
			name: "no scheduler configuration",
			edit: func(o *Options) { o.SchedulerConfig = "" },
			want: "no scheduler configuration",
		},
		{
			name: "kept workload gone",
			edit: func(o *Options) {
				o.UpstreamTestCases = append(o.UpstreamTestCases, "PreemptionPodGroupDisruptionMode")
				o.UpstreamWorkloads = map[string][]string{"PreemptionPodGroupDisruptionMode": {"1000Nodes_Renamed"}}
			},
			want: `performance-config.yaml: test case "PreemptionPodGroupDisruptionMode": no workload "1000Nodes_Renamed" (upstream renamed or removed it)`,
		},
		{
			name: "kept workload of a test case not taken",
			edit: func(o *Options) {
				o.UpstreamWorkloads = map[string][]string{"PreemptionPodGroupDisruptionMode": {"1000Nodes_1000Candidates_DisruptionAll"}}
			},
			want: `UpstreamWorkloads names "PreemptionPodGroupDisruptionMode", which is not among UpstreamTestCases`,
		},
		{
			name:     "kept workload without a size",
			upstream: strings.Replace(upstreamFile, "{initNodes: 2, lowPriorityGroups: 2", "{lowPriorityGroups: 2", 1),
			edit: func(o *Options) {
				o.UpstreamTestCases = append(o.UpstreamTestCases, "PreemptionPodGroupDisruptionMode")
				o.UpstreamWorkloads = map[string][]string{"PreemptionPodGroupDisruptionMode": {"FastTest_NoPodGroup"}}
			},
			want: `test case "PreemptionPodGroupDisruptionMode": workload "FastTest_NoPodGroup": params.initNodes is not a positive integer`,
		},
		{
			name: "bad size",
			edit: func(o *Options) { o.Nodes = []int{0} },
			want: "node count 0 is not positive",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			upstream, budgets := upstreamFile, budgetsFile
			if tc.upstream != "" {
				upstream = tc.upstream
			}
			if tc.budgets != "" {
				budgets = tc.budgets
			}
			o := tree(t, upstream, budgets)
			if tc.edit != nil {
				tc.edit(&o)
			}
			_, err := Generate(o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Generate: got error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
