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

// TestPUBSupportFollowsTheAPI: a discovery error, then an API that is not
// served, leave PUB support off, and the cache asks again; once the API is
// served (OpenKruise installed after budgetguard), PUB support turns on
// without a restart, the PUB's pods are decided under it, and the gauge says
// so. Before, the answer at start-up was final until a restart.
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
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("cache did not sync")
	}
	gauge := func(v string) error {
		cc := newCacheCollector() // a collector registers once
		cc.add(ctx, c, "test")
		return testutil.CustomCollectAndCompare(cc, strings.NewReader(`
# HELP budgetguard_cache_pub_support_enabled [ALPHA] 1 when budgetguard takes OpenKruise PodUnavailableBudgets into account, 0 while their API is not served (it is asked again until it is).
# TYPE budgetguard_cache_pub_support_enabled gauge
budgetguard_cache_pub_support_enabled{component="test"} `+v+"\n"), "budgetguard_cache_pub_support_enabled")
	}
	for _, state := range []int32{0, 1} {
		disc.state.Store(state)
		time.Sleep(100 * time.Millisecond) // several rounds of asking
		if c.PUBEnabled() {
			t.Fatalf("PUB support on while discovery answers state %d", state)
		}
		mustAllow(t, c.Decide(webPod("a").Obj(), OperationEvict))
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
	for c.Decide(webPod("a").Obj(), OperationEvict).Allowed {
		if ctx.Err() != nil {
			t.Fatal("the exhausted PUB never reached the decisions")
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
