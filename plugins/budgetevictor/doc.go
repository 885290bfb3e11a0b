// Package budgetevictor is the descheduler evictor plugin BudgetAwareEvictor.
//
// It asks budgetguard's budget cache (plugins/budget) before an eviction
// reaches the API server: Filter drops pods that can never be evicted
// (several PDBs, an unknown unhealthy-pod eviction policy, cluster-autoscaler's
// safe-to-evict "false"), and PreEvictionFilter takes a live decision that
// counts the evictions already reserved, so a strategy picks other pods
// instead of collecting 429s.
//
// The budget is reserved at the eviction request itself, by an eviction gate
// the plugin puts on the client the descheduler hands it (the client its pod
// evictor posts evictions with): a RoundTripper on the policy/v1 REST client
// of a real clientset, or a reactor on the dry run's fake clientset. Each
// eviction request is decided and reserved in the ledger in one step; a
// refused one is answered 429 with the budget's message and is never sent,
// and an allowed one the API server does not accept gives its reservation
// back at once. Reserving at the request rather than in PreEvictionFilter
// matters because RemoveDuplicates, RemovePodsHavingTooManyRestarts and
// PodLifeTime call PreEvictionFilter while they list candidates, including
// pods they then keep.
//
// An eviction the API server accepted holds its reservation until the
// budget's status counts it (see the ledger rules in plugins/budget). When
// the gate cannot be installed (a client of another type), PreEvictionFilter
// reserves instead, and a reservation whose pod is still there ends after
// the ledger's ReservationTTL (5 s).
package budgetevictor
