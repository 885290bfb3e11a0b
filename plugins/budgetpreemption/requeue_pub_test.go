package budgetpreemption

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	kruisefake "github.com/openkruise/kruise-api/client/clientset/versioned/fake"
	kruiseinformers "github.com/openkruise/kruise-api/client/informers/externalversions"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/discovery"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/informers"
	clientsetfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	"github.com/budgetguard/budgetguard/internal/testobj"
	"github.com/budgetguard/budgetguard/plugins/budget"
)

// lateKruise answers that PodUnavailableBudgets are not served until served
// is set: OpenKruise installed after budgetguard.
type lateKruise struct {
	discovery.DiscoveryInterface
	served atomic.Bool
}

func (d *lateKruise) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	if !d.served.Load() {
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: "policy.kruise.io"}, gv)
	}
	return &metav1.APIResourceList{GroupVersion: gv, APIResources: []metav1.APIResource{{Name: "podunavailablebudgets", Kind: "PodUnavailableBudget"}}}, nil
}

// TestPreemptorRequeuedWhenPUBFreesAfterPUBSupportTurnedOnLate: when PUB
// support turns on after start-up, a preemptor blocked by a PUB is
// activated when the PUB frees: the requeue handler is registered on the
// PUB informer when PUB support turns on, not only at start-up, or such a
// preemptor would wait for the queue's 5-minute flush.
func TestPreemptorRequeuedWhenPUBFreesAfterPUBSupportTurnedOnLate(t *testing.T) {
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	pub := testobj.MakePUB().Namespace(ns).Name("web").UID("uid-pub-web").Generation(1).MatchLabels("app", "web").
		MaxUnavailable(intstr.FromInt32(1)).Status(4, 4, 0).Obj()
	kc := kruisefake.NewSimpleClientset(pub)
	kf := kruiseinformers.NewSharedInformerFactory(kc, 0)
	factory := informers.NewSharedInformerFactory(clientsetfake.NewClientset(), 0)
	disc := &lateKruise{}
	c, err := budget.New(ctx, factory, budget.Options{KruiseInformers: kf, Discovery: disc, PUBDiscoveryInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	h := &activatorHandle{activated: make(chan map[string]*v1.Pod, 10)}
	pl := &BudgetAwarePreemption{fh: h, budgets: c, blocked: newBlockedPreemptors()}
	if err := pl.watchBudgetInformers(ctx, factory); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	kf.Start(ctx.Done())
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("budget cache did not sync")
	}

	disc.served.Store(true)
	for !c.PUBEnabled() || !c.HasSynced() {
		if ctx.Err() != nil {
			t.Fatal("PUB support did not turn on once the API was served")
		}
		time.Sleep(10 * time.Millisecond)
	}
	p := preemptor("2", 100)
	pl.blocked.add(p)

	pub.Status.UnavailableAllowed = 1
	pub.Status.CurrentAvailable = 5
	if _, err := kc.PolicyV1alpha1().PodUnavailableBudgets(ns).UpdateStatus(ctx, pub, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-h.activated:
		if got[ns+"/preemptor"] == nil {
			t.Errorf("activated %v, want %s/preemptor", got, ns)
		}
	case <-ctx.Done():
		t.Fatal("the preemptor blocked by the PUB was not activated when the PUB freed")
	}
}
