//go:build perf

package perf

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/budgetguard/budgetguard/internal/perfconfig"
)

// The measured namespaces of the workload file test/perf generates: where
// the bind clock watches. scheduler_perf's default is namespace-<op index>.
func TestMeasuredNamespaces(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/kubernetes").Output()
	if err != nil {
		t.Fatalf("go list k8s.io/kubernetes: %v", err)
	}
	upstream := filepath.Join(strings.TrimSpace(string(out)), "test", "integration", "scheduler_perf", "default_preemption")
	data, err := perfconfig.Generate(perfconfig.Options{
		UpstreamConfig:    filepath.Join(upstream, "performance-config.yaml"),
		UpstreamTestCases: upstreamTestCases,
		UpstreamWorkloads: upstreamWorkloads,
		BudgetsConfig:     "config/budgets.yaml",
		SchedulerConfig:   "config/scheduler-default.yaml",
		Nodes:             []int{100},
		Label:             "budgetguard",
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := measuredNamespaces(data)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"PreemptionBasic":                  "namespace-2",
		"PreemptionAsync":                  "namespace-3", // after the churn op
		"PreemptionPodGroupDisruptionMode": "gang-preempt-0",
		"PreemptionBasicBudgets":           "namespace-7",
		"PreemptionPodGroupBudgets":        "preemptors",
	}
	for tc, ns := range want {
		if got[tc] != ns {
			t.Errorf("%s: measured namespace %q, want %q", tc, got[tc], ns)
		}
	}
	if _, err := measuredNamespaces([]byte("- name: [")); err == nil {
		t.Error("a malformed workload file gave no error")
	}
	// After a createPodSets op the indexes shift: no namespace rather than a wrong one.
	sets := []byte(`- name: Sets
  workloadTemplate:
  - opcode: createPodSets
    countParam: $n
  - opcode: createPods
    collectMetrics: true
`)
	if got, _ := measuredNamespaces(sets); len(got) != 0 {
		t.Errorf("after createPodSets: %v", got)
	}
}

func TestPluginOrder(t *testing.T) {
	ps, err := pluginOrder("BudgetAwarePreemption, DefaultPreemption")
	if err != nil || len(ps) != 2 || ps[0].name != "BudgetAwarePreemption" || ps[1].name != "DefaultPreemption" {
		t.Fatalf("pluginOrder: %v %v", ps, err)
	}
	for _, bad := range []string{"DefaultPreemption", "DefaultPreemption,DefaultPreemption", "DefaultPreemption,Other", ""} {
		if _, err := pluginOrder(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	es, err := evictorOrder("BudgetAwareEvictor,DefaultEvictor")
	if err != nil || strings.Join(es, ",") != "BudgetAwareEvictor,DefaultEvictor" {
		t.Fatalf("evictorOrder: %v %v", es, err)
	}
	for _, bad := range []string{"DefaultEvictor", "DefaultEvictor,DefaultEvictor", "DefaultEvictor,LowNodeUtilization,BudgetAwareEvictor"} {
		if _, err := evictorOrder(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
