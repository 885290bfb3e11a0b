//go:build perf

package perf

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"testing"

	kruiseclient "github.com/openkruise/kruise-api/client/clientset/versioned"
	apiextensionsclientset "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	fwk "k8s.io/kube-scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	schedperf "k8s.io/kubernetes/test/integration/scheduler_perf"
	"k8s.io/kubernetes/test/utils/client-go/ktesting"

	"github.com/budgetguard/budgetguard/internal/perfconfig"
	"github.com/budgetguard/budgetguard/plugins/budgetpreemption"
	"github.com/budgetguard/budgetguard/sandbox"
)

var (
	upstreamDir = flag.String("scheduler-perf-dir", "",
		"directory of k8s.io/kubernetes/test/integration/scheduler_perf (default: the module cache's, from go list)")
	perfNodes = flag.String("perf-nodes", "100,500,1000",
		"sizes (node counts) of the workloads added to upstream's preemption test cases")
	perfPluginOrder = flag.String("perf-plugin-order", "DefaultPreemption,BudgetAwarePreemption",
		"the plugins in the order this process runs them (hack/perf.sh alternates it between repetitions)")
)

// upstreamTestCases are taken unchanged from upstream's
// default_preemption/performance-config.yaml (misc/ until Kubernetes 1.37).
// PreemptionBasic and PreemptionAsync get a workload per -perf-nodes size;
// 1.37's gang test case has parameters of its own, and runs the workloads
// upstreamWorkloads names as upstream wrote them (1,000 nodes each).
var (
	upstreamTestCases = []string{"PreemptionBasic", "PreemptionAsync", "PreemptionPodGroupDisruptionMode"}
	upstreamWorkloads = map[string][]string{
		"PreemptionPodGroupDisruptionMode": {
			"1000Nodes_1000Candidates_NoPodGroup",
			"1000Nodes_1000Candidates_DisruptionSingle",
			"1000Nodes_1000Candidates_DisruptionAll",
		},
	}
)

// budgetsNamespace is where budgets.yaml puts the budgeted pods and budgets.
const budgetsNamespace = "budgets"

// budgetsLabel marks the workloads of budgets.yaml; budgetClasses is the
// number of budgets per budgetsPerClass (pdb-loose, pdb-tight, pdb-none,
// pub). gangsLabel marks its gang workloads, which have gangBudgetClasses
// (pdb-gang-none, pdb-gang-tight, pdb-gang-loose).
const (
	budgetsLabel      = "budgets"
	budgetClasses     = 4
	gangsLabel        = "gangs"
	gangBudgetClasses = 3
)

type pluginUnderTest struct {
	name            string
	schedulerConfig string
	registry        frameworkruntime.Registry
}

var pluginsUnderTest = []pluginUnderTest{
	{name: "DefaultPreemption", schedulerConfig: "config/scheduler-default.yaml"},
	{
		name:            budgetpreemption.Name,
		schedulerConfig: "config/scheduler-budgetguard.yaml",
		registry:        frameworkruntime.Registry{budgetpreemption.Name: withPUBCRD(budgetpreemption.New)},
	},
}

