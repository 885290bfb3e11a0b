// Package schedulerconfig loads a KubeSchedulerConfiguration as
// kube-scheduler does (strict decoding, defaulting, its own validation) and
// checks what kube-scheduler cannot know about budgetguard: the
// BudgetAwarePreemption args of every profile, a profile where
// DefaultPreemption still runs beside BudgetAwarePreemption, and one that
// configures BudgetAwarePreemption without enabling it at postFilter. The
// scheduler binary (cmd/scheduler) and the sandbox (internal/runner) both
// load and check through it, before any client or plugin is built, and
// report per profile where BudgetAwarePreemption runs (budget.ReportProfile).
//
// Which plugins run at postFilter follows kube-scheduler's v1 defaulting
// (pkg/scheduler/apis/config/v1/default_plugins.go, mergePlugins) and the
// framework's multiPoint expansion (pkg/scheduler/framework/runtime,
// expandMultiPointPlugins).
package schedulerconfig
