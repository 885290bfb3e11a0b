package budgetevictor

import (
	"context"
	"fmt"
	"sync"
	"time"

	kruiseclientset "github.com/openkruise/kruise-api/client/clientset/versioned"
	kruiseinformers "github.com/openkruise/kruise-api/client/informers/externalversions"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"sigs.k8s.io/descheduler/pkg/framework/pluginregistry"
	frameworktypes "sigs.k8s.io/descheduler/pkg/framework/types"

	"github.com/budgetguard/budgetguard/plugins/budget"
)

// PluginName is the name under which the plugin is registered and
// referenced from a DeschedulerPolicy.
const PluginName = "BudgetAwareEvictor"

var _ frameworktypes.EvictorPlugin = &BudgetAwareEvictor{}

// KruiseClients returns the clientset that feeds PodUnavailableBudgets and a
// discovery client of the real cluster that tells whether their API is
// served. In dry-run the descheduler's own client is a fake, so these must
// come from the real cluster.
type KruiseClients func() (kruiseclientset.Interface, discovery.DiscoveryInterface, error)

// Options configure how the plugin builds its budget cache. They are not
// policy args: they carry clients and tuning a binary or a test supplies.
type Options struct {
	// Kruise, when set, turns PodUnavailableBudget support on (if the API
	// is served). Nil means PDBs only.
	Kruise KruiseClients
	// Ledger bounds how long reservations hold budgets; zero values take
	// the budget package's defaults (a reservation whose eviction never
	// happens ends after 5 s).
	Ledger budget.LedgerOptions
	// Workloads, when set, returns a client of the real cluster. In a dry
	// run the descheduler hands plugins a fake cluster with pods, nodes
	// and PDBs but no ReplicaSets, Deployments or StatefulSets; the plugin
	// then reads those from the real cluster, so PUBs that select their
	// pods by targetRef still cover them. Unused outside a dry run.
	Workloads func() (kubernetes.Interface, error)
}

// BudgetAwareEvictor is a descheduler evictor plugin that refuses evictions
// the disruption budgets forbid.
type BudgetAwareEvictor struct {
	// ctx is the context the plugin was built with: the descheduler's
	// extension points take none, and waiting for the cache needs one.
	ctx         context.Context
	args        *BudgetAwareEvictorArgs
	cache       *budget.Cache
	syncTimeout time.Duration
	// gated: the eviction gate sits on the client the descheduler evicts
	// with, so the budget is reserved at the eviction request and
	// PreEvictionFilter only decides. Otherwise PreEvictionFilter reserves.
	gated bool
	// nodes lists the nodes of the handle's factory: a pod on a node
	// cluster-autoscaler is draining is left to the autoscaler.
	nodes       corelisters.NodeLister
	nodesSynced cache.InformerSynced

	// syncDeadline is when waiting for the cache stops: syncTimeout after
	// the first extension point call, so a cache that never syncs (say,
	// a forbidden list) delays one call, not every pod of every loop.
	syncOnce     sync.Once
	syncDeadline time.Time
}

// shared caches are keyed by informer factory, so every profile of one
// descheduler shares one ledger and one set of informer handlers.
var (
	sharedMu     sync.Mutex
	sharedCaches = map[informers.SharedInformerFactory]*shared{}
)

// shared is what the profiles of one descheduler share: the budget cache and
// whether the eviction gate is on its client.
type shared struct {
	cache       *budget.Cache
	gated       bool
	nodes       corelisters.NodeLister
	nodesSynced cache.InformerSynced
}

// New builds the plugin with PDB support only. Binaries that can reach the
// PodUnavailableBudget API use NewBuilder.
func New(ctx context.Context, args runtime.Object, handle frameworktypes.Handle) (frameworktypes.Plugin, error) {
	return NewBuilder(Options{})(ctx, args, handle)
}

// NewBuilder returns the plugin builder for the descheduler registry.
func NewBuilder(opts Options) pluginregistry.PluginBuilder {
	return func(ctx context.Context, args runtime.Object, handle frameworktypes.Handle) (frameworktypes.Plugin, error) {
		a, ok := args.(*BudgetAwareEvictorArgs)
		if !ok {
			return nil, fmt.Errorf("want args of type *%s, got %T", Kind, args)
		}
		a = a.DeepCopy()
		SetDefaultsBudgetAwareEvictorArgs(a)
		if err := validateArgs(a); err != nil {
			return nil, fmt.Errorf("%s: %w", PluginName, err)
		}
		sh, err := sharedFor(ctx, handle, opts)
		if err != nil {
			return nil, err
		}
		RegisterMetrics()
		return &BudgetAwareEvictor{
			ctx:         ctx,
			args:        a,
			cache:       sh.cache,
			gated:       sh.gated,
			nodes:       sh.nodes,
			nodesSynced: sh.nodesSynced,
			syncTimeout: time.Duration(*a.CacheSyncTimeoutSeconds) * time.Second,
		}, nil
	}
}

