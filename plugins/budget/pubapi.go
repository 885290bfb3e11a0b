package budget

import (
	"context"
	"fmt"
	kruiseclientset "github.com/openkruise/kruise-api/client/clientset/versioned"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	kruisepolicy "github.com/budgetguard/budgetguard/apis/kruise/policy/v1beta1"
)

// Following the PodUnavailableBudget API.
//
// OpenKruise serves PUBs at policy.kruise.io/v1beta1 (stored) and v1alpha1;
// older releases at v1alpha1 alone. The Cache reads v1beta1 where discovery
// lists it and it was given a v1beta1 client (Options.PUBv1beta1), and
// v1alpha1 otherwise, and holds every PUB in the v1beta1 shape either way.
//
// Whether PUBs are taken into account is known only once discovery has
// answered. Only "not served" turns support off: a 404 for the group and
// version, or a successful answer that lists no podunavailablebudgets, for
// each version the Cache can read. Any other answer (a 503 from an API server that is starting, an aggregated
// API that is down, a timeout) tells nothing, so the Cache stays unsynced
// and both plugins refuse, naming the fault (NotSynced), until discovery
// answers. A Cache that decided without PUBs while they exist would let
// every PUB-protected pod go.

// The states of PUB support (Cache.pubs).
const (
	pubUnknown int32 = iota // discovery has not answered: not synced
	pubOff                  // the API is not served
	pubOn                   // PUBs are taken into account
)

// pubRetryFloor is the first wait before discovery is asked again after an
// error; each further error doubles it, up to pubRetryCap (or
// PUBDiscoveryInterval, when shorter): every disruption is refused
// meanwhile, so the wait stays short.
const (
	pubRetryFloor = 500 * time.Millisecond
	pubRetryCap   = 5 * time.Second
)

// Reasons the Cache is not synced (NotSynced).
const (
	// NotSyncedDiscovery: discovery has not said whether
	// PodUnavailableBudgets are served (it failed, or has not answered).
	NotSyncedDiscovery = "DiscoveryFailed"
	// NotSyncedInformers: an informer has not delivered its initial list.
	NotSyncedInformers = "InformersNotSynced"
)

// followPUBAPI asks discovery whether PUBs are served, turns PUB support on
// or off from the answer, and keeps asking (see above) until they are
// served: OpenKruise installed after budgetguard, or a discovery error that
// passed, needs no restart.
func (c *Cache) followPUBAPI(ctx context.Context, opts Options) {
	interval := opts.PUBDiscoveryInterval
	if interval <= 0 {
		interval = DefaultPUBDiscoveryInterval
	}
	if c.askPUBAPI(ctx, opts, interval, false) {
		return
	}
	go func() {
		wait := min(pubRetryFloor, interval)
		for {
			next := interval
			c.mu.RLock()
			failing := c.pubFault != nil
			c.mu.RUnlock()
			if failing {
				next = wait
				wait = min(2*wait, pubRetryCap, interval)
			} else {
				wait = min(pubRetryFloor, interval)
			}
			t := time.NewTimer(next)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			if c.askPUBAPI(ctx, opts, interval, true) {
				return
			}
		}
	}()
}

// askPUBAPI asks discovery once and acts on the answer; it reports whether
// PUB support is on (nothing more to ask). start: the caller has started
// the Kruise factory already (see enablePUBs).
func (c *Cache) askPUBAPI(ctx context.Context, opts Options, interval time.Duration, start bool) bool {
	version, err := pubServedVersion(opts.Discovery, opts.PUBv1beta1 != nil, opts.KruiseInformers != nil)
	switch {
	case err == nil && version != "":
		c.enablePUBs(ctx, opts, version, start)
		return true
	case err != nil:
		c.mu.Lock()
		state, first := c.pubs.Load(), c.pubFault == nil
		if state == pubUnknown {
			c.pubFault = err
		}
		c.mu.Unlock()
		if state != pubUnknown {
			// Not served, last we knew; an error does not change that.
			c.logger.V(2).Info("Cannot tell whether PodUnavailableBudgets are served", "group", "policy.kruise.io", "err", err)
		} else if first {
			c.logger.Info("Budget cache not synced: discovery of PodUnavailableBudgets failed; every disruption is refused until it answers", "group", "policy.kruise.io", "err", err)
		} else {
			c.logger.V(2).Info("Discovery of PodUnavailableBudgets failed again", "group", "policy.kruise.io", "err", err)
		}
	default:
		c.mu.Lock()
		was := c.pubs.Load()
		c.pubs.Store(pubOff)
		c.pubFault = nil
		c.mu.Unlock()
		if was != pubOff {
			c.logger.Info("PodUnavailableBudget support is off: the API is not served; asking again", "group", "policy.kruise.io", "interval", interval)
		}
	}
	return false
}

