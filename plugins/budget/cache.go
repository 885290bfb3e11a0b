package budget

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	kruiseinformers "github.com/openkruise/kruise-api/client/informers/externalversions"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// The versions of the API that serves PodUnavailableBudgets: v1beta1 is
// OpenKruise's current (stored) version, v1alpha1 the one older releases
// serve alone.
const (
	PUBGroupVersion        = "policy.kruise.io/v1alpha1"
	PUBGroupVersionV1beta1 = "policy.kruise.io/v1beta1"
)

// Options configure a Cache.
type Options struct {
	// Ledger bounds how long reservations hold budgets.
	Ledger LedgerOptions
	// Clock is the time source; nil means the real clock.
	Clock clock.PassiveClock
	// KruiseInformers, when set, feeds PodUnavailableBudgets at
	// policy.kruise.io/v1alpha1. The caller starts it, as it starts the
	// core factory.
	KruiseInformers kruiseinformers.SharedInformerFactory
	// PUBv1beta1, when set, is where the Cache lists and watches
	// PodUnavailableBudgets at policy.kruise.io/v1beta1, which it prefers
	// where served; the Cache runs that informer itself.
	PUBv1beta1 *PUBv1beta1Source
	// Discovery, when set, is asked whether podunavailablebudgets is
	// served at v1beta1 (with PUBv1beta1), else at v1alpha1 (with
	// KruiseInformers); when neither is (a 404, or a successful answer
	// without the resource), PUB support is off, with one log line. Any
	// other answer (an error) leaves the Cache unsynced until discovery
	// answers: a fault never turns protection off. Without Discovery, the
	// preferred version is trusted.
	Discovery discovery.DiscoveryInterface
	// PUBDiscoveryInterval is how often the Cache asks Discovery again
	// while PodUnavailableBudgets are not served; when they become served,
	// PUB support turns on without a restart. While discovery fails, the
	// Cache is not synced and asks again sooner (from 500 ms, doubling up
	// to 5 s). Zero means DefaultPUBDiscoveryInterval.
	PUBDiscoveryInterval time.Duration
	// WorkloadInformers, when set, feeds the ReplicaSets, Deployments and
	// StatefulSets that resolve PUB targetRefs, in place of the core
	// factory (the descheduler's dry run hands plugins a fake cluster that
	// holds pods and PDBs but no workloads). The caller starts it.
	WorkloadInformers informers.SharedInformerFactory
}

// DefaultPUBDiscoveryInterval is how often a Cache without PUB support asks
// whether the API has become served.
const DefaultPUBDiscoveryInterval = 30 * time.Second

// Cache answers budget decisions from informer state. It is safe for
// concurrent use.
type Cache struct {
	logger klog.Logger
	clock  clock.PassiveClock

	replicaSets  appslisters.ReplicaSetLister
	deployments  appslisters.DeploymentLister
	statefulSets appslisters.StatefulSetLister
	syncMu       sync.Mutex
	synced       []toolscache.InformerSynced

	mu   sync.RWMutex
	pdbs *selectorIndex[*pdbEntry]
	// pubs is whether PodUnavailableBudgets are taken into account
	// (pubapi.go): unknown until discovery answers, then off or on.
	// Written under mu; read without it by HasSynced.
	pubs atomic.Int32
	// pubFault is the last discovery error while pubs is unknown.
	pubFault error
	// onPUBs are called once PUB support turns on (see OnPUBSupport).
	onPUBs []func()
	// pubInformer and pubVersion: the informer PUBs come from, and its
	// group and version, once PUB support is on.
	pubInformer toolscache.SharedIndexInformer
	pubVersion  string
	// pubBeta is the v1beta1 client of Options.PUBv1beta1, if any.
	pubBeta        rest.Interface
	pubsBySelector *selectorIndex[*PUB]
	pubsByTarget   map[targetKey]map[string]*PUB
	pubsByName     map[podKey]*PUB
	// versions is the resourceVersion of the latest event handled per budget.
	versions map[budgetKey]string

	ledger *ledger
	// live counts each budget's healthy pods as the pod informer has
	// them (live.go); podLister lists a namespace's pods to count again.
	live      *liveIndex
	podLister corelisters.PodLister
	// liveOn turns on once every informer has delivered its initial list
	// and every pod was counted (countAllOnce); until then the live count
	// is partial and decisions use the status alone.
	liveOn atomic.Bool
	// firstCount counts every pod against every budget once all the
	// informers have delivered their initial lists (countAllOnce);
	// recountsOn turns on the event handlers' recounts then. recounts is
	// how many recounts ran (for tests).
	firstCount sync.Once
	recountsOn atomic.Bool
	recounts   atomic.Int64
}

