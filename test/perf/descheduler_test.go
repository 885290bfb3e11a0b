//go:build perf

package perf

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	kruiseclientset "github.com/openkruise/kruise-api/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/metrics/legacyregistry"
	"sigs.k8s.io/descheduler/cmd/descheduler/app/options"
	deschedulermetrics "sigs.k8s.io/descheduler/metrics"
	"sigs.k8s.io/descheduler/pkg/descheduler"
	"sigs.k8s.io/descheduler/pkg/features"
	"sigs.k8s.io/descheduler/pkg/framework/pluginregistry"

	"github.com/budgetguard/budgetguard/internal/deschedulerpolicy"
	"github.com/budgetguard/budgetguard/internal/testenv"
	"github.com/budgetguard/budgetguard/plugins/budgetevictor"
	"github.com/budgetguard/budgetguard/sandbox"
)

var (
	deschedNodes   = flag.Int("desched-nodes", 100, "nodes of BenchmarkDeschedulingLoop's cluster (the issue's size is 1000)")
	deschedPods    = flag.Int("desched-pods", 3000, "pods of BenchmarkDeschedulingLoop's cluster, in applications of 10 (the issue's size is 30000)")
	deschedBudgets = flag.Int("desched-budgets", 300, "PDBs of BenchmarkDeschedulingLoop's cluster, one per application, at most pods/10 (the issue's size is 3000)")
	deschedOrder   = flag.String("desched-evictor-order", "DefaultEvictor,BudgetAwareEvictor",
		"the evictors in the order the first pair runs them; each further pair reverses the order of the one before")
	deschedPairs = flag.Int("desched-pairs", 1,
		"pairs of loops (one with each evictor) on the one cluster of this process; with more than 1 the sub-benchmarks are pair=<i>/evictor=<name>")
)

const deschedNamespace = "loop"

// deschedPolicy is one profile with RemoveDuplicates and LowNodeUtilization
// (by pod count: the hot nodes hold 45% of their 110 pods, the cold ones 9%),
// with DefaultEvictor alone or with BudgetAwareEvictor after it. No
// per-node or per-namespace limit: every eviction the strategies want is
// asked for.
func deschedPolicy(budgetAware bool) string {
	evictors := "[DefaultEvictor]"
	extra := ""
	if budgetAware {
		evictors = "[DefaultEvictor, BudgetAwareEvictor]"
		extra = "  - name: BudgetAwareEvictor\n    args:\n      cacheSyncTimeoutSeconds: 120\n"
	}
	return fmt.Sprintf(`apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: loop
  pluginConfig:
  - name: DefaultEvictor
%s  - name: RemoveDuplicates
  - name: LowNodeUtilization
    args:
      thresholds:
        pods: 20
      targetThresholds:
        pods: 30
  plugins:
    filter:
      enabled: %s
    preevictionfilter:
      enabled: %s
    balance:
      enabled: [RemoveDuplicates, LowNodeUtilization]
`, extra, evictors, evictors)
}

// loopCluster is the cluster every repetition of BenchmarkDeschedulingLoop
// runs on: built once per process, and put back after each loop.
type loopCluster struct {
	cp *sandbox.ControlPlane
	// pods are the pods as created, by name, to recreate the evicted ones.
	pods    map[string]*corev1.Pod
	allowed map[string]int32 // PDB name -> disruptionsAllowed when whole
	built   time.Duration
}

var (
	loopOnce sync.Once
	loop     *loopCluster
	loopErr  error
)

// stopLoopCluster stops the control plane, if one was started (TestMain).
func stopLoopCluster() {
	if loop != nil {
		if err := loop.cp.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stop the descheduling loop's control plane: %v\n", err)
		}
	}
}

