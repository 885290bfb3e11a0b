package integration

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	kruiseclientset "github.com/openkruise/kruise-api/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/metrics/testutil"
	"sigs.k8s.io/descheduler/cmd/descheduler/app/options"
	deschedulermetrics "sigs.k8s.io/descheduler/metrics"
	"sigs.k8s.io/descheduler/pkg/api"
	"sigs.k8s.io/descheduler/pkg/descheduler"
	"sigs.k8s.io/descheduler/pkg/features"
	"sigs.k8s.io/descheduler/pkg/framework/pluginregistry"

	"github.com/budgetguard/budgetguard/internal/deschedulerpolicy"
	"github.com/budgetguard/budgetguard/internal/faults"
	"github.com/budgetguard/budgetguard/internal/testenv"
	"github.com/budgetguard/budgetguard/internal/testobj"
	"github.com/budgetguard/budgetguard/plugins/budget"
	"github.com/budgetguard/budgetguard/plugins/budgetevictor"
	"github.com/budgetguard/budgetguard/sandbox"
)

// evictionCounter counts what the Eviction API answered the descheduler.
type evictionCounter = testenv.EvictionCounter

var setupRegistry sync.Once

// clientFaults, while set, is the fault injector every client the
// descheduler helpers build goes through (the churn's fault mode).
var clientFaults atomic.Pointer[faults.Injector]

// runDescheduler runs one loop of the real descheduler (its
// RunDeschedulerStrategies, as its Run does after building clients) with
// policy, decoded by the budgetguard binary's own LoadPolicy, against cp.
// It returns what the Eviction API answered.
func runDescheduler(t *testing.T, policy string, dryRun bool) *evictionCounter {
	t.Helper()
	return runDeschedulerUntil(t, policy, dryRun, nil)
}

// runDeschedulerUntil is runDescheduler, but when until is set it runs
// loops every 2 s until until returns true (at most 30 s), and returns
// after the loop that runs then. The
// dry-run needs it: its fake cluster is filled from the real informers
// asynchronously, and the first loop may see it still empty.
func runDeschedulerUntil(t *testing.T, policy string, dryRun bool, until func(*evictionCounter) bool) *evictionCounter {
	t.Helper()
	return runDeschedulerWith(t, policy, dryRun, until, 0)
}

// runDeschedulerWith is runDeschedulerUntil whose first failFirst eviction
// requests fail with a 500 before they reach the API server.
func runDeschedulerWith(t *testing.T, policy string, dryRun bool, until func(*evictionCounter) bool, failFirst int) *evictionCounter {
	t.Helper()
	rs, p, counter := deschedulerServer(t, policy, deschedulerUserAgent, failFirst)
	rs.DryRun = dryRun
	ctx, cancel := context.WithCancel(testenv.Context(t))
	defer cancel()
	if until != nil {
		rs.DeschedulingInterval = 2 * time.Second
		go func() {
			defer cancel()
			_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
				return until(counter), nil
			})
		}()
	}
	if err := descheduler.RunDeschedulerStrategies(ctx, rs, p, "policy/v1"); err != nil {
		t.Fatalf("descheduler: %v", err)
	}
	t.Logf("descheduler (dryRun=%v): Eviction API answers by status: %s, evicted %v", dryRun, counter, counter.Evicted())
	return counter
}

// deschedulerUserAgent is the user agent of the descheduler's requests.
const deschedulerUserAgent = "integration-descheduler"

