package budgetpreemption

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	clientsetfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/budgetguard/budgetguard/plugins/budget"
)

// profilesEnv is a fake cluster of the 4 Ready pods of web on n1 under a PDB
// that allows 1 disruption, and its informer factory, not started.
type profilesEnv struct {
	ctx      context.Context
	cs       *clientsetfake.Clientset
	factory  informers.SharedInformerFactory
	snapshot *internalcache.Snapshot
	pods     []*v1.Pod
}

func newProfilesEnv(t *testing.T) *profilesEnv {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	pods := replicas("web", "n1", "web", true, 0, 0, 0, 0)
	nodes := []*v1.Node{node("n1")}
	objs := []runtime.Object{nodes[0], appPDB("web", 4, 3, 1).Obj()}
	for _, p := range pods {
		objs = append(objs, p)
	}
	cs := clientsetfake.NewClientset(objs...)
	return &profilesEnv{ctx: ctx, cs: cs, factory: informers.NewSharedInformerFactory(cs, 0), snapshot: internalcache.NewSnapshot(pods, nodes), pods: pods}
}

// plugin builds the plugin with New, as kube-scheduler does for a profile.
func (e *profilesEnv) plugin(t *testing.T, opts ...frameworkruntime.Option) *BudgetAwarePreemption {
	t.Helper()
	pl, err := New(e.ctx, nil, newFramework(e.ctx, t, e.cs, e.factory, e.snapshot, opts...))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return pl.(*BudgetAwarePreemption)
}

func (e *profilesEnv) start(t *testing.T, pl *BudgetAwarePreemption) {
	t.Helper()
	e.factory.Start(e.ctx.Done())
	e.factory.WaitForCacheSync(e.ctx.Done())
	if !pl.budgets.WaitForCacheSync(e.ctx) {
		t.Fatal("the budget cache did not sync")
	}
}

// TestProfilesShareOneBudgetCache: kube-scheduler calls New once per
// profile, on one informer factory. A disruption one profile reserved is
// seen by the other, which may not spend the budget's one allowed
// disruption again, as it could with a cache and a ledger of its own.
func TestProfilesShareOneBudgetCache(t *testing.T) {
	e := newProfilesEnv(t)
	first, second := e.plugin(t), e.plugin(t)
	e.start(t, first)

	d, r := first.budgets.Reserve(e.pods[0], budget.OperationDelete)
	if !d.Allowed || r == nil {
		t.Fatalf("the first profile's reservation of %s: %s, want it allowed", e.pods[0].Name, d.Message())
	}
	defer r.Cancel()
	if d := second.budgets.Decide(e.pods[1], budget.OperationDelete); d.Allowed {
		t.Errorf("the second profile may delete %s too (%s); the PDB allows 1 disruption and the first profile holds it", e.pods[1].Name, d.Message())
	}
	if first.budgets != second.budgets {
		t.Error("the two profiles have two budget caches")
	}
}

// podActivator records the pods a framework activates.
type podActivator chan map[string]*v1.Pod

func (a podActivator) Activate(_ klog.Logger, pods map[string]*v1.Pod) { a <- pods }

// TestPostFilterAnswersAtOnceBeforeTheCacheSyncs: before the budget cache
// has synced, PostFilter does not wait in the scheduling cycle (waiting
// there would hold the whole scheduling loop): it answers
// Unschedulable, naming the reason, and the pod is activated once the cache
// has synced.
func TestPostFilterAnswersAtOnceBeforeTheCacheSyncs(t *testing.T) {
	e := newProfilesEnv(t)
	activated := make(podActivator, 1)
	pl := e.plugin(t, frameworkruntime.WithPodActivator(activated))
	p := preemptor("1", 100)

	m := framework.NewDefaultNodeToStatus()
	m.Set("n1", fwk.NewStatus(fwk.Unschedulable, "Insufficient cpu"))
	_, status := pl.PostFilter(e.ctx, framework.NewCycleState(), p, m)
	if status.Code() != fwk.Unschedulable || !strings.Contains(status.Message(), "budget cache not synced") {
		t.Fatalf("PostFilter before the cache synced = %v %q, want Unschedulable, budget cache not synced", status.Code(), status.Message())
	}
	select {
	case got := <-activated:
		t.Fatalf("activated %v before the cache synced", got)
	default:
	}

	e.start(t, pl)
	select {
	case got := <-activated:
		if got[p.Namespace+"/"+p.Name] == nil {
			t.Errorf("activated %v, want %s/%s", got, p.Namespace, p.Name)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the preemptor was not activated after the budget cache synced")
	}
}

// kube-scheduler hands plugins a protobuf config; the Kruise client must not
// inherit it, or every PUB status write fails to encode.
func TestKruiseConfigSpeaksJSON(t *testing.T) {
	in := &rest.Config{Host: "https://example.invalid", ContentConfig: rest.ContentConfig{
		ContentType:        "application/vnd.kubernetes.protobuf",
		AcceptContentTypes: "application/vnd.kubernetes.protobuf,application/json",
	}}
	got := kruiseConfig(in)
	if got.ContentType != "application/json" || got.AcceptContentTypes != "application/json" {
		t.Errorf("kruiseConfig: content type %q, accept %q; want application/json for both", got.ContentType, got.AcceptContentTypes)
	}
	if in.ContentType != "application/vnd.kubernetes.protobuf" {
		t.Errorf("kruiseConfig changed the scheduler's own config: content type %q", in.ContentType)
	}
	if got.Host != in.Host {
		t.Errorf("kruiseConfig: host %q, want %q", got.Host, in.Host)
	}
}
