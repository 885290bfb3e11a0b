// Package budget is budgetguard's single source of truth for "may this pod be
// disrupted now, and which disruption budgets does that spend?".
//
// A Cache is fed by informers (pods, PodDisruptionBudgets, ReplicaSets,
// Deployments, StatefulSets and, when the API is served, OpenKruise
// PodUnavailableBudgets), indexes budgets by namespace and label so a lookup
// never scans unrelated budgets, and answers with a Decision that follows the
// Eviction API's rules (pkg/registry/core/pod/storage/eviction.go) plus PUBs
// and the disruptions budgetguard itself has started but the budgets' status
// does not show yet (the ledger). Both the scheduler's preemption plugin and
// the descheduler's evictor call it; neither re-implements budget arithmetic.
package budget