// BenchmarkPerfScheduling runs upstream's preemption test cases and
// budgets.yaml's under each plugin, one after the other in each repetition
// in the order -perf-plugin-order gives (printed first, as "plugin order:
// A, B", a line benchstat ignores), as sub-benchmarks named plugin=<name>,
// so that benchstat -col /plugin compares them. Select sizes with
// -perf-scheduling-label-filter=budgetguard,nodes-100.
//
// Besides scheduler_perf's figures (SchedulingThroughput, the PostFilter
// extension point's latency), each workload reports heap-MiB, the live heap
// after a forced GC at the end of the workload (the API server and the
// scheduler share the process: compare plugins, not absolute numbers), and
// the budgeted workloads report victims and overbudget-victims; measured-pods
// is the number of pods of the measured phase; postfilter-calls and its
// companions count PostFilter's calls by status (reportPostFilterCalls);
// bound-pods/s is the measured phase's throughput from the pods' own bind
// times (bindClock), which scheduler_perf's 1-second poll does not resolve.
func BenchmarkPerfScheduling(b *testing.B) {
	plugins, err := pluginOrder(*perfPluginOrder)
	if err != nil {
		b.Fatal(err)
	}
	names := make([]string, len(plugins))
	for i, p := range plugins {
		names[i] = p.name
	}
	// Not a benchmark line nor a "key: value" configuration line (its key
	// has a space), so benchstat passes over it; hack/perfreport reads it.
	fmt.Printf("plugin order: %s\n", strings.Join(names, ", "))
	upstream := upstreamPreemption(b)
	var nodes []int
	for _, s := range strings.Split(*perfNodes, ",") {
		var n int
		if _, err := fmt.Sscan(strings.TrimSpace(s), &n); err != nil || n <= 0 {
			b.Fatalf("-perf-nodes=%q: %q is not a positive node count", *perfNodes, s)
		}
		nodes = append(nodes, n)
	}
	for _, p := range plugins {
		b.Run("plugin="+p.name, func(b *testing.B) {
			data, err := perfconfig.Generate(perfconfig.Options{
				UpstreamConfig:    filepath.Join(upstream, "performance-config.yaml"),
				UpstreamTestCases: upstreamTestCases,
				UpstreamWorkloads: upstreamWorkloads,
				BudgetsConfig:     "config/budgets.yaml",
				SchedulerConfig:   p.schedulerConfig,
				Nodes:             nodes,
				Label:             "budgetguard",
			})
			if err != nil {
				b.Fatal(err)
			}
			path := filepath.Join(b.TempDir(), "performance-config.yaml")
			if err := os.WriteFile(path, data, 0o644); err != nil {
				b.Fatal(err)
			}
			measured, err := measuredNamespaces(data)
			if err != nil {
				b.Fatal(err)
			}
			var workload *schedperf.Workload
			schedperf.RunBenchmarkPerfScheduling(b, path, "budgetguard", p.registry,
				schedperf.WithPreRunFn(func(_ ktesting.TContext, w *schedperf.Workload) (func(), error) {
					workload = w
					return nil, nil
				}),
				schedperf.WithPrepareFn(func(tCtx ktesting.TContext) error {
					return prepare(tCtx, workload, measured)
				}))
		})
	}
}

// pluginOrder returns pluginsUnderTest in the order of order, a
// comma-separated list naming each of them once.
func pluginOrder(order string) ([]pluginUnderTest, error) {
	var out []pluginUnderTest
	for _, name := range strings.Split(order, ",") {
		name = strings.TrimSpace(name)
		i := slices.IndexFunc(pluginsUnderTest, func(p pluginUnderTest) bool { return p.name == name })
		if i < 0 {
			return nil, fmt.Errorf("-perf-plugin-order=%q: %q is not a plugin under test", order, name)
		}
		if slices.ContainsFunc(out, func(p pluginUnderTest) bool { return p.name == name }) {
			return nil, fmt.Errorf("-perf-plugin-order=%q names %s twice", order, name)
		}
		out = append(out, pluginsUnderTest[i])
	}
	if len(out) != len(pluginsUnderTest) {
		return nil, fmt.Errorf("-perf-plugin-order=%q: want each of the %d plugins under test once", order, len(pluginsUnderTest))
	}
	return out, nil
}

