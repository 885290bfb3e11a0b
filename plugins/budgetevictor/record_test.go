package budgetevictor

import (
	"context"
	"testing"

	kruiseclientset "github.com/openkruise/kruise-api/client/clientset/versioned"
	kruisefake "github.com/openkruise/kruise-api/client/clientset/versioned/fake"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/discovery"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/budgetguard/budgetguard/internal/testobj"
	"github.com/budgetguard/budgetguard/plugins/budget"
)

// TestGateRecordsPUBDisruptionBeforeTheEviction: the API server does not
// check PodUnavailableBudgets, so the gate writes the disruption into the
// PUB's status (disruptedPods, unavailableAllowed - 1) before it sends the
// eviction, as OpenKruise's webhook would; every other process then counts
// it. The next eviction the PUB does not allow is refused before the server.
// Before, the only record was the descheduler's ledger.
func TestGateRecordsPUBDisruptionBeforeTheEviction(t *testing.T) {
	// kruise-api's generated fake clientset never sends the initial-events
	// bookmark of a streaming list.
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	srv, real := realClientset(t)
	kc := kruisefake.NewSimpleClientset(testobj.MakePUB().Namespace(ns).Name("web").Generation(1).MatchLabels("app", "web").
		MaxUnavailable(intstr.FromInt32(1)).Status(3, 2, 1).Obj())
	disc := &fakediscovery.FakeDiscovery{Fake: &kc.Fake}
	disc.Resources = []*metav1.APIResourceList{{GroupVersion: budget.PUBGroupVersion, APIResources: []metav1.APIResource{{Name: "podunavailablebudgets", Kind: "PodUnavailableBudget"}}}}
	opts := Options{Kruise: func() (kruiseclientset.Interface, discovery.DiscoveryInterface, error) { return kc, disc, nil }}
	p := pluginOn(t, nil, opts, fake.NewClientset(webPod("a").Obj(), webPod("b").Obj(), webPod("c").Obj()), real)
	if !cacheOf(t, p).PUBEnabled() {
		t.Fatal("PUB support is off")
	}
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
