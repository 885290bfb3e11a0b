package kubectl

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/budgetguard/budgetguard/internal/kubectlplugin"
	"github.com/budgetguard/budgetguard/internal/testenv"
	"github.com/budgetguard/budgetguard/internal/testobj"
	"github.com/budgetguard/budgetguard/plugins/budget"
	"github.com/budgetguard/budgetguard/sandbox"
)

const readiness = sandbox.ReadinessAnnotation

var crashLoop = map[string]string{readiness: sandbox.ReadinessCrashLoop}

// TestExhaustedPDB: a pod under a PDB with no disruption left is denied for
// an eviction and a preemption delete with InsufficientBudget, "1 more
// healthy pod" would change that; the autoscaler annotation and the node's
// taint are shown; lint finds that minAvailable equals the pods. A pending
// preemptor shows its recorded refusal, the budget it named and that
// cluster-autoscaler considers it for scale-up.
func TestExhaustedPDB(t *testing.T) {
	ns := env.NewNamespace(t)
	env.DumpOnFailure(t, ns)
	node := env.CreateNode(t, ns, testobj.MakeNode().Taint(budget.TaintDeletionCandidate, corev1.TaintEffectPreferNoSchedule))
	barePods(t, ns, node.Name, "web", 2, map[string]string{budget.AnnotationSafeToEvict: "false"})
	env.CreatePDB(t, ns, testobj.MakePDB().Name("web").MatchLabels("app", "web").MinAvailable(2))
	pdbStatus(t, ns, "web", 2, 2, 0, 2)
	stable := stabilizer(ns)

	expect(t, kubectl(t, "why", "web-0", "-n", ns), 0, "why-exhausted.txt", stable)
	expect(t, kubectl(t, "why", "web-0", "-n", ns, "-o", "json"), 0, "why-exhausted.json", stable)
	expect(t, kubectl(t, "why", "web-0", "-n", ns, "-o", "wide"), 0, "why-exhausted-wide.txt", stable)
	// cli-runtime's printers: the budgets by name, a JSONPath.
	want := "poddisruptionbudget.policy/web -n " + ns + "\n"
	if r := kubectl(t, "why", "web-0", "-n", ns, "-o", "name"); r.code != 0 || r.out != want {
		t.Errorf("-o name: exit code %d, stdout %q, stderr %q; want %q", r.code, r.out, r.errOut, want)
	}
	if r := kubectl(t, "why", "web-0", "-n", ns, "-o", "jsonpath={.decisions[*].result}"); r.code != 0 || r.out != "denied denied" {
		t.Errorf("-o jsonpath: exit code %d, stdout %q, stderr %q; want %q", r.code, r.out, r.errOut, "denied denied")
	}
	expect(t, kubectl(t, "lint", "-n", ns), kubectlplugin.ExitFindings, "lint-exhausted.txt", stable)

	// The preemptor: unbound, Unschedulable, with the event the preemption
	// plugin records when the budget refuses.
	pre := env.CreatePod(t, ns, testobj.MakePod().Name("preemptor").Container("app", "100m"))
	refusal := "pdb " + ns + "/web: 2 healthy, 2 desired, 0 disruptions allowed"
	note := "preemption blocked by disruption budgets on 1 node: " + refusal
	pre.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 node(s) where every preemption victim is protected by a disruption budget: " + refusal + "."}}
	if _, err := env.Client.CoreV1().Pods(ns).UpdateStatus(testenv.Context(t), pre, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Create(t, env.Client.CoreV1().Events(ns), &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: "preemptor."},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pre.Name, UID: pre.UID, APIVersion: "v1"},
		Reason:         "PreemptionBlockedByBudget", Message: note, Type: corev1.EventTypeWarning, Count: 2,
		FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(), Source: corev1.EventSource{Component: "default-scheduler"},
	})
	expect(t, kubectl(t, "why", "preemptor", "-n", ns), 0, "why-pending.txt", stable)
	// No budget covers the preemptor; -o name lists the one its refusal
	// names, as the table does (it printed nothing).
	expect(t, kubectl(t, "why", "pod/preemptor", "-n", ns, "-o", "name"), 0, "why-pending-names.txt", stable)
}

// TestOverlappingPDBs is the seeds' overlapping pair: a PDB per app and one
// with selector {} over the same pods. Every eviction and preemption delete
// is denied with MultiplePDBs, and lint reports the pair as an error.
func TestOverlappingPDBs(t *testing.T) {
	ns, node := namespaceWithNode(t)
	barePods(t, ns, node, "web", 3, nil)
	overlappingPDBs(t, ns, "web", 3)
	stable := stabilizer(ns)

	expect(t, kubectl(t, "why", "web-0", "-n", ns), 0, "why-overlap.txt", stable)
	expect(t, kubectl(t, "lint", "-n", ns), kubectlplugin.ExitFindings, "lint-overlap.txt", stable)
}