// prepare runs once the workload's API server and scheduler are up: it
// serves the PodUnavailableBudget API (for both plugins, so that they see
// the same cluster), starts the bind clock on the workload's measured
// namespace (measured maps test cases to it), starts the stand-in for a
// budgeted workload, and arranges the heap figure.
func prepare(tCtx ktesting.TContext, w *schedperf.Workload, measured map[string]string) error {
	if w == nil {
		return errors.New("scheduler_perf called the prepare hook before the pre-run hook")
	}
	cfg := tCtx.RESTConfig()
	if err := installPUBCRD(tCtx, cfg); err != nil {
		return err
	}
	b, ok := tCtx.TB().(*testing.B)
	if !ok {
		return fmt.Errorf("test/perf runs as a benchmark, not as %T", tCtx.TB())
	}
	// hack/perf.sh divides it by SchedulingDuration for pods/s, which exists
	// when the measured phase is shorter than SchedulingThroughput's 1 s
	// sample, as it is for some workloads at 100 nodes.
	measuredPods, err := w.GetParam("measurePods")
	if err != nil {
		return fmt.Errorf("workload %s: %w", w.Name, err)
	}
	// The sub-benchmark is BenchmarkPerfScheduling/plugin=<name>/<test
	// case>/<workload>.
	if parts := strings.SplitN(b.Name(), "/", 4); len(parts) == 4 {
		if ns, ok := measured[parts[2]]; ok {
			clock, err := startBindClock(tCtx, tCtx.Client(), ns)
			if err != nil {
				return err
			}
			b.Cleanup(func() { clock.report(b, measuredPods) })
		} else {
			b.Logf("bind clock: no measured createPods op found for test case %q; no bound-pods/s", parts[2])
		}
	}
	b.Cleanup(func() {
		b.ReportMetric(float64(measuredPods), "measured-pods")
		goruntime.GC()
		var ms goruntime.MemStats
		goruntime.ReadMemStats(&ms)
		b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "heap-MiB")
		reportPostFilterCalls(b)
	})
	if !slices.Contains(w.Labels, budgetsLabel) {
		return nil
	}
	perClass, err := w.GetParam("budgetsPerClass")
	if err != nil {
		return fmt.Errorf("workload %s is labelled %q but: %w", w.Name, budgetsLabel, err)
	}
	classes := budgetClasses
	if slices.Contains(w.Labels, gangsLabel) {
		classes = gangBudgetClasses
	}
	// scheduler_perf's config asks for protobuf, which custom resources
	// do not speak.
	jsonCfg := rest.CopyConfig(cfg)
	jsonCfg.ContentType = "application/json"
	kc, err := kruiseclient.NewForConfig(jsonCfg)
	if err != nil {
		return err
	}
	s, err := startStandin(tCtx, tCtx.Client(), kc, budgetsNamespace)
	if err != nil {
		return err
	}
	b.Cleanup(func() {
		s.stop()
		s.report(b, perClass*classes)
	})
	return nil
}

// withPUBCRD makes the PodUnavailableBudget API served before the plugin's
// budget cache starts, as in a cluster where OpenKruise is installed, so
// that the cache watches PUBs from the start instead of discovering them at
// its next 30-second check.
func withPUBCRD(factory frameworkruntime.PluginFactory) frameworkruntime.PluginFactory {
	return func(ctx context.Context, obj runtime.Object, fh fwk.Handle) (fwk.Plugin, error) {
		if err := installPUBCRD(ctx, fh.KubeConfig()); err != nil {
			return nil, err
		}
		return factory(ctx, obj, fh)
	}
}

func installPUBCRD(ctx context.Context, cfg *rest.Config) error {
	ext, err := apiextensionsclientset.NewForConfig(cfg)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	return sandbox.InstallPUBCRD(ctx, ext, client.Discovery())
}

// upstreamPreemption is scheduler_perf's default_preemption/ directory:
// under -scheduler-perf-dir, or the module cache's copy of the
// k8s.io/kubernetes that go.mod requires.
func upstreamPreemption(b *testing.B) string {
	dir := *upstreamDir
	if dir == "" {
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/kubernetes").Output()
		if err != nil {
			b.Fatalf("finding k8s.io/kubernetes with go list (or pass -scheduler-perf-dir): %v", err)
		}
		dir = filepath.Join(strings.TrimSpace(string(out)), "test", "integration", "scheduler_perf")
	}
	preemption := filepath.Join(dir, "default_preemption")
	if _, err := os.Stat(filepath.Join(preemption, "performance-config.yaml")); err != nil {
		b.Fatalf("upstream scheduler_perf: %v", err)
	}
	return preemption
}
