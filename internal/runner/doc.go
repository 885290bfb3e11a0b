// Package runner executes a sandbox scenario once: it starts the in-process
// control plane from package sandbox with kube-apiserver's audit log on, runs
// kube-scheduler in-process and the descheduler on demand, carries out the
// scenario's steps, and returns what the independent auditor saw together with
// budgetguard's own refusals. cmd/sandbox runs it once per mode, and checks
// each run against the scenario's expect block with Unmet.
//
// budgetguard's refusals come from three places: the scheduler's blocked
// preemptions from its counter (once per preemptor per cycle); the
// descheduler's from BudgetAwareEvictor's log entries, read through the
// descheduler's logger, because only they name the pod and the sentence
// (once per pod per loop; see deschedulerRefusals); and each preemptor's
// events from a watcher on the scheduler's event broadcaster, before it
// merges repeats.
//
// In ModeBudgetguard the components use the scenario's scheduler configuration
// and descheduler policy as written (BudgetAwarePreemption, BudgetAwareEvictor).
// In ModeUpstream the same files are rewritten to the stock plugins
// (DefaultPreemption, DefaultEvictor) first; see UpstreamSchedulerConfig and
// UpstreamPolicy.
package runner
