package budgetevictor

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	kruiseclientset "github.com/openkruise/kruise-api/client/clientset/versioned"
	kruisefake "github.com/openkruise/kruise-api/client/clientset/versioned/fake"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	frameworkfake "sigs.k8s.io/descheduler/pkg/framework/fake"

	"github.com/budgetguard/budgetguard/plugins/budget"
)

// countingOptions are Options whose client functions count their calls: a
// call means a build started a budget cache with its own watches.
func countingOptions(kruiseCalls, workloadCalls *atomic.Int32, workloads kubernetes.Interface) Options {
	return Options{
		Kruise: func() (kruiseclientset.Interface, discovery.DiscoveryInterface, error) {
			kruiseCalls.Add(1)
			kc := kruisefake.NewSimpleClientset()
			return kc, kc.Discovery(), nil
		},
		Workloads: func() (kubernetes.Interface, error) {
			workloadCalls.Add(1)
			return workloads, nil
		},
		Ledger: budget.LedgerOptions{ReservationTTL: time.Millisecond, SettleDelay: time.Millisecond, MaxHold: time.Hour},
	}
}

// In a dry run the descheduler builds every profile twice: on the real
// client and factory, then on its fake cluster, and throws the first build
// away. The first build must start nothing: no budget cache on the real
// factory, no Kruise watch; otherwise a dry run runs two caches with
// duplicate watches.
func TestDryRunFirstBuildStartsNothing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var kruiseCalls, workloadCalls atomic.Int32
	_, real := realClientset(t)
	realObjects := fake.NewClientset(objects(webPDB("web", 1).Obj(), "a", "b", "c")...)
	opts := countingOptions(&kruiseCalls, &workloadCalls, realObjects)

	// The first build, on the real client (its factory lists from a fake
	// here; what matters is that nothing is started on it).
	realFactory := informers.NewSharedInformerFactory(realObjects, 0)
	first, err := NewBuilder(opts)(ctx, &BudgetAwareEvictorArgs{}, &frameworkfake.HandleImpl{ClientsetImpl: real, SharedInformerFactoryImpl: realFactory})
	if err != nil {
		t.Fatal(err)
	}
	// The dry run's build, on the fake cluster.
	dry := fake.NewClientset(objects(webPDB("web", 1).Obj(), "a", "b", "c")...)
	acceptEvictions(dry)
	dryFactory := informers.NewSharedInformerFactory(dry, 0)
	second, err := NewBuilder(opts)(ctx, &BudgetAwareEvictorArgs{}, &frameworkfake.HandleImpl{ClientsetImpl: dry, SharedInformerFactoryImpl: dryFactory})
	if err != nil {
		t.Fatal(err)
	}
	// The descheduler's init starts both factories, then runs its loops
	// with the second build only.
	dryFactory.Start(ctx.Done())
	realFactory.Start(ctx.Done())
	defer func() {
		cancel()
		realFactory.Shutdown()
		dryFactory.Shutdown()
	}()
	if !second.(*BudgetAwareEvictor).PreEvictionFilter(webPod("a").Obj()) {
		t.Fatal("the dry run's PreEvictionFilter refused a, which its budget allows")
	}
	if err := evict(ctx, dry, "a"); err != nil {
		t.Fatalf("dry run's eviction of a: %v", err)
	}

	if c := first.(*BudgetAwareEvictor).sh.cache; c != nil {
		t.Error("the discarded first build started a budget cache on the real factory")
	}
	if n := kruiseCalls.Load(); n != 1 {
		t.Errorf("the Kruise clients were asked for %d times, want 1: only the dry run's build starts a PUB watch", n)
	}
	if n := workloadCalls.Load(); n != 1 {
		t.Errorf("the real cluster's workloads were asked for %d times, want 1", n)
	}
}

// restore puts an evicted pod back into the fake cluster, as the dry run
// does after every loop.
func restore(t *testing.T, c *fake.Clientset, pod *v1.Pod) {
	t.Helper()
	if err := c.Tracker().Add(pod); err != nil {
		t.Fatalf("restore %s: %v", pod.Name, err)
	}
}

// touchPDB writes the budget's status again, unchanged but for the
// observed generation, as a mirrored update of the real budget would.
func touchPDB(t *testing.T, c *fake.Clientset, name string) {
	t.Helper()
	pdb, err := c.PolicyV1().PodDisruptionBudgets(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pdb.Status.ObservedGeneration++
	if _, err := c.PolicyV1().PodDisruptionBudgets(ns).UpdateStatus(context.Background(), pdb, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// A dry run predicts what a real run does loop after loop. The fake cluster
// never records an eviction in the budget's status and the descheduler
// restores the "evicted" pods after each loop, so without the dry run's
// holds a later loop would see the budget free again and the restored pod
// evictable, and predict the one allowed disruption once per loop. A real
// run's second loop finds the pod gone and the budget spent.
func TestDryRunPredictsLoopAfterLoop(t *testing.T) {
	var kruiseCalls, workloadCalls atomic.Int32
	dry := fake.NewClientset(objects(webPDB("web", 1).Obj(), "a", "b", "c")...)
	acceptEvictions(dry)
	p := pluginOn(t, nil, countingOptions(&kruiseCalls, &workloadCalls, fake.NewClientset()), dry, dry)
	ctx := context.Background()
	a := webPod("a").Obj()

	// Loop 1: a goes, b is refused.
	if err := evict(ctx, dry, "a"); err != nil {
		t.Fatalf("loop 1: eviction of a: %v", err)
	}
	if err := evict(ctx, dry, "b"); !apierrors.IsTooManyRequests(err) {
		t.Fatalf("loop 1: eviction of b: %v, want a 429: the budget allows 1", err)
	}
	// Between the loops: the pod comes back, and the budget's status is
	// written again (later than the ledger's settle delay).
	restore(t, dry, a)
	time.Sleep(10 * time.Millisecond)
	touchPDB(t, dry, "web")
	if err := waitFor(func() bool {
		_, err := p.sh.factory.Core().V1().Pods().Lister().Pods(ns).Get("a")
		return err == nil
	}); err != nil {
		t.Fatal("the restored pod a never reached the informer")
	}
	time.Sleep(10 * time.Millisecond)

	// Loop 2: the real run's second loop would find a gone and the budget
	// spent (its replacement not Ready yet).
	before := counter(t, extensionFilter, ReasonEvictedEarlierInDryRun)
	if p.Filter(a) {
		t.Error("loop 2: Filter(a) = true; a real run evicted a in loop 1")
	}
	if got := counter(t, extensionFilter, ReasonEvictedEarlierInDryRun) - before; got != 1 {
		t.Errorf("loop 2: %s refusals grew by %v, want 1", ReasonEvictedEarlierInDryRun, got)
	}
	if err := evict(ctx, dry, "c"); !apierrors.IsTooManyRequests(err) {
		t.Errorf("loop 2: eviction of c: %v, want a 429: loop 1's eviction still spends the budget", err)
	}
	err := evict(ctx, dry, "a")
	if !apierrors.IsTooManyRequests(err) || !strings.Contains(err.Error(), "pdb shop/web") {
		t.Errorf("loop 2: eviction of a: %v, want a 429 naming pdb shop/web", err)
	}
}

func waitFor(cond func() bool) error {
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			return context.DeadlineExceeded
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}
