package budget

import (
	"context"
	"sort"
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// MetricsNamespace is the namespace of every budgetguard metric. A metric's
// name is budgetguard_<component>_<what>_<unit>, where the component is the
// metrics' subsystem: "cache" here, "preemption" and "evictor" in the
// plugins.
const MetricsNamespace = "budgetguard"

// metricsSubsystem is the subsystem of the cache's gauges.
const metricsSubsystem = "cache"

// The gauges every component exports (docs/design.md, Gauges): how many
// disruptions the ledger holds, how many budgets of each kind the cache
// indexes, whether PUBs are taken into account, and why the cache is not
// synced. The counters of decisions and refusals belong to the plugins,
// which know the extension point.
var (
	ledgerReservationsDesc = metrics.NewDesc(metrics.BuildFQName(MetricsNamespace, metricsSubsystem, "ledger_reservations"),
		"Disruptions budgetguard has started and reserved in its ledger that no budget status counts yet.",
		[]string{"component"}, nil, metrics.ALPHA, "")
	budgetsDesc = metrics.NewDesc(metrics.BuildFQName(MetricsNamespace, metricsSubsystem, "budgets"),
		"Disruption budgets in budgetguard's cache, by kind (PodDisruptionBudget, PodUnavailableBudget).",
		[]string{"component", "kind"}, nil, metrics.ALPHA, "")
	pubSupportDesc = metrics.NewDesc(metrics.BuildFQName(MetricsNamespace, metricsSubsystem, "pub_support_enabled"),
		"1 when budgetguard takes OpenKruise PodUnavailableBudgets into account, 0 while their API is not served (it is asked again until it is).",
		[]string{"component"}, nil, metrics.ALPHA, "")
	notSyncedDesc = metrics.NewDesc(metrics.BuildFQName(MetricsNamespace, metricsSubsystem, "not_synced"),
		"1 while the budget cache is not synced, by reason (DiscoveryFailed: discovery has not said whether PodUnavailableBudgets are served; InformersNotSynced); both plugins refuse every disruption meanwhile.",
		[]string{"component", "reason"}, nil, metrics.ALPHA, "")
)

// cacheCollector reports the gauges of the caches registered with it, read
// at scrape time and summed per component.
type cacheCollector struct {
	metrics.BaseStableCollector

	mu     sync.Mutex
	caches map[*Cache]string
}

func newCacheCollector() *cacheCollector {
	return &cacheCollector{caches: map[*Cache]string{}}
}

var (
	exported       = newCacheCollector()
	registerGauges sync.Once
)

// ExportMetrics adds the cache's ledger size and budget counts, labelled
// with component, to the legacy registry the component serves on /metrics,
// until ctx ends.
func (c *Cache) ExportMetrics(ctx context.Context, component string) {
	registerGauges.Do(func() { legacyregistry.CustomMustRegister(exported) })
	exported.add(ctx, c, component)
}

func (cc *cacheCollector) add(ctx context.Context, c *Cache, component string) {
	cc.mu.Lock()
	cc.caches[c] = component
	cc.mu.Unlock()
	go func() {
		<-ctx.Done()
		cc.mu.Lock()
		delete(cc.caches, c)
		cc.mu.Unlock()
	}()
}

// DescribeWithStability implements metrics.StableCollector.
func (cc *cacheCollector) DescribeWithStability(ch chan<- *metrics.Desc) {
	ch <- ledgerReservationsDesc
	ch <- budgetsDesc
	ch <- pubSupportDesc
	ch <- notSyncedDesc
}

// CollectWithStability implements metrics.StableCollector.
func (cc *cacheCollector) CollectWithStability(ch chan<- metrics.Metric) {
	type kindKey struct {
		component string
		kind      BudgetKind
	}
	reservations := map[string]int{}
	budgets := map[kindKey]int{}
	pubs := map[string]float64{}
	type reasonKey struct{ component, reason string }
	notSynced := map[reasonKey]bool{}
	cc.mu.Lock()
	for c, component := range cc.caches {
		if reason, _ := c.NotSynced(); reason != "" {
			notSynced[reasonKey{component, reason}] = true
		}
		reservations[component] += c.InFlight()
		if c.PUBEnabled() {
			pubs[component] = 1
		}
		for kind, n := range c.Budgets() {
			budgets[kindKey{component, kind}] += n
		}
	}
	cc.mu.Unlock()
	components := make([]string, 0, len(reservations))
	for component := range reservations {
		components = append(components, component)
	}
	sort.Strings(components)
	for _, component := range components {
		ch <- metrics.NewLazyConstMetric(ledgerReservationsDesc, metrics.GaugeValue, float64(reservations[component]), component)
		ch <- metrics.NewLazyConstMetric(pubSupportDesc, metrics.GaugeValue, pubs[component], component)
		for _, reason := range []string{NotSyncedDiscovery, NotSyncedInformers} {
			v := 0.0
			if notSynced[reasonKey{component, reason}] {
				v = 1
			}
			ch <- metrics.NewLazyConstMetric(notSyncedDesc, metrics.GaugeValue, v, component, reason)
		}
		for _, kind := range []BudgetKind{KindPDB, KindPUB} {
			ch <- metrics.NewLazyConstMetric(budgetsDesc, metrics.GaugeValue, float64(budgets[kindKey{component, kind}]), component, string(kind))
		}
	}
}
