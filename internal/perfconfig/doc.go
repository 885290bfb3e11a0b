// Package perfconfig writes the workload file that test/perf hands to
// upstream's scheduler_perf (k8s.io/kubernetes/test/integration/scheduler_perf).
//
// Upstream's preemption test cases are taken from its own
// misc/performance-config.yaml unchanged (their ops, templates and
// workloads), with workloads of budgetguard's sizes added; budgetguard's
// budgeted test cases come from test/perf/config/budgets.yaml. Every test case
// then gets the scheduler configuration of the plugin under test and the
// metrics test/perf reports. Template paths are made absolute, so the file
// works from any directory. A malformed input is refused with the file, the
// test case and the op that are wrong, before scheduler_perf starts a
// cluster.
package perfconfig
