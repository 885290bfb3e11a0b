// Package budgetevictor is the descheduler evictor plugin "BudgetAwareEvictor".
//
// It asks budgetguard's budget cache (plugins/budget) before the descheduler
// calls the Eviction API: Filter drops pods that can never be evicted (several
// PDBs, an unknown unhealthy-pod eviction policy, cluster-autoscaler's
// safe-to-evict "false"), and PreEvictionFilter reserves the budget an
// eviction spends, so later pods of the same loop see the reduced budget and
// the strategy picks other pods instead of collecting 429s.
package budgetevictor
