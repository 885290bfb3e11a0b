package budget

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	kruisefake "github.com/openkruise/kruise-api/client/clientset/versioned/fake"
	kruiseinformers "github.com/openkruise/kruise-api/client/informers/externalversions"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
)

// switchableDiscovery answers whether PUBs are served as the test says:
// failing, not served, or served.
type switchableDiscovery struct {
	discovery.DiscoveryInterface
	state atomic.Int32 // 0 error, 1 not served, 2 served
}

func (d *switchableDiscovery) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	switch d.state.Load() {
	case 0:
		return nil, errors.New("the server is currently unable to handle the request")
	case 1:
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: "policy.kruise.io"}, gv)
	}
	return &metav1.APIResourceList{GroupVersion: gv, APIResources: []metav1.APIResource{{Name: "podunavailablebudgets", Kind: "PodUnavailableBudget"}}}, nil
}

// TestPUBSupportFollowsTheAPI: while discovery fails (an API server that is
// starting, an aggregated API that is down), the cache is not synced and
// says why, so both plugins refuse; it asks again until discovery answers.
// Only "not served" turns PUB support off, and the cache is then synced;
// once the API is served (OpenKruise installed after budgetguard), PUB
// support turns on without a restart, the PUB's pods are decided under it,
// and the gauge says so. A discovery error never turns PUB support off: a
// cache synced without PUBs would let every PUB-protected pod go.
func TestPUBSupportFollowsTheAPI(t *testing.T) {
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	ctx, cancel := context.WithTimeout(klog.NewContext(context.Background(), ktesting.NewLogger(t, ktesting.NewConfig())), 30*time.Second)
	defer cancel()
	client := fake.NewClientset()
	kclient := kruisefake.NewSimpleClientset(pub("web", exhausted).MatchLabels("app", "web").Obj())
	factory := informers.NewSharedInformerFactory(client, 0)
	kf := kruiseinformers.NewSharedInformerFactory(kclient, 0)
	disc := &switchableDiscovery{}
	c, err := New(ctx, factory, Options{KruiseInformers: kf, Discovery: disc, PUBDiscoveryInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// A watcher of the PUB informer (the preemption plugin's requeue)
	// registers with OnPUBSupport and must be called once support is on.
	var hooked atomic.Int32
	c.OnPUBSupport(func() { hooked.Add(1) })
	factory.Start(ctx.Done())
	kf.Start(ctx.Done())
	if !toolscacheWait(ctx, func() bool { return factory.Core().V1().Pods().Informer().HasSynced() }) {
		t.Fatal("pod informer did not sync")
	}
	gauge := func(v string) error {
		cc := newCacheCollector() // a collector registers once
		cc.add(ctx, c, "test")
		return testutil.CustomCollectAndCompare(cc, strings.NewReader(`
# HELP budgetguard_cache_pub_support_enabled [ALPHA] 1 when budgetguard takes OpenKruise PodUnavailableBudgets into account, 0 while their API is not served (it is asked again until it is).
# TYPE budgetguard_cache_pub_support_enabled gauge
budgetguard_cache_pub_support_enabled{component="test"} `+v+"\n"), "budgetguard_cache_pub_support_enabled")
	}

	// Discovery fails: not synced, and the reason names the fault, for
	// as long as it fails (several rounds of asking).
	time.Sleep(100 * time.Millisecond)
	if c.HasSynced() || c.PUBEnabled() {
		t.Fatalf("while discovery fails: synced %v, PUB support %v; want neither", c.HasSynced(), c.PUBEnabled())
	}
	reason, msg := c.NotSynced()
	if reason != NotSyncedDiscovery || !strings.Contains(msg, "discovery of policy.kruise.io/v1alpha1 failed") || !strings.Contains(msg, "unable to handle the request") {
		t.Errorf("NotSynced while discovery fails = %q, %q; want %s naming the discovery error", reason, msg, NotSyncedDiscovery)
	}
	if err := gauge("0"); err != nil {
		t.Error(err)
	}
	notSynced := func(discovery string) error {
		cc := newCacheCollector()
		cc.add(ctx, c, "test")
		return testutil.CustomCollectAndCompare(cc, strings.NewReader(`
# HELP budgetguard_cache_not_synced [ALPHA] 1 while the budget cache is not synced, by reason (DiscoveryFailed: discovery has not said whether PodUnavailableBudgets are served; InformersNotSynced); both plugins refuse every disruption meanwhile.
# TYPE budgetguard_cache_not_synced gauge
budgetguard_cache_not_synced{component="test",reason="DiscoveryFailed"} `+discovery+`
budgetguard_cache_not_synced{component="test",reason="InformersNotSynced"} 0
`), "budgetguard_cache_not_synced")
	}
	if err := notSynced("1"); err != nil {
		t.Error(err)
	}

	// Not served: PUB support off, and the cache synced.
	disc.state.Store(1)
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("the cache did not sync once discovery said PUBs are not served")
	}
	if c.PUBEnabled() {
		t.Fatal("PUB support on while the API is not served")
	}
	if reason, msg := c.NotSynced(); reason != "" {
		t.Errorf("NotSynced of a synced cache = %q, %q; want empty", reason, msg)
	}
	mustAllow(t, c.Decide(webPod("a").Obj(), OperationEvict))
	if err := notSynced("0"); err != nil {
		t.Error(err)
	}
	// A discovery error now does not turn anything back: the API was not
	// served last we knew.
	disc.state.Store(0)
	time.Sleep(100 * time.Millisecond)
	if !c.HasSynced() || c.PUBEnabled() {
		t.Fatalf("after not served, then an error: synced %v, PUB support %v; want synced, off", c.HasSynced(), c.PUBEnabled())
	}
	if err := gauge("0"); err != nil {
		t.Error(err)
	}
	if n := hooked.Load(); n != 0 {
		t.Errorf("OnPUBSupport hook called %d times while PUB support is off, want 0", n)
	}

	disc.state.Store(2)
	for !c.PUBEnabled() || !c.HasSynced() {
		if ctx.Err() != nil {
			t.Fatal("PUB support did not turn on once the API was served")
		}
		time.Sleep(10 * time.Millisecond)
	}
	mustDeny(t, c.Decide(webPod("a").Obj(), OperationEvict), ReasonInsufficientBudget)
	if err := gauge("1"); err != nil {
		t.Error(err)
	}
	if n := hooked.Load(); n != 1 {
		t.Errorf("OnPUBSupport hook called %d times after PUB support turned on, want 1", n)
	}
	c.OnPUBSupport(func() { hooked.Add(1) })
	if n := hooked.Load(); n != 2 {
		t.Errorf("a hook registered while PUB support is on was not called at once (calls: %d, want 2)", n)
	}
}

// TestPUBDiscoveryErrorThenServed: a cache started while discovery fails
// (an API server that is starting) refuses, then syncs with PUB support on
// as soon as discovery answers that PUBs are served, and decides under the
// PUB from its first synced decision.
func TestPUBDiscoveryErrorThenServed(t *testing.T) {
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	ctx, cancel := context.WithTimeout(klog.NewContext(context.Background(), ktesting.NewLogger(t, ktesting.NewConfig())), 30*time.Second)
	defer cancel()
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	kf := kruiseinformers.NewSharedInformerFactory(kruisefake.NewSimpleClientset(pub("web", exhausted).MatchLabels("app", "web").Obj()), 0)
	disc := &switchableDiscovery{}
	c, err := New(ctx, factory, Options{KruiseInformers: kf, Discovery: disc, PUBDiscoveryInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	kf.Start(ctx.Done())
	time.Sleep(50 * time.Millisecond)
	if c.HasSynced() {
		t.Fatal("synced while discovery fails")
	}
	// The retry after an error does not wait for the (hour-long) interval.
	disc.state.Store(2)
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("the cache did not sync once discovery answered")
	}
	if !c.PUBEnabled() {
		t.Fatal("PUB support off although the API is served")
	}
	mustDeny(t, c.Decide(webPod("a").Obj(), OperationEvict), ReasonInsufficientBudget)
}

func toolscacheWait(ctx context.Context, fn func() bool) bool {
	for !fn() {
		if ctx.Err() != nil {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// versionDiscovery answers per group and version: "served", "absent" (a
// 404), or anything else (an error).
type versionDiscovery struct {
	discovery.DiscoveryInterface
	answers map[string]string
}

func (d versionDiscovery) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	switch d.answers[gv] {
	case "served":
		return &metav1.APIResourceList{GroupVersion: gv, APIResources: []metav1.APIResource{{Name: "podunavailablebudgets", Kind: "PodUnavailableBudget"}}}, nil
	case "absent":
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: "policy.kruise.io"}, gv)
	}
	return nil, errors.New("the server is currently unable to handle the request")
}

// TestPUBServedVersion: v1beta1 where it is served and the Cache can read
// it, v1alpha1 otherwise; an error of discovery for either version tells
// nothing (the Cache stays unsynced), even when the other is served.
func TestPUBServedVersion(t *testing.T) {
	for _, tc := range []struct {
		name        string
		beta, alpha string
		betaClient  bool
		want        string
		wantErr     bool
	}{
		{name: "both served: v1beta1", beta: "served", alpha: "served", betaClient: true, want: PUBGroupVersionV1beta1},
		{name: "both served, no v1beta1 client: v1alpha1", beta: "served", alpha: "served", want: PUBGroupVersion},
		{name: "v1alpha1 alone: v1alpha1", beta: "absent", alpha: "served", betaClient: true, want: PUBGroupVersion},
		{name: "v1beta1 alone: v1beta1", beta: "served", alpha: "absent", betaClient: true, want: PUBGroupVersionV1beta1},
		{name: "neither: off", beta: "absent", alpha: "absent", betaClient: true, want: ""},
		{name: "v1beta1 fails: unknown, whatever v1alpha1 says", beta: "fails", alpha: "served", betaClient: true, wantErr: true},
		{name: "v1beta1 absent, v1alpha1 fails: unknown", beta: "absent", alpha: "fails", betaClient: true, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := versionDiscovery{answers: map[string]string{PUBGroupVersionV1beta1: tc.beta, PUBGroupVersion: tc.alpha}}
			got, err := pubServedVersion(d, tc.betaClient, true)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("pubServedVersion = %q, %v; want %q, error %v", got, err, tc.want, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "discovery of policy.kruise.io/") {
				t.Errorf("error %q does not name the version whose discovery failed", err)
			}
		})
	}
}
