// Package e2e tests what budgetguard ships, the way a platform team runs it:
// the Helm chart rendered and applied to a real API server (the sandbox's
// in-process kube-apiserver) with server-side apply and strict field
// validation, and bin/scheduler and bin/descheduler built and run as their
// own processes, each authenticated as the chart's ServiceAccount with a
// TokenRequest token, with the chart's rendered configuration and policy
// and leader election on. kube-apiserver's audit log then shows whether the
// chart's RBAC is enough (nothing they did was forbidden) and least
// privilege (what they must not do is forbidden).
package e2e
