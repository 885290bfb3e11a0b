package budgetevictor

import (
	"context"
	"fmt"
	"k8s.io/client-go/rest"
	"strings"
	"sync"
	"sync/atomic"
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
	// PUBv1beta1, when set beside Kruise, returns a client of the real
	// cluster for policy.kruise.io/v1beta1 (budget.NewPUBv1beta1Client),
	// which the cache prefers where it is served.
	PUBv1beta1 func() (rest.Interface, error)
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
	sh          *shared
	syncTimeout time.Duration

	// syncDeadline is when waiting for the cache stops: syncTimeout after
	// the first extension point call, so a cache that never syncs (say,
	// a forbidden list) delays one call, not every pod of every loop.
	syncOnce     sync.Once
	syncDeadline time.Time
}

// sharedCaches are keyed by informer factory, so every profile of one
// descheduler shares one ledger and one set of informer handlers.
var sharedCaches budget.PerFactory[*shared]

// shared is what the profiles of one descheduler share: the budget cache,
// whether the eviction gate is on its client, and the node lister.
//
// The cache is built on first use, not when the plugin is. In a dry run the
// descheduler builds every profile twice, first on the real client and
// factory, then on a fake cluster, and drops the first build; built lazily,
// that first build never starts a cache, a Kruise watch or a sweeper. Its
// gate stays on the real client, which the dry run never evicts with.
type shared struct {
	ctx     context.Context
	logger  klog.Logger
	factory informers.SharedInformerFactory
	opts    Options
	bopts   budget.Options
	// dryRun: the handle's client is the dry run's fake cluster.
	dryRun bool
	gated  bool
	nodes  corelisters.NodeLister
	// nodesSynced reports whether the node informer has synced.
	nodesSynced cache.InformerSynced

	// mu guards building the cache; cache is set once it is built.
	mu     sync.Mutex
	cache  *budget.Cache
	built  atomic.Pointer[budget.Cache]
	kruise kruiseclientset.Interface
	// err is why the cache could not be built last time, tried is when;
	// it is tried again after kruiseRetry (see budgets).
	err   error
	tried time.Time
}

// kruiseRetry is how long after a failed attempt to build the budget cache
// (no client for the Kruise API) the next attempt waits; every eviction is
// refused meanwhile.
const kruiseRetry = 5 * time.Second

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
			sh:          sh,
			syncTimeout: time.Duration(*a.CacheSyncTimeoutSeconds) * time.Second,
		}, nil
	}
}

// sharedFor returns what the profiles on the handle's factory share,
// creating it and putting the eviction gate on the handle's client on first
// use. The descheduler builds plugins before it starts its factory and
// before it evicts, so this only requests the informers the cache will use
// (the descheduler then starts and syncs them with its own) and nothing
// uses the client yet.
func sharedFor(ctx context.Context, handle frameworktypes.Handle, opts Options) (*shared, error) {
	factory := handle.SharedInformerFactory()
	if factory == nil {
		return nil, fmt.Errorf("%s: the handle has no shared informer factory", PluginName)
	}
	return sharedCaches.Get(ctx, factory, func() (*shared, error) { return newShared(ctx, handle, factory, opts), nil })
}

func newShared(ctx context.Context, handle frameworktypes.Handle, factory informers.SharedInformerFactory, opts Options) *shared {
	_, dryRun := handle.ClientSet().(*fake.Clientset)
	sh := &shared{
		ctx:     ctx,
		logger:  klog.FromContext(ctx).WithValues("plugin", PluginName),
		factory: factory,
		opts:    opts,
		dryRun:  dryRun,
		bopts:   budget.Options{Ledger: opts.Ledger},
	}
	// A dry run's disruptions are predicted: nothing will ever record
	// them, and the descheduler restores the "evicted" pods after each
	// loop. The ledger holds each one for as long as the API server's
	// record of a real eviction lasts at most.
	sh.bopts.Ledger.DryRun = dryRun
	if dryRun && opts.Workloads != nil {
		wc, err := opts.Workloads()
		if err != nil {
			sh.logger.Info("Dry run without the real cluster's workloads: PUBs that select pods by targetRef cover nothing", "err", err)
		} else {
			sh.bopts.WorkloadInformers = informers.NewSharedInformerFactory(wc, 0)
		}
	}
	budget.RegisterInformers(factory, sh.bopts)
	nodes := factory.Core().V1().Nodes()
	sh.nodes, sh.nodesSynced = nodes.Lister(), nodes.Informer().HasSynced
	gate := &evictionGate{sh: sh, pods: factory.Core().V1().Pods().Lister(), logger: sh.logger}
	sh.gated = gate.install(handle.ClientSet())
	if !sh.gated {
		sh.logger.Info("The descheduler's client cannot carry the eviction gate; PreEvictionFilter reserves budgets instead, which under listing strategies such as RemoveDuplicates may evict fewer pods than the budgets allow", "client", fmt.Sprintf("%T", handle.ClientSet()))
	}
	return sh
}

