// Package kubectlplugin is kubectl-budgetguard: "kubectl budgetguard why POD"
// explains the budget decision for one pod, and "kubectl budgetguard lint"
// finds budget designs that break the Eviction API or block disruptions.
//
// It reads a cluster through the usual kubeconfig flags
// (k8s.io/cli-runtime's genericclioptions), fills a budget.Cache from
// informers as the scheduler and descheduler plugins do, and answers with
// budget.Cache.Explain and budget.Cache.Lint: the plugins' own decision code,
// never a copy of it. It writes nothing to the cluster. The output schema of
// -o json and -o yaml is the types in types.go, documented in
// docs/kubectl-plugin.md.
package kubectlplugin
