// Package budgetpreemption is the kube-scheduler PostFilter plugin
// BudgetAwarePreemption. It is upstream preemption (the Evaluator, Interface
// and Executor of k8s.io/kubernetes/pkg/scheduler/framework/preemption) with
// victims chosen by the shared budget cache of package budget, so that a
// preemption never starts more disruptions than a PodDisruptionBudget or a
// PodUnavailableBudget allows, and with victims evicted through the
// policy/v1 Eviction API by default.
package budgetpreemption
