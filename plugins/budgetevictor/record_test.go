package budgetevictor

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	kruiseclientset "github.com/openkruise/kruise-api/client/clientset/versioned"
	kruisefake "github.com/openkruise/kruise-api/client/clientset/versioned/fake"
	kruisepolicy "github.com/openkruise/kruise-api/policy/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
	frameworkfake "sigs.k8s.io/descheduler/pkg/framework/fake"

	"github.com/budgetguard/budgetguard/internal/testobj"
	"github.com/budgetguard/budgetguard/plugins/budget"
)

// TestGateRecordsPUBDisruptionBeforeTheEviction: the API server does not
// check PodUnavailableBudgets, so the gate writes the disruption into the
// PUB's status (disruptedPods, unavailableAllowed - 1) before it sends the
// eviction, as OpenKruise's webhook would; every other process then counts
// it. The next eviction the PUB does not allow is refused before the server.
// The descheduler's ledger alone is seen by no other process.
func TestGateRecordsPUBDisruptionBeforeTheEviction(t *testing.T) {
	// kruise-api's generated fake clientset never sends the initial-events
	// bookmark of a streaming list.
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	srv, real := realClientset(t)
	_, kc := pluginWithWebPUB(t, real)
	ctx := context.Background()

	if err := evict(ctx, real, "a"); err != nil {
		t.Fatalf("eviction of a: %v", err)
	}
	pub, err := kc.PolicyV1alpha1().PodUnavailableBudgets(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := pub.Status.DisruptedPods["a"]; !ok || pub.Status.UnavailableAllowed != 0 {
		t.Errorf("pub status after a's eviction: disruptedPods %v, unavailableAllowed %d; want a recorded and 0 allowed", pub.Status.DisruptedPods, pub.Status.UnavailableAllowed)
	}
	if err := evict(ctx, real, "b"); !apierrors.IsTooManyRequests(err) {
		t.Errorf("eviction of b: %v, want the gate's 429", err)
	}
	if n := srv.evictions("b"); n != 0 {
		t.Errorf("the server saw %d evictions of b, want 0", n)
	}
}

// TestGateTakesBackThePUBRecordWhenTheServerRefuses: the gate recorded b's
// disruption in its PUB before sending the eviction, and the API server
// refused it (429, a PDB the gate's cache had not seen spent). b stays, so
// its record is taken back: otherwise rule 5 counts b as already disrupted,
// and its next eviction is sent as free while the PUB allows nothing (found
// by TestPromiseAllActors). An eviction whose outcome is unknown (a 500)
// keeps its record. A record left behind after a refusal would let the
// server see b's eviction twice.
func TestGateTakesBackThePUBRecordWhenTheServerRefuses(t *testing.T) {
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	srv, real := realClientset(t)
	p, kc := pluginWithWebPUB(t, real)
	ctx := context.Background()
	status := func() (map[string]metav1.Time, int32) {
		t.Helper()
		pub, err := kc.PolicyV1alpha1().PodUnavailableBudgets(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return pub.Status.DisruptedPods, pub.Status.UnavailableAllowed
	}

	// The fake API server answers b's eviction with 429.
	if err := evict(ctx, real, "b"); !apierrors.IsTooManyRequests(err) {
		t.Fatalf("eviction of b: %v, want the server's 429", err)
	}
	if recorded, _ := status(); len(recorded) != 0 {
		t.Errorf("after the server refused b, the PUB's disruptedPods is %v; want b's record taken back", recorded)
	}
	// Wait until the cache has seen the status without b's record, then
	// try b again: the PUB allows nothing now (its controller has not
	// recomputed), so the gate refuses before the server.
	if err := waitFor(func() bool {
		return !cacheOf(t, p).Decide(webPod("b").Obj(), budget.OperationEvict).Allowed
	}); err != nil {
		t.Errorf("the cache still takes b as free: %v", err)
	}
	if err := evict(ctx, real, "b"); !apierrors.IsTooManyRequests(err) {
		t.Fatalf("second eviction of b: %v, want a 429", err)
	}
	if n := srv.evictions("b"); n != 1 {
		t.Errorf("the server saw %d evictions of b, want 1: b is not free to take after its eviction was refused", n)
	}

	// c's eviction fails with a 500: it may have happened, so c's record
	// stays (Kruise's controller times it out).
	srv2, real2 := realClientset(t)
	_, kc2 := pluginWithWebPUB(t, real2)
	if err := evict(ctx, real2, "c"); !apierrors.IsInternalError(err) {
		t.Fatalf("eviction of c: %v, want the server's 500", err)
	}
	pub, err := kc2.PolicyV1alpha1().PodUnavailableBudgets(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := pub.Status.DisruptedPods["c"]; !ok || srv2.evictions("c") != 1 {
		t.Errorf("after the server's 500 on c: disruptedPods %v, %d evictions; want c's record kept", pub.Status.DisruptedPods, srv2.evictions("c"))
	}
}

// pluginWithWebPUB is the evictor, gated on real, over pods a, b and c of
// app web under PUB web (3 available, 2 desired, 1 allowed), with PUB
// support on; it returns the PUB's clientset too.
func pluginWithWebPUB(t *testing.T, real *kubernetes.Clientset) (*BudgetAwareEvictor, *kruisefake.Clientset) {
	t.Helper()
	kc := kruisefake.NewSimpleClientset(testobj.MakePUB().Namespace(ns).Name("web").Generation(1).MatchLabels("app", "web").
		MaxUnavailable(intstr.FromInt32(1)).Status(3, 2, 1).Obj())
	disc := &fakediscovery.FakeDiscovery{Fake: &kc.Fake}
	disc.Resources = []*metav1.APIResourceList{{GroupVersion: budget.PUBGroupVersion, APIResources: []metav1.APIResource{{Name: "podunavailablebudgets", Kind: "PodUnavailableBudget"}}}}
	opts := Options{Kruise: func() (kruiseclientset.Interface, discovery.DiscoveryInterface, error) { return kc, disc, nil }}
	p := pluginOn(t, nil, opts, fake.NewClientset(webPod("a").Obj(), webPod("b").Obj(), webPod("c").Obj()), real)
	if !cacheOf(t, p).PUBEnabled() {
		t.Fatal("PUB support is off")
	}
	return p, kc
}

// TestNoKruiseClientRefusesUntilThereIsOne: while the client of the Kruise
// API cannot be built, nobody can tell whether PUBs protect a pod, so every
// eviction is refused, naming why; once it can, the cache is built, PUB
// support follows the API, and a PUB-protected pod is decided under its
// PUB. Turning PUB support off for the life of the process instead would
// let the PUB-protected pod go.
func TestNoKruiseClientRefusesUntilThereIsOne(t *testing.T) {
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	kc := kruisefake.NewSimpleClientset(testobj.MakePUB().Namespace(ns).Name("web").Generation(1).MatchLabels("app", "web").
		MaxUnavailable(intstr.FromInt32(1)).Status(3, 3, 0).Obj())
	disc := &fakediscovery.FakeDiscovery{Fake: &kc.Fake}
	disc.Resources = []*metav1.APIResourceList{{GroupVersion: budget.PUBGroupVersion, APIResources: []metav1.APIResource{{Name: "podunavailablebudgets", Kind: "PodUnavailableBudget"}}}}
	var broken atomic.Bool
	broken.Store(true)
	opts := Options{Kruise: func() (kruiseclientset.Interface, discovery.DiscoveryInterface, error) {
		if broken.Load() {
			return nil, nil, errors.New("loading the kubeconfig: connection refused")
		}
		return kc, disc, nil
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	client := fake.NewClientset(webPod("a").Obj(), webPod("b").Obj(), webPod("c").Obj())
	factory := informers.NewSharedInformerFactory(client, 0)
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	pl, err := NewBuilder(opts)(ctx, &BudgetAwareEvictorArgs{CacheSyncTimeoutSeconds: ptr.To[int32](1)}, &frameworkfake.HandleImpl{ClientsetImpl: client, SharedInformerFactoryImpl: factory})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	p := pl.(*BudgetAwareEvictor)
	before := counter(t, extensionFilter, ReasonCacheNotSynced)
	if p.Filter(webPod("a").Obj()) {
		t.Fatal("Filter(a) = true without a Kruise client; the pod's PUB is unknown")
	}
	if got := counter(t, extensionFilter, ReasonCacheNotSynced) - before; got != 1 {
		t.Errorf("Filter's CacheNotSynced refusals grew by %v, want 1", got)
	}
	if _, err := p.sh.budgets(); err == nil || !strings.Contains(err.Error(), "no client for the Kruise API: loading the kubeconfig") {
		t.Errorf("budgets() = %v, want the Kruise client's error", err)
	}
	broken.Store(false)
	p.sh.mu.Lock()
	p.sh.tried = time.Time{} // the retry is due
	p.sh.mu.Unlock()
	c := cacheOf(t, p)
	if !c.WaitForCacheSync(ctx) || !c.PUBEnabled() {
		t.Fatalf("once there is a client: synced %v, PUB support %v; want both", c.HasSynced(), c.PUBEnabled())
	}
	if p.PreEvictionFilter(webPod("a").Obj()) {
		t.Error("PreEvictionFilter(a) = true under a PUB that allows nothing")
	}
}

// TestGateRechecksAfterThePUBRecord: writing the PUB record takes a round
// trip, in which a covered pod may turn not Ready. The gate checks the live
// count again just before it sends the eviction: it refuses
// (StatusBehindPods), takes the record back, and sends nothing. Without
// that check the eviction would go and leave the PUB short (as make soak
// found: a pod of PUB app-04 turned not Ready 17 ms before the
// descheduler's record).
func TestGateRechecksAfterThePUBRecord(t *testing.T) {
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	srv, real := realClientset(t)
	kc := kruisefake.NewSimpleClientset(testobj.MakePUB().Namespace(ns).Name("web").Generation(1).MatchLabels("app", "web").
		MaxUnavailable(intstr.FromInt32(1)).Status(3, 2, 1).Obj())
	disc := &fakediscovery.FakeDiscovery{Fake: &kc.Fake}
	disc.Resources = []*metav1.APIResourceList{{GroupVersion: budget.PUBGroupVersion, APIResources: []metav1.APIResource{{Name: "podunavailablebudgets", Kind: "PodUnavailableBudget"}}}}
	core := fake.NewClientset(webPod("a").Obj(), webPod("b").Obj(), webPod("c").Obj())
	p := pluginOn(t, nil, Options{Kruise: func() (kruiseclientset.Interface, discovery.DiscoveryInterface, error) { return kc, disc, nil }}, core, real)
	c := cacheOf(t, p)
	ctx := context.Background()
	flapped := false
	kc.PrependReactor("update", "podunavailablebudgets", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "status" || flapped {
			return false, nil, nil
		}
		flapped = true
		// b turns not Ready while the record is written.
		if _, err := core.CoreV1().Pods(ns).Update(ctx, webPod("b").Ready(false).Obj(), metav1.UpdateOptions{}); err != nil {
			t.Error(err)
		}
		for c.LiveHealthy(budget.KindPUB, ns, "web") != 2 {
			time.Sleep(time.Millisecond)
		}
		return false, nil, nil
	})
	err := evict(ctx, real, "a")
	if !apierrors.IsTooManyRequests(err) || !strings.Contains(err.Error(), string(budget.ReasonStatusBehindPods)) {
		t.Fatalf("eviction of a: %v, want the gate's 429 for StatusBehindPods", err)
	}
	if n := srv.evictions("a"); n != 0 {
		t.Errorf("the server saw %d evictions of a, want 0", n)
	}
	pub, err := kc.PolicyV1alpha1().PodUnavailableBudgets(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := pub.Status.DisruptedPods["a"]; ok {
		t.Errorf("a's record is still in the PUB's status (%v); it must be taken back", pub.Status.DisruptedPods)
	}
}

// TestGateRetryAfterAnUnknownOutcomeDecidesAgain: PUB web wants 2 of a, b, c
// available. The eviction of c is answered 500: its outcome is unknown, so
// the gate keeps c's record in the PUB's status. Then b turns not Ready, and
// the descheduler sends c's eviction again. The retry must get the decision
// a fresh eviction gets, on the live count as it is when the eviction is
// sent: refused (StatusBehindPods), never sent, and c's record, which the
// refusal shows to be of a pod that stays, released.
//
// Both ways of failing are tested. When the cache has not seen the kept
// record, the retry's record step finds it already in the PUB and reuses
// it; without a live-count check after that round trip, b's change, seen
// during it, would be missed and the eviction sent, leaving 1 of 2. When
// the cache has seen it, the retry is refused; if the record stayed, rule 5
// would take c's later disruptions as already counted.
func TestGateRetryAfterAnUnknownOutcomeDecidesAgain(t *testing.T) {
	for _, tc := range []struct {
		name string
		// cacheBehind: the cache's PUB watch has dropped, so the cache never
		// sees the kept record, and b's change reaches the cache while the
		// retry's record step re-reads the PUB. Otherwise the cache has seen
		// the record, and b's change, before the retry.
		cacheBehind bool
	}{
		{name: "cache behind the record", cacheBehind: true},
		{name: "cache has the record"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
			srv, real := realClientset(t) // it answers every eviction of c with 500
			kc := kruisefake.NewSimpleClientset(testobj.MakePUB().Namespace(ns).Name("web").Generation(1).MatchLabels("app", "web").
				MaxUnavailable(intstr.FromInt32(1)).Status(3, 2, 1).Obj())
			if tc.cacheBehind {
				kc.PrependWatchReactor("podunavailablebudgets", func(clienttesting.Action) (bool, watch.Interface, error) {
					return true, watch.NewFake(), nil
				})
			}
			disc := &fakediscovery.FakeDiscovery{Fake: &kc.Fake}
			disc.Resources = []*metav1.APIResourceList{{GroupVersion: budget.PUBGroupVersion, APIResources: []metav1.APIResource{{Name: "podunavailablebudgets", Kind: "PodUnavailableBudget"}}}}
			core := fake.NewClientset(webPod("a").Obj(), webPod("b").Obj(), webPod("c").Obj())
			p := pluginOn(t, nil, Options{Kruise: func() (kruiseclientset.Interface, discovery.DiscoveryInterface, error) { return kc, disc, nil }}, core, real)
			c := cacheOf(t, p)
			ctx := context.Background()
			recorded := func() bool {
				t.Helper()
				pub, err := kc.PolicyV1alpha1().PodUnavailableBudgets(ns).Get(ctx, "web", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				_, ok := pub.Status.DisruptedPods["c"]
				return ok
			}
			bNotReady := func() {
				if _, err := core.CoreV1().Pods(ns).Update(ctx, webPod("b").Ready(false).Obj(), metav1.UpdateOptions{}); err != nil {
					t.Error(err)
				}
				if err := waitFor(func() bool { return c.LiveHealthy(budget.KindPUB, ns, "web") == 2 }); err != nil {
					t.Errorf("the live count never saw b not Ready: %v", err)
				}
			}

			if err := evict(ctx, real, "c"); !apierrors.IsInternalError(err) {
				t.Fatalf("eviction of c: %v, want the server's 500", err)
			}
			if !recorded() {
				t.Fatal("c's record was not kept after an eviction whose outcome is unknown")
			}
			if tc.cacheBehind {
				var once atomic.Bool
				kc.PrependReactor("get", "podunavailablebudgets", func(clienttesting.Action) (bool, runtime.Object, error) {
					if once.CompareAndSwap(false, true) {
						bNotReady()
					}
					return false, nil, nil
				})
			} else {
				if err := waitFor(func() bool { return c.Decide(webPod("c").Obj(), budget.OperationEvict).Free() }); err != nil {
					t.Fatalf("the cache never saw c's record: %v", err)
				}
				bNotReady()
			}

			err := evict(ctx, real, "c")
			if !apierrors.IsTooManyRequests(err) || !strings.Contains(err.Error(), string(budget.ReasonStatusBehindPods)) {
				t.Errorf("retried eviction of c: %v (reason %q), want the gate's 429 for StatusBehindPods", err, apierrors.ReasonForError(err))
			}
			if n := srv.evictions("c"); n != 1 {
				t.Errorf("the server saw %d evictions of c, want 1: the retry leaves 1 of 2 available", n)
			}
			if recorded() {
				t.Error("c's record is still in the PUB's status after its retry was refused; it must be released")
			}
		})
	}
}

// TestGateRefusesARecordedPodOnAShortPUB: PUB web records c's disruption
// already (another process's attempt whose outcome was unknown kept it), so
// rule 5 lets c go without a new record. Since then another pod turned not
// Ready: the API server's PUB counts 1 available of 2 desired without c,
// while the gate's cache has not seen it. The gate reads the PUB from the
// API server and refuses c (InsufficientBudget) before the server sees the
// eviction, rather than evicting c on the old record, which would leave the
// PUB short (as TestPromiseAllActorsUnderFaults, seed 7, found with the
// scheduler).
func TestGateRefusesARecordedPodOnAShortPUB(t *testing.T) {
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	srv, real := realClientset(t)
	recorded := func(available int32) *kruisepolicy.PodUnavailableBudget {
		return testobj.MakePUB().Namespace(ns).Name("web").Generation(1).MatchLabels("app", "web").
			MaxUnavailable(intstr.FromInt32(1)).Status(available, 2, 0).Disrupted(time.Now(), "c").Obj()
	}
	kc := kruisefake.NewSimpleClientset(recorded(2))
	disc := &fakediscovery.FakeDiscovery{Fake: &kc.Fake}
	disc.Resources = []*metav1.APIResourceList{{GroupVersion: budget.PUBGroupVersion, APIResources: []metav1.APIResource{{Name: "podunavailablebudgets", Kind: "PodUnavailableBudget"}}}}
	p := pluginOn(t, nil, Options{Kruise: func() (kruiseclientset.Interface, discovery.DiscoveryInterface, error) { return kc, disc, nil }},
		fake.NewClientset(webPod("a").Obj(), webPod("b").Obj(), webPod("c").Obj()), real)
	if err := waitFor(func() bool { return cacheOf(t, p).Decide(webPod("c").Obj(), budget.OperationEvict).Free() }); err != nil {
		t.Fatalf("the cache never saw c's record: %v", err)
	}
	kc.PrependReactor("get", "podunavailablebudgets", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, recorded(1), nil
	})
	err := evict(context.Background(), real, "c")
	if !apierrors.IsTooManyRequests(err) || !strings.Contains(err.Error(), string(budget.ReasonInsufficientBudget)) {
		t.Errorf("eviction of c: %v, want the gate's 429 for InsufficientBudget", err)
	}
	if n := srv.evictions("c"); n != 0 {
		t.Errorf("the server saw %d evictions of c, want 0", n)
	}
}