// deschedulerServer builds the descheduler's server options and policy
// (decoded by the budgetguard binary's own LoadPolicy) for a run against
// cp with a client of userAgent, whose first failFirst eviction requests
// fail with a 500 before they reach the API server, and the counter of the
// Eviction API's answers. DeschedulingInterval is 0: one loop.
func deschedulerServer(t *testing.T, policy, userAgent string, failFirst int) (*options.DeschedulerServer, *api.DeschedulerPolicy, *evictionCounter) {
	t.Helper()
	setupRegistry.Do(func() {
		deschedulerpolicy.SetupPlugins(budgetevictor.Options{
			Kruise: func() (kruiseclientset.Interface, discovery.DiscoveryInterface, error) {
				if inj := clientFaults.Load(); inj != nil {
					// The churn's fault mode: the evictor's Kruise
					// client and discovery go through the injector too.
					cfg := inj.WrapConfig(rest.AddUserAgent(rest.CopyConfig(cp.Config), deschedulerUserAgent))
					kc, err := kruiseclientset.NewForConfig(cfg)
					if err != nil {
						return nil, nil, err
					}
					disc, err := discovery.NewDiscoveryClientForConfig(cfg)
					if err != nil {
						return nil, nil, err
					}
					return kc, disc, nil
				}
				return cp.KruiseClient, cp.Client.Discovery(), nil
			},
			PUBv1beta1: func() (rest.Interface, error) {
				cfg := rest.AddUserAgent(rest.CopyConfig(cp.Config), deschedulerUserAgent)
				if inj := clientFaults.Load(); inj != nil {
					cfg = inj.WrapConfig(cfg)
				}
				return budget.NewPUBv1beta1Client(cfg)
			},
			Workloads: func() (kubernetes.Interface, error) { return cp.Client, nil },
		})
	})
	counter, client := countingClient(t, userAgent, 1000, failFirst)
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := deschedulerpolicy.LoadPolicy(path, client, pluginregistry.PluginRegistry)
	if err != nil {
		t.Fatalf("load policy: %v", err)
	}
	rs, err := options.NewDeschedulerServer()
	if err != nil {
		t.Fatal(err)
	}
	rs.Client, rs.EventClient = client, client
	rs.DefaultFeatureGates = features.DefaultMutableFeatureGate
	rs.DeschedulingInterval = 0
	deschedulerMetrics.Do(deschedulermetrics.Register)
	return rs, p, counter
}

var deschedulerMetrics sync.Once

