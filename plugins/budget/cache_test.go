package budget

import (
	"context"
	"fmt"
	"testing"
	"time"

	kruisefake "github.com/openkruise/kruise-api/client/clientset/versioned/fake"
	kruiseinformers "github.com/openkruise/kruise-api/client/informers/externalversions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/budgetguard/budgetguard/internal/testobj"
)

// visited counts the PDB selectors a lookup for pod labels evaluates.
func visited(c *Cache, namespace string, podLabels map[string]string) int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	_, n := c.pdbs.matching(namespace, podLabels, nil)
	return n
}

func TestLookupCostIgnoresUnrelatedBudgets(t *testing.T) {
	h := newHarness(t)
	h.add(webPDB("web", oneLeft).Obj())
	podLabels := map[string]string{"app": "web", "tier": "frontend"}
	base := visited(h.c, ns, podLabels)
	if base != 1 {
		t.Fatalf("one covering budget: visited %d selectors, want 1", base)
	}
	for i := 0; i < 1000; i++ {
		h.pdb(webPDB("web", oneLeft).Namespace(fmt.Sprintf("ns-%d", i)).Obj())
		h.pdb(webPDB(fmt.Sprintf("other-%d", i), oneLeft).MatchLabels("app", fmt.Sprintf("other-%d", i)).Obj())
		h.pdb(webPDB(fmt.Sprintf("in-%d", i), oneLeft).Selector(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{fmt.Sprintf("a-%d", i), fmt.Sprintf("b-%d", i)}},
		}}).Obj())
		h.pdb(webPDB(fmt.Sprintf("nil-%d", i), oneLeft).Selector(nil).Obj())
	}
	if got := visited(h.c, ns, podLabels); got != base {
		t.Fatalf("after 1000 budgets in other namespaces and 3000 that cannot match: visited %d selectors, want %d", got, base)
	}
	if d := h.c.Decide(testobj.RunningPod(ns, "a").Labels(testobj.Labels("app", "web", "tier", "frontend")).Obj(), OperationEvict); !d.Allowed || len(d.Spends) != 1 {
		t.Fatalf("decision changed: %+v", d)
	}
	// Selectors without an equality requirement must be checked for every pod.
	h.pdb(webPDB("everything", oneLeft).Selector(&metav1.LabelSelector{}).Obj())
	if got := visited(h.c, ns, podLabels); got != base+1 {
		t.Fatalf("an empty selector must be visited: visited %d, want %d", got, base+1)
	}
}

func TestIndexFollowsSelectorChangesAndDeletes(t *testing.T) {
	h := newHarness(t)
	p := webPDB("web", exhausted).Obj()
	h.add(p)
	mustDeny(t, h.c.Decide(webPod("a").Obj(), OperationEvict), ReasonInsufficientBudget)
	moved := p.DeepCopy()
	moved.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}
	h.pdb(moved)
	mustAllow(t, h.c.Decide(webPod("a").Obj(), OperationEvict))
	h.pdb(p)
	mustDeny(t, h.c.Decide(webPod("a").Obj(), OperationEvict), ReasonInsufficientBudget)
	h.c.onPDB(p, true)
	mustAllow(t, h.c.Decide(webPod("a").Obj(), OperationEvict))
	if n := h.c.Budgets()[KindPDB]; n != 0 {
		t.Fatalf("%d PDBs still indexed after delete", n)
	}
	dbPUB := pub("web", exhausted).TargetRef("apps/v1", "StatefulSet", "db").Obj()
	h.add(testobj.MakeStatefulSet().Namespace(ns).Name("db").UID("uid-db").Obj(), dbPUB)
	pod := webPod("a").OwnedBy("apps/v1", "StatefulSet", "db", testobj.UIDOf("db")).Obj()
	mustDeny(t, h.c.Decide(pod, OperationEvict), ReasonInsufficientBudget)
	h.c.onPUB(dbPUB, true)
	mustAllow(t, h.c.Decide(pod, OperationEvict))
	if n := h.c.Budgets()[KindPUB]; n != 0 {
		t.Fatalf("%d PUBs still indexed after delete", n)
	}
}

