package budget

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	kruisefake "github.com/openkruise/kruise-api/client/clientset/versioned/fake"
	kruiseinformers "github.com/openkruise/kruise-api/client/informers/externalversions"
	kruisepolicy "github.com/openkruise/kruise-api/policy/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/budgetguard/budgetguard/internal/testobj"
)

const ns = "shop"

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// harness drives a Cache by calling its informer handlers directly, so a
// test controls exactly which events the Cache has seen and in what order.
type harness struct {
	t       testing.TB
	clock   *testingclock.FakeClock
	factory informers.SharedInformerFactory
	c       *Cache
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	clk := testingclock.NewFakeClock(epoch)
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	kf := kruiseinformers.NewSharedInformerFactory(kruisefake.NewSimpleClientset(), 0)
	// A benchmark prints everything logged, into the lines benchstat
	// reads: the Cache logs nothing there. Tests log through ktesting.
	var logger klog.Logger
	if _, bench := t.(*testing.B); bench {
		logger = klog.LoggerWithName(logr.Discard(), "budget")
	} else {
		logger = ktesting.NewLogger(t, ktesting.NewConfig())
	}
	c, err := New(klog.NewContext(context.Background(), logger), factory, Options{Clock: clk, KruiseInformers: kf})
	if err != nil {
		t.Fatal(err)
	}
	// The handlers recount as after the initial lists (countAllOnce),
	// which the harness's unstarted informers never deliver.
	c.recountsOn.Store(true)
	return &harness{t: t, clock: clk, factory: factory, c: c}
}

func (h *harness) pdb(p *policyv1.PodDisruptionBudget) { h.c.onPDB(p, false) }
func (h *harness) pub(p *kruisepolicy.PodUnavailableBudget) {
	h.c.onPUB(p, false)
}

// podEvent delivers a pod event as an informer does: its store first, then
// the handler.
func (h *harness) podEvent(p *v1.Pod, deleted bool) {
	h.t.Helper()
	store := h.factory.Core().V1().Pods().Informer().GetStore()
	var err error
	if deleted {
		err = store.Delete(p)
	} else {
		err = store.Update(p)
	}
	if err != nil {
		h.t.Fatal(err)
	}
	h.c.onPod(p, deleted)
}

// livePods hands pods to the Cache as its pod informer's initial list and
// marks that list delivered, so that decisions check the live count too.
// Without it, a harness test decides on the budgets' statuses alone, as
// the Cache does before its pod informer has synced.
func (h *harness) livePods(pods ...*v1.Pod) {
	h.t.Helper()
	for _, p := range pods {
		h.podEvent(p, false)
	}
	h.c.liveOn.Store(true)
}

func (h *harness) add(objs ...any) {
	h.t.Helper()
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *appsv1.ReplicaSet:
			err = h.factory.Apps().V1().ReplicaSets().Informer().GetIndexer().Add(o)
		case *appsv1.Deployment:
			err = h.factory.Apps().V1().Deployments().Informer().GetIndexer().Add(o)
		case *appsv1.StatefulSet:
			err = h.factory.Apps().V1().StatefulSets().Informer().GetIndexer().Add(o)
		case *policyv1.PodDisruptionBudget:
			h.pdb(o)
		case *kruisepolicy.PodUnavailableBudget:
			h.pub(o)
		case *PUB:
			h.c.onPUB(o, false)
		default:
			err = fmt.Errorf("harness cannot add %T", o)
		}
		if err != nil {
			h.t.Fatal(err)
		}
	}
}

// webPod is a running, ready pod of app web in ns, with UID "uid-"+name.
func webPod(name string) *testobj.PodWrapper { return testobj.RunningPod(ns, name).Label("app", "web") }

// pdbStatus is healthy/desired/allowed, the numbers operators read; for a
// PUB, available/desired/allowed.
type pdbStatus struct{ healthy, desired, allowed int32 }

// webPDB is a PDB in ns that selects app web, with minAvailable st.desired
// and an up-to-date status st.
func webPDB(name string, st pdbStatus) *testobj.PDBWrapper {
	return testobj.MakePDB().Namespace(ns).Name(name).UID("uid-pdb-"+name).Generation(1).MatchLabels("app", "web").MinAvailable(st.desired).Status(st.healthy, st.desired, st.allowed)
}

// pub is a PUB in ns that selects no pod, with an up-to-date status st.
func pub(name string, st pdbStatus) *testobj.PUBWrapper {
	return testobj.MakePUB().Namespace(ns).Name(name).UID("uid-pub-"+name).Generation(1).Status(st.healthy, st.desired, st.allowed)
}
