// Package budgetevictor is the descheduler evictor plugin "BudgetAwareEvictor".
//
// It asks budgetguard's budget cache (plugins/budget) before the descheduler
// calls the Eviction API: Filter drops pods that can never be evicted (several
// PDBs, an unknown unhealthy-pod eviction policy, cluster-autoscaler's
// safe-to-evict "false"), and PreEvictionFilter reserves the budget an
// eviction spends, so later pods of the same loop see the reduced budget and
// the strategy picks other pods instead of collecting 429s.
//
// The descheduler does not tell an evictor plugin whether the eviction it
// allowed then happened, so a reservation ends through the ledger's rules:
// at once when the budget's status counts the pod, and after the ledger's
// ReservationTTL (5 s) when the pod is still there and not terminating.
//
// Some strategies (RemoveDuplicates, RemovePodsHavingTooManyRestarts,
// PodLifeTime) call PreEvictionFilter while they list candidates rather
// than right before each eviction. The node-utilization strategies call it
// right before the eviction, where a reservation is exact. Under a listing
// strategy a reservation may be taken for a pod the strategy then keeps
// (RemoveDuplicates keeps one pod per node): that errs on the safe side,
// evicting fewer pods than the budget allows in that loop, never more.
package budgetevictor