// enablePUBs registers the Cache's PUB handler on an informer of version
// and turns PUB support on. Until the PUB informer has delivered its initial
// list, HasSynced is false, so the plugins refuse rather than decide without
// the PUBs. A v1alpha1 informer is opts.KruiseInformers', which start
// starts (the caller started the factory before the PUB informer existed);
// a v1beta1 one is the Cache's own, which runs until ctx ends.
func (c *Cache) enablePUBs(ctx context.Context, opts Options, version string, start bool) {
	var inf toolscache.SharedIndexInformer
	if version == PUBGroupVersionV1beta1 {
		src := opts.PUBv1beta1
		lw := toolscache.NewListWatchFromClient(src.Client, "podunavailablebudgets", src.Namespace, fields.Everything())
		inf = toolscache.NewSharedIndexInformer(lw, &kruisepolicy.PodUnavailableBudget{}, 0,
			toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	} else {
		inf = opts.KruiseInformers.Policy().V1alpha1().PodUnavailableBudgets().Informer()
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.onPUB(obj, false) },
		UpdateFunc: func(_, obj any) { c.onPUB(obj, false) },
		DeleteFunc: func(obj any) { c.onPUB(obj, true) },
	})
	if err != nil {
		// Served, but not watched: deciding without PUBs would let every
		// PUB-protected pod go, so the Cache stays unsynced.
		c.mu.Lock()
		c.pubFault = fmt.Errorf("cannot watch PodUnavailableBudgets: %w", err)
		c.mu.Unlock()
		c.logger.Error(err, "Budget cache not synced: cannot watch PodUnavailableBudgets")
		return
	}
	c.syncMu.Lock()
	c.synced = append(c.synced, reg.HasSynced)
	c.syncMu.Unlock()
	c.mu.Lock()
	c.pubInformer, c.pubVersion = inf, version
	c.pubs.Store(pubOn)
	c.pubFault = nil
	hooks := c.onPUBs
	c.onPUBs = nil
	c.mu.Unlock()
	for _, fn := range hooks {
		fn()
	}
	switch {
	case version == PUBGroupVersionV1beta1:
		go inf.RunWithContext(ctx)
	case start:
		opts.KruiseInformers.Start(ctx.Done())
	}
	c.logger.Info("PodUnavailableBudget support is on", "groupVersion", version)
}

// pubServedVersion returns the version of the PUB API the Cache reads:
// v1beta1 when beta (the Cache has a v1beta1 client) and discovery lists it,
// else v1alpha1 when alpha and discovery lists it; "" without an error only
// when neither is served. An error of discovery for either version says
// nothing, and is returned. Without discovery the preferred one is trusted.
func pubServedVersion(d discovery.DiscoveryInterface, beta, alpha bool) (string, error) {
	for _, v := range []struct {
		gv   string
		want bool
	}{{PUBGroupVersionV1beta1, beta}, {PUBGroupVersion, alpha}} {
		if !v.want {
			continue
		}
		served, err := pubServed(d, v.gv)
		if err != nil {
			return "", fmt.Errorf("discovery of %s failed: %w", v.gv, err)
		}
		if served {
			return v.gv, nil
		}
	}
	return "", nil
}

// pubServed reports whether discovery lists podunavailablebudgets in gv:
// false without an error only when it is not served.
func pubServed(d discovery.DiscoveryInterface, gv string) (bool, error) {
	if d == nil {
		return true, nil
	}
	list, err := d.ServerResourcesForGroupVersion(gv)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, err
	}
	for _, r := range list.APIResources {
		if r.Name == "podunavailablebudgets" {
			return true, nil
		}
	}
	return false, nil
}

