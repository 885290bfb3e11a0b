// Package sandbox runs a small but real Kubernetes control plane inside the
// current process: embedded etcd, kube-apiserver, the disruption, ReplicaSet,
// Deployment, StatefulSet and namespace controllers (and, with
// Options.GarbageCollector, the garbage collector), and a simulated kubelet. budgetguard's
// integration tests and the cmd/sandbox binary use it to exercise disruption
// budgets against the real apiserver and controllers, without a cluster.
//
// With the PodUnavailableBudget CRD installed, a stand-in for OpenKruise's
// pod webhooks runs too (unless Options.DisablePUBWebhook): kube-apiserver
// calls it over HTTPS on a loopback port, and it ties new pods to their PUB
// and refuses, with kruise's 403, a delete or eviction that a PUB does not
// allow, recording those it admits in the PUB's status.disruptedPods
// (pubwebhook.go decides, pubwebhook_server.go and pubwebhook_handlers.go
// serve). With Options.SimulatePUBStatus a stand-in for kruise's PUB status
// controller writes the PUBs' status (pubstatus.go).
//
// Start brings everything up in one call and Stop tears it down again. Only one
// control plane may run in a process at a time, because kube-apiserver changes
// process-wide feature gates; one after another is fine.
//
// The simulated kubelet makes Nodes Ready and bound Pods Running and Ready. A
// pod can ask for other behaviour with the annotation ReadinessAnnotation
// ("sandbox.budgetguard.io/readiness"):
//
//	ready        Running and Ready (the same as no annotation)
//	never        Running, never Ready
//	after=<d>    Running, Ready once <d> (a Go duration such as 5s) has passed
//	             since the kubelet first saw this value on the pod
//	crashloop    Running, never Ready; the container restarts every
//	             Options.CrashLoopInterval (restartCount rises, state waiting
//	             with reason CrashLoopBackOff)
//
// Any other value is logged once and treated as never. Changing the annotation
// on a live pod takes effect at once. Terminating pods are deleted with a grace
// period of zero, as soon as the kubelet sees them.
//
// The control plane listens on loopback only and is not built for -trimpath
// binaries: kube-apiserver finds its certificate fixtures through
// runtime.Caller.
package sandbox
