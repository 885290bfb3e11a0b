package budget

import (
	"context"
	"fmt"
	"time"

	kruiseinformers "github.com/openkruise/kruise-api/client/informers/externalversions"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
	toolscache "k8s.io/client-go/tools/cache"
)

// Following the PodUnavailableBudget API.
//
// Whether PUBs are taken into account is known only once discovery has
// answered. Only "not served" turns support off: a 404 for the group and
// version, or a successful answer that lists no podunavailablebudgets. Any
// other answer (a 503 from an API server that is starting, an aggregated
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
	served, err := pubServed(opts.Discovery)
	switch {
	case err == nil && served:
		c.enablePUBs(ctx, opts.KruiseInformers, start)
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
			c.logger.V(2).Info("Cannot tell whether PodUnavailableBudgets are served", "groupVersion", PUBGroupVersion, "err", err)
		} else if first {
			c.logger.Info("Budget cache not synced: discovery of PodUnavailableBudgets failed; every disruption is refused until it answers", "groupVersion", PUBGroupVersion, "err", err)
		} else {
			c.logger.V(2).Info("Discovery of PodUnavailableBudgets failed again", "groupVersion", PUBGroupVersion, "err", err)
		}
	default:
		c.mu.Lock()
		was := c.pubs.Load()
		c.pubs.Store(pubOff)
		c.pubFault = nil
		c.mu.Unlock()
		if was != pubOff {
			c.logger.Info("PodUnavailableBudget support is off: the API is not served; asking again", "groupVersion", PUBGroupVersion, "interval", interval)
		}
	}
	return false
}

// enablePUBs registers the Cache's PUB handler and turns PUB support on.
// Until the PUB informer has delivered its initial list, HasSynced is false,
// so the plugins refuse rather than decide without the PUBs. start starts
// the Kruise informer (the caller started the factory before the PUB
// informer existed).
func (c *Cache) enablePUBs(ctx context.Context, kf kruiseinformers.SharedInformerFactory, start bool) {
	reg, err := kf.Policy().V1alpha1().PodUnavailableBudgets().Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
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
	c.pubs.Store(pubOn)
	c.pubFault = nil
	hooks := c.onPUBs
	c.onPUBs = nil
	c.mu.Unlock()
	for _, fn := range hooks {
		fn()
	}
	if start {
		kf.Start(ctx.Done())
	}
	c.logger.Info("PodUnavailableBudget support is on", "groupVersion", PUBGroupVersion)
}

// pubServed reports whether discovery lists podunavailablebudgets in
// PUBGroupVersion: false without an error only when the API is not served.
func pubServed(d discovery.DiscoveryInterface) (bool, error) {
	if d == nil {
		return true, nil
	}
	list, err := d.ServerResourcesForGroupVersion(PUBGroupVersion)
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
	c.syncMu.Lock()
	synced := c.synced
	c.syncMu.Unlock()
	for _, s := range synced {
		if !s() {
			return false
		}
	}
	return true
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
		return NotSyncedDiscovery, fmt.Sprintf("discovery of %s failed: %v", PUBGroupVersion, fault)
	case state == pubUnknown:
		return NotSyncedDiscovery, fmt.Sprintf("discovery of %s has not answered yet", PUBGroupVersion)
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
// it turns on (the API became served). A caller that watches the PUB
// informer itself registers its handler in fn, so it follows the cache.
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