// HasSynced reports whether discovery has said whether PUBs are served,
// and every informer the Cache uses has synced and delivered its initial
// events to the Cache.
func (c *Cache) HasSynced() bool {
	if c.pubs.Load() == pubUnknown {
		return false
	}
	return c.countAllOnce()
}

// NotSynced says why the Cache is not synced: a reason (NotSyncedDiscovery,
// NotSyncedInformers) and a message naming the fault, for the plugins'
// refusals, events and metrics; empty when it is synced.
func (c *Cache) NotSynced() (reason, message string) {
	c.mu.RLock()
	state, fault := c.pubs.Load(), c.pubFault
	c.mu.RUnlock()
	switch {
	case state == pubUnknown && fault != nil:
		return NotSyncedDiscovery, fault.Error()
	case state == pubUnknown:
		return NotSyncedDiscovery, "discovery of PodUnavailableBudgets has not answered yet"
	case !c.HasSynced():
		return NotSyncedInformers, "the informers have not delivered their initial lists yet"
	}
	return "", ""
}

// WaitForCacheSync blocks until HasSynced or ctx ends.
func (c *Cache) WaitForCacheSync(ctx context.Context) bool {
	return toolscache.WaitForCacheSync(ctx.Done(), c.HasSynced)
}

// OnPUBSupport calls fn once PUB support is on: at once if it is, or when
// it turns on (the API became served). A caller that watches PUBs itself
// registers its handler on PUBInformer in fn, so it follows the cache.
func (c *Cache) OnPUBSupport(fn func()) {
	c.mu.Lock()
	if c.pubs.Load() != pubOn {
		c.onPUBs = append(c.onPUBs, fn)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	fn()
}

// PUBEnabled reports whether PodUnavailableBudgets are taken into account.
func (c *Cache) PUBEnabled() bool { return c.pubs.Load() == pubOn }

// PUBInformer is the informer the Cache reads PUBs from (its objects are
// v1beta1 or kruise-api v1alpha1 PodUnavailableBudgets: PUBOf reads
// either), and PUBVersion the group and version it serves; nil and "" until
// PUB support is on.
func (c *Cache) PUBInformer() toolscache.SharedIndexInformer {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.pubInformer
}

// PUBVersion: see PUBInformer.
func (c *Cache) PUBVersion() string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.pubVersion
}

// PUBv1beta1Source is where a Cache lists and watches policy.kruise.io/v1beta1
// PodUnavailableBudgets: a REST client of that group and version
// (NewPUBv1beta1Client), in one namespace or all ("").
type PUBv1beta1Source struct {
	Client    rest.Interface
	Namespace string
}

// NewPUBv1beta1Client returns a REST client for policy.kruise.io/v1beta1 on
// cfg, speaking JSON (custom resources have no protobuf).
func NewPUBv1beta1Client(cfg *rest.Config) (rest.Interface, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.GroupVersion = &kruisepolicy.GroupVersion
	cfg.APIPath = "/apis"
	cfg.ContentType = "application/json"
	cfg.AcceptContentTypes = "application/json"
	cfg.NegotiatedSerializer = pubCodecs.WithoutConversion()
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	return rest.RESTClientFor(cfg)
}

var pubCodecs = func() serializer.CodecFactory {
	s := runtime.NewScheme()
	utilruntime.Must(kruisepolicy.AddToScheme(s))
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	return serializer.NewCodecFactory(s)
}()

// PUBStatusClient is where to write PUB status records: the version the
// Cache reads (v1beta1, on its own client), else v1alpha1 on alpha. See
// PUBStatusClient (the type) for why the version matters.
func (c *Cache) PUBStatusClient(alpha kruiseclientset.Interface) PUBStatusClient {
	c.mu.RLock()
	beta := c.pubVersion == PUBGroupVersionV1beta1
	c.mu.RUnlock()
	if beta && c.pubBeta != nil {
		return PUBStatusClientV1beta1(c.pubBeta)
	}
	return PUBStatusClientV1alpha1(alpha)
}
