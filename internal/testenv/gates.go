package testenv

import "strings"

// The Kubernetes 1.37 feature gates the tests turn on, in one place: the
// gang package's control plane, the promise tests' -gangs and the shipped
// scheduler's gang test take them from here.
const (
	// GangGate turns on workload-aware (gang) scheduling and preemption
	// (beta in 1.37, off by default).
	GangGate = "GenericWorkload=true"
	// ResizePreemptionGate turns on preemption for a deferred in-place
	// resize (alpha in 1.37).
	ResizePreemptionGate = "InPlacePodVerticalScalingSchedulerPreemption=true"
	// PodGroupAPI is kube-apiserver's flag that serves PodGroups
	// (scheduling.k8s.io/v1beta1, off by default as a beta API).
	PodGroupAPI = "--runtime-config=scheduling.k8s.io/v1beta1=true"
)

// FeatureGates is the --feature-gates flag that turns gates on, for
// kube-apiserver (whose test server copies them into the process) or a
// component's command line.
func FeatureGates(gates ...string) string {
	return "--feature-gates=" + strings.Join(gates, ",")
}