// BenchmarkDeschedulingLoop runs one descheduling loop of the real
// descheduler (v0.36.0's RunDeschedulerStrategies, as
// test/integration's runDescheduler does) over the sandbox's control plane,
// with DefaultEvictor alone (evictor=DefaultEvictor) and with
// BudgetAwareEvictor after it (evictor=BudgetAwareEvictor), and reports:
// loop-s, the descheduler's own loop duration metric; run-s, the whole call
// (informer start and sync included); evictions, the Eviction API's 201s;
// refused-429, its 429s. After each loop the evicted pods are recreated and
// the benchmark waits until every pod is Ready and every PDB whole again.
//
// It runs -desched-pairs pairs of loops on the one cluster, the first in the
// order -desched-evictor-order gives, each further one in the reverse order
// of the one before, so that neither evictor always runs on a cluster the
// other has just put back. Before each pair it prints "evictor order: A, B"
// (a line benchstat passes over; hack/perfreport reads it).
func BenchmarkDeschedulingLoop(b *testing.B) {
	order, err := evictorOrder(*deschedOrder)
	if err != nil {
		b.Fatal(err)
	}
	if *deschedPairs < 1 {
		b.Fatalf("-desched-pairs=%d: want at least 1", *deschedPairs)
	}
	loopOnce.Do(func() { loop, loopErr = buildLoopCluster(*deschedNodes, *deschedPods, *deschedBudgets) })
	if loopErr != nil {
		b.Fatal(loopErr)
	}
	b.Logf("cluster of %d nodes, %d pods, %d PDBs built in %s", *deschedNodes, len(loop.pods), len(loop.allowed), loop.built.Round(time.Second))
	for pair := 1; pair <= *deschedPairs; pair++ {
		fmt.Printf("evictor order: %s\n", strings.Join(order, ", "))
		if *deschedPairs == 1 {
			runLoops(b, order)
		} else {
			b.Run(fmt.Sprintf("pair=%d", pair), func(b *testing.B) { runLoops(b, order) })
		}
		slices.Reverse(order)
	}
}

// evictorOrder checks that order names DefaultEvictor and BudgetAwareEvictor
// once each, and returns them in its order.
func evictorOrder(order string) ([]string, error) {
	var out []string
	for _, name := range strings.Split(order, ",") {
		name = strings.TrimSpace(name)
		if name != "DefaultEvictor" && name != budgetevictor.PluginName {
			return nil, fmt.Errorf("-desched-evictor-order=%q: %q is neither DefaultEvictor nor %s", order, name, budgetevictor.PluginName)
		}
		if slices.Contains(out, name) {
			return nil, fmt.Errorf("-desched-evictor-order=%q names %s twice", order, name)
		}
		out = append(out, name)
	}
	if len(out) != 2 {
		return nil, fmt.Errorf("-desched-evictor-order=%q: want DefaultEvictor and %s, once each", order, budgetevictor.PluginName)
	}
	return out, nil
}

// runLoops runs one loop with each evictor, in order, as sub-benchmarks
// evictor=<name>.
func runLoops(b *testing.B, order []string) {
	for _, name := range order {
		budgetAware := name == budgetevictor.PluginName
		b.Run("evictor="+name, func(b *testing.B) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Minute)
			defer cancel()
			res, err := loop.run(ctx, deschedPolicy(budgetAware), b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			// Logged before the cluster is restored, so that a restore
			// that fails does not lose the loop's figures.
			b.Logf("loop %.1fs, run %.1fs, %d evictions, %d refused with 429", res.loop.Seconds(), res.run.Seconds(),
				res.counter.Count(http.StatusCreated), res.counter.Count(http.StatusTooManyRequests))
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(res.loop.Seconds(), "loop-s")
			b.ReportMetric(res.run.Seconds(), "run-s")
			b.ReportMetric(float64(res.counter.Count(http.StatusCreated)), "evictions")
			b.ReportMetric(float64(res.counter.Count(http.StatusTooManyRequests)), "refused-429")
			// The one cluster build of this process, which every
			// repetition in it shares.
			b.ReportMetric(loop.built.Seconds(), "cluster-build-s")
			if err := loop.restore(ctx, res.counter.Evicted()); err != nil {
				b.Fatal(err)
			}
		})
	}
}