// sharedFor returns the budget cache of the handle's factory, creating it
// and putting the eviction gate on the handle's client on first use. The
// descheduler builds plugins before it starts its factory and before it
// evicts, so the cache only registers its informers here and nothing uses
// the client yet; the Kruise factory is ours to start.
func sharedFor(ctx context.Context, handle frameworktypes.Handle, opts Options) (*shared, error) {
	factory := handle.SharedInformerFactory()
	if factory == nil {
		return nil, fmt.Errorf("%s: the handle has no shared informer factory", PluginName)
	}
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if sh, ok := sharedCaches[factory]; ok {
		return sh, nil
	}
	logger := klog.FromContext(ctx).WithValues("plugin", PluginName)
	bopts := budget.Options{Ledger: opts.Ledger}
	var kf kruiseinformers.SharedInformerFactory
	var kc kruiseclientset.Interface
	if opts.Kruise != nil {
		var disc discovery.DiscoveryInterface
		var err error
		kc, disc, err = opts.Kruise()
		if err != nil {
			logger.Info("PodUnavailableBudget support is off: no client for the Kruise API", "err", err)
		} else {
			kf = kruiseinformers.NewSharedInformerFactory(kc, 0)
			bopts.KruiseInformers, bopts.Discovery = kf, disc
		}
	}
	var wf informers.SharedInformerFactory
	if _, dryRun := handle.ClientSet().(*fake.Clientset); dryRun && opts.Workloads != nil {
		wc, err := opts.Workloads()
		if err != nil {
			logger.Info("Dry run without the real cluster's workloads: PUBs that select pods by targetRef cover nothing", "err", err)
		} else {
			wf = informers.NewSharedInformerFactory(wc, 0)
			bopts.WorkloadInformers = wf
		}
	}
	c, err := budget.New(klog.NewContext(ctx, logger), factory, bopts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", PluginName, err)
	}
	c.ExportMetrics(ctx, "descheduler")
	if kf != nil {
		kf.Start(ctx.Done())
	}
	if wf != nil {
		wf.Start(ctx.Done())
	}
	gate := &evictionGate{cache: c, pods: factory.Core().V1().Pods().Lister(), logger: logger}
	if _, dryRun := handle.ClientSet().(*fake.Clientset); !dryRun && kf != nil {
		// Used only for disruptions that spend a PUB, so only once PUB
		// support is on (it may turn on later; see budget.Options).
		gate.kruise = kc
	}
	// Registered before the descheduler starts the factory, which then
	// starts and syncs the node informer with the others.
	nodes := factory.Core().V1().Nodes()
	sh := &shared{cache: c, gated: gate.install(handle.ClientSet()), nodes: nodes.Lister(), nodesSynced: nodes.Informer().HasSynced}
	if !sh.gated {
		logger.Info("The descheduler's client cannot carry the eviction gate; PreEvictionFilter reserves budgets instead, which under listing strategies such as RemoveDuplicates may evict fewer pods than the budgets allow", "client", fmt.Sprintf("%T", handle.ClientSet()))
	}
	sharedCaches[factory] = sh
	go c.Run(ctx, time.Minute)
	go func() {
		<-ctx.Done()
		sharedMu.Lock()
		defer sharedMu.Unlock()
		if sharedCaches[factory] == sh {
			delete(sharedCaches, factory)
		}
	}()
	return sh, nil
}

// Name returns the plugin name.
func (p *BudgetAwareEvictor) Name() string { return PluginName }

// Filter refuses the pods that can never be evicted, whatever the budgets'
// numbers: safe-to-evict "false" (when honored), pods on a node
// cluster-autoscaler is draining, several covering PDBs, or a not-ready pod
// under an unknown unhealthy-pod eviction policy.
func (p *BudgetAwareEvictor) Filter(pod *v1.Pod) bool {
	if reason, ok := p.autoscalerRefuses(pod); ok {
		return p.refuse(extensionFilter, pod, reason, "cluster-autoscaler safe-to-evict is \"false\"")
	}
	if !p.synced() {
		return p.refuse(extensionFilter, pod, ReasonCacheNotSynced, "budget cache not synced")
	}
	if p.nodeBeingDrained(pod) {
		return p.refuse(extensionFilter, pod, ReasonNodeBeingDrainedByAutoscaler, nodeBeingDrainedMessage(pod))
	}
	d := p.cache.Decide(pod, budget.OperationEvict)
	for _, den := range d.Denials {
		switch den.Reason {
		case budget.ReasonMultiplePDBs, budget.ReasonUnknownUnhealthyPodEvictionPolicy:
			return p.refuse(extensionFilter, pod, string(den.Reason), den.Message)
		}
	}
	return true
}

