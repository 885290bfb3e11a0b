package budgetevictor

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/utils/ptr"
	frameworkfake "sigs.k8s.io/descheduler/pkg/framework/fake"

	"github.com/budgetguard/budgetguard/internal/testenv"
	"github.com/budgetguard/budgetguard/internal/testobj"
	"github.com/budgetguard/budgetguard/plugins/budget"
)

const ns = "shop"

// webPod is a running, ready pod of app web in ns on node n1, with UID
// "uid-"+name.
func webPod(name string) *testobj.PodWrapper {
	return testobj.RunningPod(ns, name).Label("app", "web").Node("n1")
}

// webPDB is a PDB in ns that selects app web, with maxUnavailable 1 and an
// up-to-date status: 3 healthy pods, allowed disruptions allowed.
func webPDB(name string, allowed int32) *testobj.PDBWrapper {
	return testobj.MakePDB().Namespace(ns).Name(name).UID("uid-pdb-"+name).Generation(1).MatchLabels("app", "web").MaxUnavailable(1).Status(3, 3-allowed, allowed)
}

// newPlugin builds the plugin the way the descheduler does, on a fake
// client holding objs, and starts the informers.
func newPlugin(t *testing.T, args *BudgetAwareEvictorArgs, opts Options, objs ...runtime.Object) *BudgetAwareEvictor {
	t.Helper()
	client := fake.NewClientset(objs...)
	return pluginOn(t, args, opts, client, client)
}

// pluginOn builds the plugin on a handle whose informers list from client
// and whose clientset, the one the descheduler evicts with, is evictClient,
// and starts the informers.
func pluginOn(t *testing.T, args *BudgetAwareEvictorArgs, opts Options, client *fake.Clientset, evictClient kubernetes.Interface) *BudgetAwareEvictor {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactory(client, 0)
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	handle := &frameworkfake.HandleImpl{ClientsetImpl: evictClient, SharedInformerFactoryImpl: factory}
	if args == nil {
		args = &BudgetAwareEvictorArgs{}
	}
	pl, err := NewBuilder(opts)(ctx, args, handle)
	if err != nil {
		t.Fatalf("NewBuilder: %v", err)
	}
	factory.Start(ctx.Done())
	p := pl.(*BudgetAwareEvictor)
	if !cacheOf(t, p).WaitForCacheSync(ctx) {
		t.Fatal("budget cache did not sync")
	}
	return p
}

func TestFilter(t *testing.T) {
	tests := []struct {
		name   string
		args   *BudgetAwareEvictorArgs
		pod    *v1.Pod
		objs   []runtime.Object
		want   bool
		reason string
	}{
		{name: "no budget", pod: webPod("a").Obj(), want: true},
		{name: "budget exhausted still passes Filter", pod: webPod("a").Obj(), objs: []runtime.Object{webPDB("web", 0).Obj()}, want: true},
		{
			name:   "several PDBs",
			pod:    webPod("a").Obj(),
			objs:   []runtime.Object{webPDB("web", 1).Obj(), webPDB("web2", 1).Obj()},
			reason: string(budget.ReasonMultiplePDBs),
		},
		{
			name:   "unknown unhealthy-pod policy on a not-ready pod",
			pod:    webPod("a").Ready(false).Obj(),
			objs:   []runtime.Object{webPDB("web", 1).UnhealthyPodEvictionPolicy("Sometimes").Obj()},
			reason: string(budget.ReasonUnknownUnhealthyPodEvictionPolicy),
		},
		{
			name: "unknown policy on a ready pod is a budget question, not a filter one",
			pod:  webPod("a").Obj(),
			objs: []runtime.Object{webPDB("web", 1).UnhealthyPodEvictionPolicy("Sometimes").Obj()},
			want: true,
		},
		{
			name:   "safe-to-evict false",
			pod:    webPod("a").Annotation(budget.AnnotationSafeToEvict, "false").Obj(),
			reason: ReasonSafeToEvictFalse,
		},
		{
			name: "safe-to-evict false, not honored",
			args: &BudgetAwareEvictorArgs{HonorSafeToEvict: ptr.To(false)},
			pod:  webPod("a").Annotation(budget.AnnotationSafeToEvict, "false").Obj(),
			want: true,
		},
		{
			name: "safe-to-evict true is just a pod",
			pod:  webPod("a").Annotation(budget.AnnotationSafeToEvict, "true").Obj(),
			want: true,
		},
		{
			name: "PDB of other pods",
			pod:  webPod("a").Label("app", "db").Obj(),
			objs: []runtime.Object{webPDB("web", 0).Obj()},
			want: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPlugin(t, tt.args, Options{}, tt.objs...)
			var before float64
			if tt.reason != "" {
				before = counter(t, extensionFilter, tt.reason)
			}
			if got := p.Filter(tt.pod); got != tt.want {
				t.Fatalf("Filter() = %v, want %v", got, tt.want)
			}
			if tt.reason != "" {
				if got := counter(t, extensionFilter, tt.reason) - before; got != 1 {
					t.Errorf("refusals with reason %s grew by %v, want 1", tt.reason, got)
				}
			}
		})
	}
}

