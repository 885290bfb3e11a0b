package budget

import v1 "k8s.io/api/core/v1"

// AnnotationSafeToEvict is cluster-autoscaler's per-pod annotation. "false"
// means the autoscaler will never drain the pod; budgetguard's plugins then
// never choose it as a victim either, so the components agree. "true" never
// bypasses a budget.
const AnnotationSafeToEvict = "cluster-autoscaler.kubernetes.io/safe-to-evict"

// AutoscalerForbidsEviction reports whether pod carries
// cluster-autoscaler.kubernetes.io/safe-to-evict: "false".
func AutoscalerForbidsEviction(pod *v1.Pod) bool {
	return pod.Annotations[AnnotationSafeToEvict] == "false"
}