// budgets returns the budget cache, building and starting it on the first
// call. While it cannot be built, every call returns why (the callers
// refuse, naming it), and it is tried again kruiseRetry after the last
// attempt.
func (sh *shared) budgets() (*budget.Cache, error) {
	if c := sh.built.Load(); c != nil {
		return c, nil
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.cache != nil {
		return sh.cache, nil
	}
	if sh.err != nil && time.Since(sh.tried) < kruiseRetry {
		return nil, sh.err
	}
	sh.tried = time.Now()
	sh.start()
	return sh.cache, sh.err
}

// start builds and starts the budget cache. Caller holds sh.mu.
func (sh *shared) start() {
	ctx, logger := sh.ctx, sh.logger
	var kf kruiseinformers.SharedInformerFactory
	if sh.opts.Kruise != nil {
		kc, disc, err := sh.opts.Kruise()
		if err != nil {
			// Without a client nobody can tell whether PUBs exist:
			// deciding without them would let every PUB-protected pod
			// go. Refuse until a client can be built.
			if sh.err == nil {
				logger.Info("Budget cache not built: no client for the Kruise API; every eviction is refused until there is one", "err", err, "retry", kruiseRetry)
			}
			sh.err = fmt.Errorf("no client for the Kruise API: %w", err)
			return
		}
		if sh.opts.PUBv1beta1 != nil {
			beta, err := sh.opts.PUBv1beta1()
			if err != nil {
				if sh.err == nil {
					logger.Info("Budget cache not built: no client for the Kruise API v1beta1; every eviction is refused until there is one", "err", err, "retry", kruiseRetry)
				}
				sh.err = fmt.Errorf("no client for the Kruise API v1beta1: %w", err)
				return
			}
			sh.bopts.PUBv1beta1 = &budget.PUBv1beta1Source{Client: beta}
		}
		kf = kruiseinformers.NewSharedInformerFactory(kc, 0)
		sh.bopts.KruiseInformers, sh.bopts.Discovery = kf, disc
		if !sh.dryRun {
			// Used only for disruptions that spend a PUB, so only
			// once PUB support is on (it may turn on later; see
			// budget.Options). A dry run writes nothing.
			sh.kruise = kc
		}
	}
	c, err := budget.New(klog.NewContext(ctx, logger), sh.factory, sh.bopts)
	if err != nil {
		sh.err = fmt.Errorf("%s: %w", PluginName, err)
		logger.Error(err, "Cannot build the budget cache; every eviction is refused")
		return
	}
	sh.err = nil
	c.ExportMetrics(ctx, "descheduler")
	// The descheduler's factory is not ours to start: the informers were
	// requested when the plugin was built, so it starts them. (Had it
	// started before, they would never sync, and every eviction would be
	// refused as CacheNotSynced.)
	if kf != nil {
		kf.Start(ctx.Done())
	}
	if wf := sh.bopts.WorkloadInformers; wf != nil {
		wf.Start(ctx.Done())
	}
	go c.Run(ctx, time.Minute)
	sh.cache = c
	sh.built.Store(c)
}

// Name returns the plugin name.
func (p *BudgetAwareEvictor) Name() string { return PluginName }

// Filter refuses the pods that can never be evicted, whatever the budgets'
// numbers: safe-to-evict "false" (when honored), pods on a node
// cluster-autoscaler is draining, several covering PDBs, or a not-ready pod
// under an unknown unhealthy-pod eviction policy.
func (p *BudgetAwareEvictor) Filter(pod *v1.Pod) bool {
	c, ok := p.checks(extensionFilter, pod)
	if !ok {
		return false
	}
	d := c.Decide(pod, budget.OperationEvict)
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
	// The checks again: the autoscaler may have started draining the
	// node since Filter.
	c, ok := p.checks(extensionPreEvictionFilter, pod)
	if !ok {
		return false
	}
	if p.sh.gated {
		if d := c.Decide(pod, budget.OperationEvict); !d.Allowed {
			return p.refuse(extensionPreEvictionFilter, pod, string(d.Reason()), d.Message())
		}
		return true
	}
	d, r := c.Reserve(pod, budget.OperationEvict)
	if !d.Allowed {
		return p.refuse(extensionPreEvictionFilter, pod, string(d.Reason()), d.Message())
	}
	if r != nil {
		reservations.Inc()
		klog.FromContext(p.ctx).V(3).Info("Reserved disruption budget for eviction", "plugin", PluginName, "pod", klog.KObj(pod), "budgets", d.Spends)
	}
	return true
}

// checks are the refusals Filter and PreEvictionFilter share, before any
// budget arithmetic: safe-to-evict "false", an unsynced cache, a node
// cluster-autoscaler is draining, a pod an earlier loop of a dry run
// evicted. It returns the synced cache, or false once it has refused.
func (p *BudgetAwareEvictor) checks(point string, pod *v1.Pod) (*budget.Cache, bool) {
	if reason, ok := p.autoscalerRefuses(pod); ok {
		return nil, p.refuse(point, pod, reason, "cluster-autoscaler safe-to-evict is \"false\"")
	}
	c, why := p.synced()
	if c == nil {
		return nil, p.refuse(point, pod, ReasonCacheNotSynced, why)
	}
	if p.nodeBeingDrained(pod) {
		return nil, p.refuse(point, pod, ReasonNodeBeingDrainedByAutoscaler, nodeBeingDrainedMessage(pod))
	}
	if refs := evictedEarlier(p.sh, c, pod); refs != "" {
		return nil, p.refuse(point, pod, ReasonEvictedEarlierInDryRun, evictedEarlierMessage(refs))
	}
	return c, true
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
	if pod.Spec.NodeName == "" || p.sh.nodes == nil {
		return false
	}
	node, err := p.sh.nodes.Get(pod.Spec.NodeName)
	return err == nil && budget.NodeBeingRemoved(node)
}

func nodeBeingDrainedMessage(pod *v1.Pod) string {
	return fmt.Sprintf("node %s is being drained by cluster-autoscaler (taint %s)", pod.Spec.NodeName, budget.TaintToBeDeleted)
}

// synced returns the budget cache once it and the node informer have
// synced, waiting until syncTimeout after the first call at the latest; or
// nil and why not.
func (p *BudgetAwareEvictor) synced() (*budget.Cache, string) {
	c, err := p.sh.budgets()
	if err != nil {
		return nil, notSyncedMessage(err.Error())
	}
	if c.HasSynced() && p.nodesHaveSynced() {
		return c, ""
	}
	p.syncOnce.Do(func() { p.syncDeadline = time.Now().Add(p.syncTimeout) })
	ctx, cancel := context.WithDeadline(p.ctx, p.syncDeadline)
	defer cancel()
	if !c.WaitForCacheSync(ctx) {
		_, why := c.NotSynced()
		return nil, notSyncedMessage(why)
	}
	if p.sh.nodesSynced != nil && !cache.WaitForCacheSync(ctx.Done(), p.sh.nodesSynced) {
		return nil, notSyncedMessage("the node informer has not synced")
	}
	return c, ""
}

// notSyncedMessage is the refusal message of an unsynced cache, naming why.
func notSyncedMessage(why string) string {
	if why == "" {
		return "budget cache not synced"
	}
	return "budget cache not synced: " + why
}

func (p *BudgetAwareEvictor) nodesHaveSynced() bool {
	return p.sh.nodesSynced == nil || p.sh.nodesSynced()
}

// evictedEarlier names the budgets an earlier loop of a dry run spent on
// this very pod, which the descheduler has restored since: a real run would
// find the pod gone, so the dry run must not predict its eviction twice.
// Empty outside a dry run.
func evictedEarlier(sh *shared, c *budget.Cache, pod *v1.Pod) string {
	if !sh.dryRun {
		return ""
	}
	refs := c.HeldBy(pod)
	names := make([]string, 0, len(refs))
	for _, r := range refs {
		names = append(names, r.String())
	}
	return strings.Join(names, ", ")
}

func evictedEarlierMessage(budgets string) string {
	return "the dry run predicted this pod's eviction in an earlier loop, which still spends " + budgets
}

func (p *BudgetAwareEvictor) refuse(point string, pod *v1.Pod, reason, message string) bool {
	evictionsRefused.WithLabelValues(point, reason).Inc()
	klog.FromContext(p.ctx).V(2).Info("Eviction refused by budget", "plugin", PluginName, "extensionPoint", point, "pod", klog.KObj(pod), "reason", reason, "message", message)
	return false
}
