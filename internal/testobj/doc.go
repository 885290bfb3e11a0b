// Package testobj builds the API objects budgetguard's tests use: pods,
// PodDisruptionBudgets, PodUnavailableBudgets, nodes, ReplicaSets,
// Deployments and StatefulSets, plus the scheduler configurations and
// descheduler policies the tests run with. The builders follow the wrappers
// of k8s.io/kubernetes/pkg/scheduler/testing (MakePod().Name(..).Obj()),
// and add the budget builders that package lacks.
//
// A builder starts empty: every field a test relies on is set by a method
// the test calls, so a reader sees it at the call site. Obj returns the
// object; the builder may be reused afterwards, but the object shares its
// maps, so call Obj once per object or DeepCopy. Nothing here talks to an
// API server: package testenv does that.
package testobj