// TestInformersFeedTheCache runs real informers over fake clientsets: the
// objects reach the Cache through its event handlers, not through test calls.
func TestInformersFeedTheCache(t *testing.T) {
	// kruise-api's generated fake clientset predates streaming lists and
	// never sends the initial-events bookmark; a real API server does.
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	ctx, cancel := context.WithTimeout(klog.NewContext(context.Background(), ktesting.NewLogger(t, ktesting.NewConfig())), 30*time.Second)
	defer cancel()
	client := fake.NewClientset(webPDB("web", oneLeft).Obj(), testobj.MakeStatefulSet().Namespace(ns).Name("db").UID("uid-db").Obj(),
		webPod("a").Obj(), webPod("web-1").Obj(), webPod("web-2").Obj())
	kclient := kruisefake.NewSimpleClientset(pub("db", exhausted).TargetRef("apps/v1", "StatefulSet", "db").Obj())
	factory := informers.NewSharedInformerFactory(client, 0)
	kf := kruiseinformers.NewSharedInformerFactory(kclient, 0)
	disc := &fakediscovery.FakeDiscovery{Fake: &kclient.Fake}
	disc.Resources = []*metav1.APIResourceList{{GroupVersion: PUBGroupVersion, APIResources: []metav1.APIResource{{Name: "podunavailablebudgets", Kind: "PodUnavailableBudget"}}}}
	c, err := New(ctx, factory, Options{KruiseInformers: kf, Discovery: disc})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	kf.Start(ctx.Done())
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("cache did not sync")
	}
	if !c.PUBEnabled() {
		t.Fatal("PUB support must be on when the API is served")
	}
	mustAllow(t, c.Decide(webPod("a").Obj(), OperationEvict))
	mustDeny(t, c.Decide(testobj.RunningPod(ns, "b").OwnedBy("apps/v1", "StatefulSet", "db", testobj.UIDOf("db")).Obj(), OperationEvict), ReasonInsufficientBudget)

	// A status update through the API reaches the decision.
	_, err = client.PolicyV1().PodDisruptionBudgets(ns).UpdateStatus(ctx, webPDB("web", exhausted).Obj(), metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for c.Decide(webPod("a").Obj(), OperationEvict).Allowed {
		if ctx.Err() != nil {
			t.Fatal("status update never reached the cache")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestPUBSupportOffWhenAPINotServed(t *testing.T) {
	logger := ktesting.NewLogger(t, ktesting.NewConfig())
	ctx := klog.NewContext(context.Background(), logger)
	kclient := kruisefake.NewSimpleClientset()
	disc := &fakediscovery.FakeDiscovery{Fake: &kclient.Fake} // serves nothing
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	kf := kruiseinformers.NewSharedInformerFactory(kclient, 0)
	c, err := New(ctx, factory, Options{KruiseInformers: kf, Discovery: disc})
	if err != nil {
		t.Fatalf("a missing PUB API must not be an error: %v", err)
	}
	if c.PUBEnabled() {
		t.Fatal("PUB support must be off when the API is not served")
	}
	if got := len(kf.Policy().V1alpha1().PodUnavailableBudgets().Informer().GetStore().List()); got != 0 {
		t.Fatalf("unexpected PUB objects: %d", got)
	}
	// Everything else still works: PDB decisions.
	h := &harness{t: t, factory: factory, c: c}
	h.add(webPDB("web", exhausted).Obj())
	mustDeny(t, c.Decide(webPod("a").Obj(), OperationEvict), ReasonInsufficientBudget)
}

func TestObservedResourceVersion(t *testing.T) {
	h := newHarness(t)
	p := webPDB("web", oneLeft).Selector(nil).Obj() // not indexed, but observed
	p.ResourceVersion = "41"
	h.pdb(p)
	if v, ok := h.c.ObservedResourceVersion(KindPDB, ns, "web"); !ok || v != "41" {
		t.Fatalf("got %q %v, want 41", v, ok)
	}
	h.c.onPDB(p, true)
	if _, ok := h.c.ObservedResourceVersion(KindPDB, ns, "web"); ok {
		t.Fatal("a deleted budget must not be observed")
	}
}