// PreEvictionFilter takes a live decision, which counts the evictions
// already reserved, so a strategy that asks right before each eviction (the
// node-utilization ones) picks other pods instead of collecting 429s.
//
// With the eviction gate on the descheduler's client (the normal case), the
// budget is reserved by the gate at the eviction request, so strategies that
// ask while listing candidates (RemoveDuplicates and others) spend nothing
// on the pods they keep. Without the gate, PreEvictionFilter reserves; the
// descheduler does not report whether the eviction then happened, so a
// reservation whose pod is still there ends after the ledger's
// ReservationTTL.
func (p *BudgetAwareEvictor) PreEvictionFilter(pod *v1.Pod) bool {
	if reason, ok := p.autoscalerRefuses(pod); ok {
		return p.refuse(extensionPreEvictionFilter, pod, reason, "cluster-autoscaler safe-to-evict is \"false\"")
	}
	if !p.synced() {
		return p.refuse(extensionPreEvictionFilter, pod, ReasonCacheNotSynced, "budget cache not synced")
	}
	if p.nodeBeingDrained(pod) {
		// The autoscaler may have started draining since Filter.
		return p.refuse(extensionPreEvictionFilter, pod, ReasonNodeBeingDrainedByAutoscaler, nodeBeingDrainedMessage(pod))
	}
	if p.gated {
		if d := p.cache.Decide(pod, budget.OperationEvict); !d.Allowed {
			return p.refuse(extensionPreEvictionFilter, pod, string(d.Reason()), d.Message())
		}
		return true
	}
	d, r := p.cache.Reserve(pod, budget.OperationEvict)
	if !d.Allowed {
		return p.refuse(extensionPreEvictionFilter, pod, string(d.Reason()), d.Message())
	}
	if r != nil {
		reservations.Inc()
		klog.FromContext(p.ctx).V(3).Info("Reserved disruption budget for eviction", "plugin", PluginName, "pod", klog.KObj(pod), "budgets", d.Spends)
	}
	return true
}

func (p *BudgetAwareEvictor) autoscalerRefuses(pod *v1.Pod) (string, bool) {
	if *p.args.HonorSafeToEvict && budget.AutoscalerForbidsEviction(pod) {
		return ReasonSafeToEvictFalse, true
	}
	return "", false
}

// nodeBeingDrained reports whether pod is on a node cluster-autoscaler is
// draining (tainted ToBeDeletedByClusterAutoscaler). The autoscaler evicts
// those pods itself, within the same budgets; evicting them too would
// spend the budgets twice for one disruption. A node the lister does not
// know is not being drained.
func (p *BudgetAwareEvictor) nodeBeingDrained(pod *v1.Pod) bool {
	if pod.Spec.NodeName == "" || p.nodes == nil {
		return false
	}
	node, err := p.nodes.Get(pod.Spec.NodeName)
	return err == nil && budget.NodeBeingRemoved(node)
}

func nodeBeingDrainedMessage(pod *v1.Pod) string {
	return fmt.Sprintf("node %s is being drained by cluster-autoscaler (taint %s)", pod.Spec.NodeName, budget.TaintToBeDeleted)
}

// synced waits for the budget cache and the node informer, until
// syncTimeout after the first call at the latest.
func (p *BudgetAwareEvictor) synced() bool {
	if p.cache.HasSynced() && p.nodesHaveSynced() {
		return true
	}
	p.syncOnce.Do(func() { p.syncDeadline = time.Now().Add(p.syncTimeout) })
	ctx, cancel := context.WithDeadline(p.ctx, p.syncDeadline)
	defer cancel()
	if !p.cache.WaitForCacheSync(ctx) {
		return false
	}
	return p.nodesSynced == nil || cache.WaitForCacheSync(ctx.Done(), p.nodesSynced)
}

func (p *BudgetAwareEvictor) nodesHaveSynced() bool {
	return p.nodesSynced == nil || p.nodesSynced()
}

func (p *BudgetAwareEvictor) refuse(point string, pod *v1.Pod, reason, message string) bool {
	evictionsRefused.WithLabelValues(point, reason).Inc()
	klog.FromContext(p.ctx).V(2).Info("Eviction refused by budget", "plugin", PluginName, "extensionPoint", point, "pod", klog.KObj(pod), "reason", reason, "message", message)
	return false
}
