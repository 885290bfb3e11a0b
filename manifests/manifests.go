// Package manifests embeds the shipped configuration files that programs need
// at run time, so that a binary such as cmd/sandbox works from any directory.
// The files themselves stay where operators find them: manifests/scheduler,
// manifests/descheduler and manifests/descheduler-cronjob, each a kustomization
// that `kubectl apply -k` applies, and manifests/krew, the kubectl plugin's
// krew manifest.
package manifests

import "embed"

// Files holds every shipped manifest under manifests/, by its path below
// manifests/ (e.g. "scheduler/rbac.yaml").
//
//go:embed scheduler/*.yaml descheduler/*.yaml descheduler-cronjob/*.yaml crds/*.yaml krew/*.yaml
var Files embed.FS

// SchedulerConfig is manifests/scheduler/scheduler-config.yaml, the shipped
// KubeSchedulerConfiguration: kube-scheduler's default-scheduler profile plus
// budgetguard-scheduler, which uses BudgetAwarePreemption.
//
//go:embed scheduler/scheduler-config.yaml
var SchedulerConfig []byte

// DeschedulerPolicy is manifests/descheduler/policy.yaml, the shipped
// DeschedulerPolicy (v1alpha2) with DefaultEvictor and BudgetAwareEvictor.
//
//go:embed descheduler/policy.yaml
var DeschedulerPolicy []byte