func buildLoopCluster(nodes, pods, budgets int) (*loopCluster, error) {
	if nodes < 2 || pods < nodes || budgets > pods/10 || budgets < 0 {
		return nil, fmt.Errorf("-desched-nodes=%d -desched-pods=%d -desched-budgets=%d: want at least 2 nodes, pods >= nodes, and budgets <= pods/10", nodes, pods, budgets)
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	opts := sandbox.DefaultOptions()
	opts.NodeCapacity = corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	cp, err := sandbox.Start(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("start the sandbox control plane: %w", err)
	}
	c := &loopCluster{cp: cp, pods: map[string]*corev1.Pod{}, allowed: map[string]int32{}}
	loop = c // stopped by TestMain from here on
	client := cp.Client

	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: deschedNamespace}}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	names := make([]string, nodes)
	for i := range names {
		names[i] = fmt.Sprintf("node-%04d", i)
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: names[i], Labels: map[string]string{"kubernetes.io/hostname": names[i]}}}
		if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
	}
	// Half the nodes are hot and hold 5/6 of the pods, in round robin; an
	// application's pods are placed one after another, so consecutive
	// pods of an application sometimes share a node: RemoveDuplicates has
	// work too.
	hot := nodes / 2
	for i := range pods {
		app := i / 10
		var node string
		if i%6 != 5 {
			node = names[(i/2)%hot]
		} else {
			node = names[hot+(i/6)%(nodes-hot)]
		}
		c.pods[fmt.Sprintf("app-%05d-%d", app, i%10)] = loopPod(fmt.Sprintf("app-%05d-%d", app, i%10), app, node)
	}
	if err := createAll(ctx, client, c.pods); err != nil {
		return nil, err
	}
	// Every pod Ready before the first PDB exists: a PDB created earlier
	// has its status written again for each of its pods that turns Ready
	// after it (30,000 writes at 1,000 nodes instead of 3,000).
	if err := c.waitWhole(ctx); err != nil {
		return nil, err
	}
	// Budgets: application a (a < budgets) keeps 10-(a%4) of its 10 pods,
	// so 0 to 3 disruptions are allowed.
	for a := range budgets {
		name := fmt.Sprintf("app-%05d", a)
		pdb := &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: deschedNamespace},
			Spec: policyv1.PodDisruptionBudgetSpec{
				MinAvailable: &intstr.IntOrString{IntVal: int32(10 - a%4)},
				Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			},
		}
		if _, err := client.PolicyV1().PodDisruptionBudgets(deschedNamespace).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
		c.allowed[name] = int32(a % 4)
	}
	if err := c.waitWhole(ctx); err != nil {
		return nil, err
	}
	c.built = time.Since(began)
	return c, nil
}

func loopPod(name string, app int, node string) *corev1.Pod {
	owner := fmt.Sprintf("app-%05d", app)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: deschedNamespace,
			Labels: map[string]string{"app": owner},
			// A ReplicaSet that does not exist: DefaultEvictor evicts only
			// pods with an owner, and RemoveDuplicates groups by owner. No
			// garbage collector runs in this sandbox.
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "ReplicaSet", Name: owner,
				UID: types.UID("00000000-0000-0000-0000-" + fmt.Sprintf("%012d", app)), Controller: ptrTrue(),
			}},
		},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.k8s.io/pause:3.10.1",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU:    resource.MustParse("100m"),
					corev1.ResourceMemory: resource.MustParse("100Mi"),
				}},
			}},
		},
	}
}

func ptrTrue() *bool { t := true; return &t }

// createAll creates pods with a few workers.
func createAll(ctx context.Context, client kubernetes.Interface, pods map[string]*corev1.Pod) error {
	work := make(chan *corev1.Pod)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pod := range work {
				if _, err := client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
					select {
					case errs <- fmt.Errorf("create pod %s: %w", pod.Name, err):
					default:
					}
				}
			}
		}()
	}
	for _, pod := range pods {
		work <- pod
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// waitWhole waits until every pod exists and is Ready, and every PDB's
// status is current and allows what it allows when whole, with no
// disrupted pods pending.
func (c *loopCluster) waitWhole(ctx context.Context) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, c.pollInterval(time.Second), 60*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := c.cp.Client.CoreV1().Pods(deschedNamespace).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		ready := 0
		for i := range pods.Items {
			if podReady(&pods.Items[i]) && pods.Items[i].DeletionTimestamp == nil {
				ready++
			}
		}
		if ready != len(c.pods) {
			last = fmt.Sprintf("%d of %d pods ready", ready, len(c.pods))
			return false, nil
		}
		pdbs, err := c.cp.Client.PolicyV1().PodDisruptionBudgets(deschedNamespace).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		whole := 0
		for _, p := range pdbs.Items {
			if p.Status.ObservedGeneration >= p.Generation && len(p.Status.DisruptedPods) == 0 &&
				p.Status.DisruptionsAllowed == c.allowed[p.Name] && p.Status.CurrentHealthy == 10 {
				whole++
			}
		}
		if whole != len(c.allowed) {
			last = fmt.Sprintf("%d of %d PDBs whole", whole, len(c.allowed))
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the cluster to be whole (%s): %w", last, err)
	}
	return nil
}