// TestCrashLoopingPods is the seeds' crash-looping pods: under
// IfHealthyBudget (the default) a crash-looping pod of a disrupted
// application cannot go, and setting AlwaysAllow would let it; under
// AlwaysAllow it goes free. lint warns about the first PDB only.
func TestCrashLoopingPods(t *testing.T) {
	ns, node := namespaceWithNode(t)
	barePods(t, ns, node, "web", 1, nil)
	env.CreatePod(t, ns, testobj.BoundPod(node).Name("web-crash-0").Label("app", "web").Annotations(crashLoop))
	env.CreatePod(t, ns, testobj.BoundPod(node).Name("web-crash-1").Label("app", "web").Annotations(crashLoop))
	barePods(t, ns, node, "api", 2, nil)
	env.CreatePod(t, ns, testobj.BoundPod(node).Name("api-crash-0").Label("app", "api").Annotations(crashLoop))
	env.CreatePDB(t, ns, testobj.MakePDB().Name("web").MatchLabels("app", "web").MinAvailable(2))
	env.CreatePDB(t, ns, testobj.MakePDB().Name("api").MatchLabels("app", "api").MinAvailable(2).UnhealthyPodEvictionPolicy("AlwaysAllow"))
	pdbStatus(t, ns, "web", 1, 2, 0, 3)
	pdbStatus(t, ns, "api", 2, 2, 0, 3)
	for _, p := range []string{"web-crash-0", "web-crash-1", "api-crash-0"} {
		testenv.WaitFor(t, testenv.DefaultWait, p+" in CrashLoopBackOff", crashLooping(ns, p))
	}
	stable := stabilizer(ns)

	expect(t, kubectl(t, "why", "web-crash-0", "-n", ns), 0, "why-crashloop.txt", stable)
	expect(t, kubectl(t, "why", "api-crash-0", "-n", ns, "-o", "yaml"), 0, "why-crashloop-alwaysallow.yaml", stable)
	expect(t, kubectl(t, "lint", "-n", ns), 0, "lint-crashloop.txt", stable)
}

// TestRoleLevelPDB is the seeds' role-level PDB: one PDB with maxUnavailable
// 1 over the pods of two ReplicaSets of one role. The disruption controller
// sums their scale; lint finds nothing, and a pod of either may go,
// spending the role's PDB.
func TestRoleLevelPDB(t *testing.T) {
	ns, node := namespaceWithNode(t)
	for _, name := range []string{"data-a", "data-b"} {
		tmpl := testobj.BoundPod(node).Label("role", "data").Label("app", name).Template()
		env.CreateReplicaSet(t, ns, testobj.MakeReplicaSet().Name(name).Replicas(2).Template(tmpl))
	}
	env.WaitForReadyPods(t, ns, map[string]string{"role": "data"}, 4)
	env.CreatePDB(t, ns, testobj.MakePDB().Name("data").MatchLabels("role", "data").MaxUnavailable(1))
	pdbStatus(t, ns, "data", 4, 3, 1, 4)
	pods := env.WaitForReadyPods(t, ns, map[string]string{"app": "data-b"}, 2)
	stable := stabilizer(ns, "data-a", "data-b")

	expect(t, kubectl(t, "why", pods[0].Name, "-n", ns), 0, "why-role.txt", stable)
	expect(t, kubectl(t, "lint", "-n", ns), 0, "lint-role.txt", stable)
}

// crashLooping holds when a container of the pod waits in CrashLoopBackOff.
func crashLooping(ns, name string) testenv.Condition {
	return func(ctx context.Context) (bool, error) {
		pod, err := env.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, s := range pod.Status.ContainerStatuses {
			if s.State.Waiting != nil && s.State.Waiting.Reason == "CrashLoopBackOff" {
				return true, nil
			}
		}
		return false, fmt.Errorf("pod %s/%s: container statuses %v", ns, name, pod.Status.ContainerStatuses)
	}
}

// TestNodeBeingRemoved: a pod on a node cluster-autoscaler is removing
// (taint ToBeDeletedByClusterAutoscaler) is never a preemption candidate:
// budgetguard's preemption takes no victims there, whatever the budgets say.
func TestNodeBeingRemoved(t *testing.T) {
	ns := env.NewNamespace(t)
	env.DumpOnFailure(t, ns)
	node := env.CreateNode(t, ns, testobj.MakeNode().Taint(budget.TaintToBeDeleted, corev1.TaintEffectNoSchedule))
	barePods(t, ns, node.Name, "web", 1, nil)

	r := kubectl(t, "why", "web-0", "-n", ns)
	if l := lineOf(r.out, "PREEMPTION-DELETE"); strings.Contains(l, "ALLOWED") || !strings.Contains(l, "NOT A CANDIDATE") ||
		!strings.Contains(l, "being removed by cluster-autoscaler") {
		t.Errorf("PREEMPTION-DELETE line %q: want NOT A CANDIDATE, the node being removed by cluster-autoscaler:\n%s", l, r.out)
	}
	expect(t, r, 0, "why-node-removed.txt", stabilizer(ns))
}