// New registers the Cache's informers on factory (and on
// opts.KruiseInformers) and returns it. The caller starts the factories and
// waits for WaitForCacheSync before relying on decisions.
func New(ctx context.Context, factory informers.SharedInformerFactory, opts Options) (*Cache, error) {
	if factory == nil {
		return nil, errors.New("budget cache: a shared informer factory is required")
	}
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	c := &Cache{
		logger:         klog.FromContext(ctx).WithName("budget"),
		clock:          clk,
		pdbs:           newSelectorIndex[*pdbEntry](),
		pubsBySelector: newSelectorIndex[*PUB](),
		pubsByTarget:   map[targetKey]map[string]*PUB{},
		pubsByName:     map[podKey]*PUB{},
		versions:       map[budgetKey]string{},
		ledger:         newLedger(opts.Ledger, clk),
		live:           newLiveIndex(),
	}
	if opts.PUBv1beta1 != nil {
		c.pubBeta = opts.PUBv1beta1.Client
	}

	pods, pdbs, rs, deploy, sts := informersOf(factory, opts)
	c.replicaSets, c.deployments, c.statefulSets = rs.Lister(), deploy.Lister(), sts.Lister()
	c.podLister = corelisters.NewPodLister(pods.GetIndexer())

	handlers := []struct {
		inf toolscache.SharedIndexInformer
		h   toolscache.ResourceEventHandler
	}{
		{pods, toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.onPod(obj, false) },
			UpdateFunc: func(_, obj any) { c.onPod(obj, false) },
			DeleteFunc: func(obj any) { c.onPod(obj, true) },
		}},
		{pdbs, toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.onPDB(obj, false) },
			UpdateFunc: func(_, obj any) { c.onPDB(obj, false) },
			DeleteFunc: func(obj any) { c.onPDB(obj, true) },
		}},
	}
	c.synced = append(c.synced, rs.Informer().HasSynced, deploy.Informer().HasSynced, sts.Informer().HasSynced)
	// A PUB's targetRef covers the pods of a workload: a workload that
	// appears or goes changes which pods it covers (see live.go).
	for _, inf := range []toolscache.SharedIndexInformer{rs.Informer(), deploy.Informer(), sts.Informer()} {
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    c.onWorkload,
			UpdateFunc: c.onWorkloadUpdate,
			DeleteFunc: c.onWorkload,
		}); err != nil {
			return nil, fmt.Errorf("budget cache: adding event handler: %w", err)
		}
	}

	pubSource := opts.KruiseInformers != nil || opts.PUBv1beta1 != nil
	if !pubSource {
		c.pubs.Store(pubOff)
		c.logger.V(2).Info("PodUnavailableBudget support is off: no Kruise informer factory or v1beta1 client given")
	}
	for _, x := range handlers {
		reg, err := x.inf.AddEventHandler(x.h)
		if err != nil {
			return nil, fmt.Errorf("budget cache: adding event handler: %w", err)
		}
		c.synced = append(c.synced, reg.HasSynced)
	}
	if pubSource {
		c.followPUBAPI(ctx, opts)
	}
	go func() {
		_ = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
			return c.countAllOnce(), nil
		})
	}()
	return c, nil
}

// RegisterInformers requests from factory (and opts.WorkloadInformers) every
// informer New will use, so that a caller which builds the Cache only later,
// after the factory has started, finds them started and synced.
func RegisterInformers(factory informers.SharedInformerFactory, opts Options) {
	informersOf(factory, opts)
}

func informersOf(factory informers.SharedInformerFactory, opts Options) (pods, pdbs toolscache.SharedIndexInformer, rs appsinformers.ReplicaSetInformer, deploy appsinformers.DeploymentInformer, sts appsinformers.StatefulSetInformer) {
	workloads := factory
	if opts.WorkloadInformers != nil {
		workloads = opts.WorkloadInformers
	}
	rs, deploy, sts = workloads.Apps().V1().ReplicaSets(), workloads.Apps().V1().Deployments(), workloads.Apps().V1().StatefulSets()
	// Listers register their informers too.
	_, _, _ = rs.Informer(), deploy.Informer(), sts.Informer()
	return factory.Core().V1().Pods().Informer(), factory.Policy().V1().PodDisruptionBudgets().Informer(), rs, deploy, sts
}

// Run sweeps ended reservations every interval until ctx ends (decisions
// ignore ended reservations without it; it bounds memory, and calls the
// released hooks for ends no timer saw), and counts every budget's healthy
// pods again (see live.go).
func (c *Cache) Run(ctx context.Context, interval time.Duration) {
	wait.UntilWithContext(ctx, func(context.Context) {
		c.ledger.sweepAll()
		// Coverage that follows workloads (a PUB's targetRef) changes
		// without a budget event.
		c.recount("")
		c.settleLiveAll()
	}, interval)
}

// InFlight is the number of reservations held (for metrics and tests).
func (c *Cache) InFlight() int { return c.ledger.size() }

// Budgets returns how many budgets of each kind are indexed.
func (c *Cache) Budgets() map[BudgetKind]int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	pubs := len(c.pubsByName)
	return map[BudgetKind]int{KindPDB: c.pdbs.len(), KindPUB: pubs}
}

// ObservedResourceVersion returns the resourceVersion of the latest version
// of a budget that decisions use, and false when the Cache knows no such
// budget. It lets diagnostics and tests tell whether a decision was made on
// the same state as the API server's.
func (c *Cache) ObservedResourceVersion(kind BudgetKind, namespace, name string) (string, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	v, ok := c.versions[budgetKey{kind, namespace, name}]
	return v, ok
}