// pollInterval is base for every 3,000 pods: listing every pod of a large
// cluster takes the CPU the simulated kubelets need to finish deletions
// (at 30,000 pods and a 200 ms interval, evicted pods were still there
// after 5 minutes).
func (c *loopCluster) pollInterval(base time.Duration) time.Duration {
	return base * time.Duration(max(1, len(c.pods)/3000))
}

// restore recreates the evicted pods and waits until the cluster is whole.
func (c *loopCluster) restore(ctx context.Context, evicted []string) error {
	// An evicted pod is gone at once (grace period 0); wait for each to be
	// deleted before it is created again.
	err := wait.PollUntilContextTimeout(ctx, c.pollInterval(200*time.Millisecond), 30*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := c.cp.Client.CoreV1().Pods(deschedNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		present := map[string]bool{}
		for _, p := range pods.Items {
			present[p.Name] = true
		}
		for _, name := range evicted {
			if present[name] {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("evicted pods still there: %w", err)
	}
	again := map[string]*corev1.Pod{}
	for _, name := range evicted {
		again[name] = c.pods[name]
	}
	if err := createAll(ctx, c.cp.Client, again); err != nil {
		return err
	}
	return c.waitWhole(ctx)
}

type loopResult struct {
	loop, run time.Duration
	counter   *testenv.EvictionCounter
}

var setupDeschedulerPlugins sync.Once

// run runs one descheduling loop with policy, and returns its durations and
// the Eviction API's answers.
func (c *loopCluster) run(ctx context.Context, policy, dir string) (loopResult, error) {
	cp := c.cp
	setupDeschedulerPlugins.Do(func() {
		deschedulerpolicy.SetupPlugins(budgetevictor.Options{
			Kruise: func() (kruiseclientset.Interface, discovery.DiscoveryInterface, error) {
				return cp.KruiseClient, cp.Client.Discovery(), nil
			},
			Workloads: func() (kubernetes.Interface, error) { return cp.Client, nil },
		})
		deschedulermetrics.Register()
	})
	counter := testenv.NewEvictionCounter(0)
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = 1000, 1000
	cfg.Wrap(counter.Wrap)
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return loopResult{}, err
	}
	path := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(path, []byte(policy), 0o600); err != nil {
		return loopResult{}, err
	}
	p, err := deschedulerpolicy.LoadPolicy(path, client, pluginregistry.PluginRegistry)
	if err != nil {
		return loopResult{}, fmt.Errorf("load policy: %w", err)
	}
	rs, err := options.NewDeschedulerServer()
	if err != nil {
		return loopResult{}, err
	}
	rs.Client, rs.EventClient = client, client
	rs.DefaultFeatureGates = features.DefaultMutableFeatureGate
	rs.DeschedulingInterval = 0
	before, err := loopSeconds()
	if err != nil {
		return loopResult{}, err
	}
	began := time.Now()
	if err := descheduler.RunDeschedulerStrategies(ctx, rs, p, "policy/v1"); err != nil {
		return loopResult{}, fmt.Errorf("descheduler: %w", err)
	}
	ran := time.Since(began)
	after, err := loopSeconds()
	if err != nil {
		return loopResult{}, err
	}
	return loopResult{loop: time.Duration((after - before) * float64(time.Second)), run: ran, counter: counter}, nil
}

// loopSeconds is the sum of the descheduler's loop duration histogram.
func loopSeconds() (float64, error) {
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return 0, err
	}
	for _, f := range families {
		if f.GetName() != "descheduler_loop_duration_seconds" {
			continue
		}
		var sum float64
		for _, m := range f.GetMetric() {
			sum += m.GetHistogram().GetSampleSum()
		}
		return sum, nil
	}
	return 0, nil
}
