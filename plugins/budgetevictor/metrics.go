package budgetevictor

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/budgetguard/budgetguard/plugins/budget"
)

// subsystem names the plugin's metrics: budgetguard_evictor_<what>_<unit>.
const subsystem = "evictor"

// Reasons of refusals that are not budget decisions. Budget refusals use the
// stable codes of budget.Reason.
const (
	// ReasonSafeToEvictFalse: the pod carries
	// cluster-autoscaler.kubernetes.io/safe-to-evict: "false".
	ReasonSafeToEvictFalse = "SafeToEvictFalse"
	// ReasonNodeBeingDrainedByAutoscaler: the pod's node carries
	// cluster-autoscaler's ToBeDeletedByClusterAutoscaler taint; the
	// autoscaler is draining it and evicts the pod itself.
	ReasonNodeBeingDrainedByAutoscaler = "NodeBeingDrainedByAutoscaler"
	// ReasonPUBRecordFailed: the disruption of a pod that spends a
	// PodUnavailableBudget could not be recorded in the PUB's status, so
	// the eviction was not sent.
	ReasonPUBRecordFailed = "PUBRecordFailed"
	// ReasonCacheNotSynced: the budget cache did not sync in time, so no
	// decision could be trusted.
	ReasonCacheNotSynced = "CacheNotSynced"
	// ReasonEvictedEarlierInDryRun: in a dry run, an earlier loop
	// predicted this pod's eviction, and the budget it spent still counts
	// it; the descheduler restored the pod, but a real run would find it
	// gone.
	ReasonEvictedEarlierInDryRun = "EvictedEarlierInDryRun"
)

const (
	extensionFilter            = "Filter"
	extensionPreEvictionFilter = "PreEvictionFilter"
)

var (
	evictionsRefused = metrics.NewCounterVec(
		&metrics.CounterOpts{
			Namespace:      budget.MetricsNamespace,
			Subsystem:      subsystem,
			Name:           "evictions_refused_total",
			Help:           "Pods BudgetAwareEvictor refused to let the descheduler evict, by extension point and reason.",
			StabilityLevel: metrics.ALPHA,
		},
		[]string{"extension_point", "reason"},
	)
	reservations = metrics.NewCounter(
		&metrics.CounterOpts{
			Namespace:      budget.MetricsNamespace,
			Subsystem:      subsystem,
			Name:           "budget_reservations_total",
			Help:           "Evictions BudgetAwareEvictor allowed that spend a disruption budget and were reserved in the ledger.",
			StabilityLevel: metrics.ALPHA,
		},
	)
	registerOnce sync.Once
)

// RegisterMetrics registers the plugin's metrics in the legacy registry the
// descheduler serves on /metrics. It is safe to call more than once.
func RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(evictionsRefused, reservations)
	})
}
