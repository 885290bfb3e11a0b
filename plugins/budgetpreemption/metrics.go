package budgetpreemption

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/budgetguard/budgetguard/plugins/budget"
)

// subsystem names the plugin's metrics: budgetguard_preemption_<what>_<unit>.
const subsystem = "preemption"

var (
	blockedTotal = metrics.NewCounterVec(
		&metrics.CounterOpts{
			Namespace:      budget.MetricsNamespace,
			Subsystem:      subsystem,
			Name:           "blocked_total",
			Help:           "Preemption attempts that found no candidate node because a disruption budget denied the victims they needed, by the budget's reason, or that were refused because the budget cache was not synced (CacheNotSynced).",
			StabilityLevel: metrics.ALPHA,
		},
		[]string{"reason"},
	)
	decisionsTotal = metrics.NewCounterVec(
		&metrics.CounterOpts{
			Namespace:      budget.MetricsNamespace,
			Subsystem:      subsystem,
			Name:           "decisions_total",
			Help:           "Budget decisions on potential preemption victims, by result (free, spends, denied) and denial reason.",
			StabilityLevel: metrics.ALPHA,
		},
		[]string{"result", "reason"},
	)
	evictionFailuresTotal = metrics.NewCounterVec(
		&metrics.CounterOpts{
			Namespace:      budget.MetricsNamespace,
			Subsystem:      subsystem,
			Name:           "eviction_failures_total",
			Help:           "Victim evictions the API server refused, by HTTP status code.",
			StabilityLevel: metrics.ALPHA,
		},
		[]string{"code"},
	)
	registerOnce sync.Once
)

// RegisterMetrics registers the plugin's metrics in the legacy registry the
// scheduler serves on /metrics. It is safe to call more than once.
func RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(blockedTotal, decisionsTotal, evictionFailuresTotal)
	})
}
