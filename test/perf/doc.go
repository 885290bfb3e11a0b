//go:build perf

// Package perf measures budgetguard at cluster scale: upstream's
// scheduler_perf (k8s.io/kubernetes/test/integration/scheduler_perf) with
// BudgetAwarePreemption against DefaultPreemption in the same run, and one
// descheduling loop of the real descheduler over the sandbox's control
// plane with and without BudgetAwareEvictor. Every file carries the build tag
// perf, so `go test ./...` and `make test` never build it; `make perf` runs it
// (docs/performance.md has the figures and the commands). Nothing here
// asserts a time: the benchmarks report figures, and fail only when a run
// was not what it claims to measure.
package perf