func counter(t *testing.T, point, reason string) float64 {
	t.Helper()
	v, err := testutil.GetCounterMetricValue(evictionsRefused.WithLabelValues(point, reason))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestPreEvictionFilterFreeDisruptions(t *testing.T) {
	tests := []struct {
		name string
		pod  *v1.Pod
		pdb  *policyv1.PodDisruptionBudget
		want bool
	}{
		{name: "AlwaysAllow not-ready pod with budget 0", pod: webPod("a").Ready(false).Obj(), pdb: webPDB("web", 0).UnhealthyPodEvictionPolicy(policyv1.AlwaysAllow).Obj(), want: true},
		{name: "IfHealthyBudget not-ready pod, app disrupted", pod: webPod("a").Ready(false).Obj(), pdb: webPDB("web", 0).UnhealthyPodEvictionPolicy(policyv1.IfHealthyBudget).Status(1, 2, 0).ExpectedPods(3).Obj(), want: false},
		{name: "ready pod, budget 0", pod: webPod("a").Obj(), pdb: webPDB("web", 0).Obj(), want: false},
		{name: "stale status", pod: webPod("a").Obj(), pdb: webPDB("web", 1).Generation(2).Obj(), want: false},
		{name: "safe-to-evict false with budget", pod: webPod("a").Annotation(budget.AnnotationSafeToEvict, "false").Obj(), pdb: webPDB("web", 3).Obj(), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPlugin(t, nil, Options{}, tt.pdb)
			if got := p.PreEvictionFilter(tt.pod); got != tt.want {
				t.Fatalf("PreEvictionFilter() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestUnsyncedCacheRefuses(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset()
	// The factory is never started, so the cache never syncs.
	handle := &frameworkfake.HandleImpl{ClientsetImpl: client, SharedInformerFactoryImpl: informers.NewSharedInformerFactory(client, 0)}
	pl, err := New(ctx, &BudgetAwareEvictorArgs{CacheSyncTimeoutSeconds: ptr.To[int32](1)}, handle)
	if err != nil {
		t.Fatal(err)
	}
	p := pl.(*BudgetAwareEvictor)
	before := counter(t, extensionFilter, ReasonCacheNotSynced) + counter(t, extensionPreEvictionFilter, ReasonCacheNotSynced)
	if p.Filter(webPod("a").Obj()) {
		t.Error("Filter allowed a pod without a synced budget cache")
	}
	if p.PreEvictionFilter(webPod("a").Obj()) {
		t.Error("PreEvictionFilter allowed a pod without a synced budget cache")
	}
	after := counter(t, extensionFilter, ReasonCacheNotSynced) + counter(t, extensionPreEvictionFilter, ReasonCacheNotSynced)
	if after-before != 2 {
		t.Errorf("CacheNotSynced refusals grew by %v, want 2", after-before)
	}
}

// The budget cache's gauges are on the descheduler's /metrics, labelled
// with the component.
func TestPluginExportsBudgetGauges(t *testing.T) {
	newPlugin(t, nil, Options{}, webPDB("web", 1).Obj(), webPDB("db", 1).Obj())
	gauge := func() float64 {
		v, ok := testenv.Metric(t, "budgetguard_cache_budgets", map[string]string{"component": "descheduler", "kind": string(budget.KindPDB)})
		if !ok {
			return -1
		}
		return v
	}
	// Caches of earlier tests leave the gauge when their context ends,
	// which happens asynchronously.
	var last float64
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		last = gauge()
		return last == 2, nil
	})
	if err != nil {
		t.Fatalf("budgetguard_cache_budgets{component=descheduler,kind=PodDisruptionBudget} = %v, want 2", last)
	}
}

// cacheOf returns the plugin's budget cache, building it as the first
// extension point call would.
func cacheOf(t testing.TB, p *BudgetAwareEvictor) *budget.Cache {
	t.Helper()
	c, err := p.sh.budgets()
	if err != nil {
		t.Fatalf("budget cache: %v", err)
	}
	return c
}