// countingClient returns a client of cp with userAgent and qps (and as
// much burst), and the counter of what the Eviction API answered it.
func countingClient(t *testing.T, userAgent string, qps float32, failFirst int) (*evictionCounter, kubernetes.Interface) {
	t.Helper()
	counter := testenv.NewEvictionCounter(failFirst)
	cfg := rest.AddUserAgent(rest.CopyConfig(cp.Config), userAgent)
	cfg.QPS, cfg.Burst = qps, int(qps)
	cfg.Wrap(counter.Wrap)
	if inj := clientFaults.Load(); inj != nil {
		cfg = inj.WrapConfig(cfg)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return counter, client
}

// evictorNeverReadyReplacements makes the pods the ReplicaSet creates from now on
// Running but never Ready; its existing pods are not touched.
func evictorNeverReadyReplacements(t *testing.T, ns, name string) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{%q:%q}}}}}`, sandbox.ReadinessAnnotation, sandbox.ReadinessNever)
	if _, err := cp.Client.AppsV1().ReplicaSets(ns).Patch(testenv.Context(t), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patch ReplicaSet %s/%s: %v", ns, name, err)
	}
}

// highUtilizationPolicy is a policy whose only strategy is
// HighNodeUtilization (CPU threshold 20%) on the nodes nodeSelector selects,
// evicting in ns only; budgetAware adds BudgetAwareEvictor.
func highUtilizationPolicy(ns, nodeSelector string, budgetAware bool) string {
	return testobj.DeschedulerPolicy{
		NodeSelector: nodeSelector, Namespace: ns, BudgetAware: budgetAware,
		Strategy: "HighNodeUtilization", StrategyArgs: "{thresholds: {cpu: 20}}",
	}.YAML()
}

// deschedulerEvicted is what the descheduler's own pods_evicted_total metric
// counts as successful evictions in ns on node by strategy, in dry-run or
// not: in dry-run it is the descheduler's prediction.
func deschedulerEvicted(t *testing.T, strategy, ns, node string) int {
	t.Helper()
	v, err := testutil.GetCounterMetricValue(deschedulermetrics.PodsEvictedTotal.With(map[string]string{
		"result": "success", "strategy": strategy, "profile": "test", "namespace": ns, "node": node,
	}))
	if err != nil {
		t.Fatal(err)
	}
	return int(v)
}

// evictorNodes creates n nodes of 4 CPUs, 110 pods and 16Gi, labelled for
// ns, so that a policy's nodeSelector keeps the descheduler to this
// test's nodes, and returns them with that node selector.
func evictorNodes(t *testing.T, ns string, n int) ([]*corev1.Node, string) {
	t.Helper()
	nodes := make([]*corev1.Node, n)
	for i := range nodes {
		nodes[i] = env.CreateNode(t, ns, testobj.MakeNode().Label("budgetguard.io/test", ns).Resources(corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceMemory: resource.MustParse("16Gi"),
		}))
	}
	return nodes, "budgetguard.io/test=" + ns
}

// expectAnswers checks how many of the descheduler's eviction requests the
// API server answered 201 (created) and 429 (tooMany), and how many reached
// it in all (total; not checked when negative).
func expectAnswers(t *testing.T, got *evictionCounter, created, tooMany, total int) {
	t.Helper()
	if n := got.Count(http.StatusCreated); n != created {
		t.Errorf("evictions that succeeded = %d, want %d (answers: %s)", n, created, got)
	}
	if n := got.Count(http.StatusTooManyRequests); n != tooMany {
		t.Errorf("429s from the API server = %d, want %d (answers: %s)", n, tooMany, got)
	}
	if n := got.Total(); total >= 0 && n != total {
		t.Errorf("eviction requests that reached the API server = %d, want %d (answers: %s)", n, total, got)
	}
}

// dryRunThenRealRun runs policy in the descheduler's dry run, which must
// send no eviction request, then for real, and returns the evictions the
// dry run predicted and the real run performed on nodeA (the descheduler's
// own pods_evicted_total), and the real run's answers.
func dryRunThenRealRun(t *testing.T, policy, ns, nodeA string) (predicted, performed int, real *evictionCounter) {
	t.Helper()
	return dryRunThenRealRunLoops(t, policy, ns, nodeA, 0)
}

// dryRunThenRealRunLoops is dryRunThenRealRun where each run goes on for
// loops descheduling loops (0: the dry run until its first prediction, the
// real run one loop).
func dryRunThenRealRunLoops(t *testing.T, policy, ns, nodeA string, loops int) (predicted, performed int, real *evictionCounter) {
	t.Helper()
	const strategy = "HighNodeUtilization"
	before := deschedulerEvicted(t, strategy, ns, nodeA)
	until := func(*evictionCounter) bool { return deschedulerEvicted(t, strategy, ns, nodeA) > before }
	if loops > 0 {
		until = loopsDone(t, loops)
	}
	dry := runDeschedulerUntil(t, policy, true, until)
	predicted = deschedulerEvicted(t, strategy, ns, nodeA) - before
	if n := dry.Total(); n != 0 {
		t.Fatalf("dry-run sent %d eviction requests to the API server (answers: %s)", n, dry)
	}
	before = deschedulerEvicted(t, strategy, ns, nodeA)
	if loops > 0 {
		real = runDeschedulerUntil(t, policy, false, loopsDone(t, loops))
	} else {
		real = runDescheduler(t, policy, false)
	}
	performed = deschedulerEvicted(t, strategy, ns, nodeA) - before
	t.Logf("dry-run predicted %d evictions, the real run performed %d (API answers %s)", predicted, performed, real)
	return predicted, performed, real
}

// loopsDone returns a condition for runDeschedulerUntil that holds once
// the descheduler has completed n more loops, as its loop duration
// histogram counts them.
func loopsDone(t *testing.T, n int) func(*evictionCounter) bool {
	t.Helper()
	start := loopCount(t)
	return func(*evictionCounter) bool { return loopCount(t)-start >= uint64(n) }
}

func loopCount(t *testing.T) uint64 {
	t.Helper()
	n, err := testutil.GetHistogramMetricCount(deschedulermetrics.LoopDuration.With(map[string]string{}))
	if err != nil {
		t.Fatal(err)
	}
	return n
}
