package budgetevictor

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/utils/ptr"
	frameworkfake "sigs.k8s.io/descheduler/pkg/framework/fake"

	"github.com/budgetguard/budgetguard/plugins/budget"
)

const ns = "shop"

type podOpt func(*v1.Pod)

func makePod(name string, opts ...podOpt) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{"app": "web"}},
		Spec:       v1.PodSpec{NodeName: "n1"},
		Status: v1.PodStatus{
			Phase:      v1.PodRunning,
			Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}},
		},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func labels(kv ...string) podOpt {
	return func(p *v1.Pod) {
		p.Labels = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}

func annotation(k, v string) podOpt {
	return func(p *v1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[k] = v
	}
}

func notReady(p *v1.Pod) { p.Status.Conditions[0].Status = v1.ConditionFalse }

type pdbOpt func(*policyv1.PodDisruptionBudget)

func makePDB(name string, allowed int32, opts ...pdbOpt) *policyv1.PodDisruptionBudget {
	p := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-pdb-" + name), Generation: 1},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		},
		Status: policyv1.PodDisruptionBudgetStatus{
			ObservedGeneration: 1,
			DisruptionsAllowed: allowed,
			CurrentHealthy:     3,
			DesiredHealthy:     3 - allowed,
			ExpectedPods:       3,
		},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func policy(pol string) pdbOpt {
	return func(p *policyv1.PodDisruptionBudget) {
		p.Spec.UnhealthyPodEvictionPolicy = ptr.To(policyv1.UnhealthyPodEvictionPolicyType(pol))
	}
}

// newPlugin builds the plugin the way the descheduler does, on a fake
// client holding objs, and starts the informers.
func newPlugin(t *testing.T, args *BudgetAwareEvictorArgs, opts Options, objs ...runtime.Object) *BudgetAwareEvictor {
	t.Helper()
	p, _ := newPluginWith(t, args, opts, nil, objs...)
	return p
}

// newPluginWith is newPlugin whose handle hands out evictClient (the client
// the descheduler would evict with) instead of the fake, when it is set. It
// also returns the fake that feeds the informers.
func newPluginWith(t *testing.T, args *BudgetAwareEvictorArgs, opts Options, evictClient kubernetes.Interface, objs ...runtime.Object) (*BudgetAwareEvictor, *fake.Clientset) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	handle := &frameworkfake.HandleImpl{ClientsetImpl: client, SharedInformerFactoryImpl: factory}
	if evictClient != nil {
		handle.ClientsetImpl = evictClient
	}
	if args == nil {
		args = &BudgetAwareEvictorArgs{}
	}
	pl, err := NewBuilder(opts)(ctx, args, handle)
	if err != nil {
		t.Fatalf("NewBuilder: %v", err)
	}
	factory.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	p := pl.(*BudgetAwareEvictor)
	if !p.cache.WaitForCacheSync(ctx) {
		t.Fatal("budget cache did not sync")
	}
	return p, client
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
		{name: "no budget", pod: makePod("a"), want: true},
		{name: "budget exhausted still passes Filter", pod: makePod("a"), objs: []runtime.Object{makePDB("web", 0)}, want: true},
		{
			name:   "several PDBs",
			pod:    makePod("a"),
			objs:   []runtime.Object{makePDB("web", 1), makePDB("web2", 1)},
			reason: string(budget.ReasonMultiplePDBs),
		},
		{
			name:   "unknown unhealthy-pod policy on a not-ready pod",
			pod:    makePod("a", notReady),
			objs:   []runtime.Object{makePDB("web", 1, policy("Sometimes"))},
			reason: string(budget.ReasonUnknownUnhealthyPodEvictionPolicy),
		},
		{
			name: "unknown policy on a ready pod is a budget question, not a filter one",
			pod:  makePod("a"),
			objs: []runtime.Object{makePDB("web", 1, policy("Sometimes"))},
			want: true,
		},
		{
			name:   "safe-to-evict false",
			pod:    makePod("a", annotation(budget.AnnotationSafeToEvict, "false")),
			reason: ReasonSafeToEvictFalse,
		},
		{
			name: "safe-to-evict false, not honored",
			args: &BudgetAwareEvictorArgs{HonorSafeToEvict: ptr.To(false)},
			pod:  makePod("a", annotation(budget.AnnotationSafeToEvict, "false")),
			want: true,
		},
		{
			name: "safe-to-evict true is just a pod",
			pod:  makePod("a", annotation(budget.AnnotationSafeToEvict, "true")),
			want: true,
		},
		{
			name: "PDB of other pods",
			pod:  makePod("a", labels("app", "db")),
			objs: []runtime.Object{makePDB("web", 0)},
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
		{name: "AlwaysAllow not-ready pod with budget 0", pod: makePod("a", notReady), pdb: makePDB("web", 0, policy("AlwaysAllow")), want: true},
		{name: "IfHealthyBudget not-ready pod, app disrupted", pod: makePod("a", notReady), pdb: func() *policyv1.PodDisruptionBudget {
			p := makePDB("web", 0, policy("IfHealthyBudget"))
			p.Status.CurrentHealthy, p.Status.DesiredHealthy = 1, 2
			return p
		}(), want: false},
		{name: "ready pod, budget 0", pod: makePod("a"), pdb: makePDB("web", 0), want: false},
		{name: "stale status", pod: makePod("a"), pdb: func() *policyv1.PodDisruptionBudget {
			p := makePDB("web", 1)
			p.Generation = 2
			return p
		}(), want: false},
		{name: "safe-to-evict false with budget", pod: makePod("a", annotation(budget.AnnotationSafeToEvict, "false")), pdb: makePDB("web", 3), want: false},
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
	if p.Filter(makePod("a")) {
		t.Error("Filter allowed a pod without a synced budget cache")
	}
	if p.PreEvictionFilter(makePod("a")) {
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
	newPlugin(t, nil, Options{}, makePDB("web", 1), makePDB("db", 1))
	gauge := func() float64 {
		mfs, err := legacyregistry.DefaultGatherer.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "budgetguard_cache_budgets" {
				continue
			}
			for _, m := range mf.GetMetric() {
				l := map[string]string{}
				for _, p := range m.GetLabel() {
					l[p.GetName()] = p.GetValue()
				}
				if l["component"] == "descheduler" && l["kind"] == string(budget.KindPDB) {
					return m.GetGauge().GetValue()
				}
			}
		}
		return -1
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
