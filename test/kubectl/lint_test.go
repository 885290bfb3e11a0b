package kubectl

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	kruisebeta "github.com/budgetguard/budgetguard/apis/kruise/policy/v1beta1"
	"github.com/budgetguard/budgetguard/internal/kubectlplugin"
	"github.com/budgetguard/budgetguard/internal/testenv"
	"github.com/budgetguard/budgetguard/internal/testobj"
	"github.com/budgetguard/budgetguard/plugins/budget"
)

// TestMaxUnavailableOverBarePods: maxUnavailable over pods without a
// controller. The disruption controller expects 0 pods and allows no
// disruption; lint reports the design as an error, and "why" says that an
// integer minAvailable, not more healthy pods, would change the answer.
func TestMaxUnavailableOverBarePods(t *testing.T) {
	ns, node := namespaceWithNode(t)
	barePods(t, ns, node, "db", 2, nil)
	env.CreatePDB(t, ns, testobj.MakePDB().Name("db").MatchLabels("app", "db").MaxUnavailable(1))
	pdbStatus(t, ns, "db", 2, 0, 0, 0)
	stable := stabilizer(ns)

	expect(t, kubectl(t, "why", "db-0", "-n", ns), 0, "why-barepods.txt", stable)
	// kubectl's TYPE/NAME: the same answer.
	expect(t, kubectl(t, "why", "pod/db-0", "-n", ns), 0, "why-barepods.txt", stable)
	expect(t, kubectl(t, "lint", "-n", ns), kubectlplugin.ExitFindings, "lint-barepods.txt", stable)
}

// TestSelectorsAndPUBs: a PDB whose selector matches no pod, a PDB without
// a selector, a PUB that covers nothing ("rel" covers only through the
// annotation, so it is not reported); pods under a PDB and a PUB, and
// under two PUBs (by selector, by targetRef and by the related-pub
// annotation).
func TestSelectorsAndPUBs(t *testing.T) {
	ns, node := namespaceWithNode(t)
	tmpl := testobj.BoundPod(node).Label("app", "web").Annotation(budget.AnnotationRelatedPUB, "rel").Template()
	env.CreateReplicaSet(t, ns, testobj.MakeReplicaSet().Name("web").Replicas(3).Template(tmpl))
	pods := env.WaitForReadyPods(t, ns, map[string]string{"app": "web"}, 3)
	env.CreatePDB(t, ns, testobj.MakePDB().Name("web").MatchLabels("app", "web").MinAvailable(1))
	env.CreatePDB(t, ns, testobj.MakePDB().Name("ghost").MatchLabels("app", "ghost").MinAvailable(1))
	env.CreatePDB(t, ns, testobj.MakePDB().Name("unset").MinAvailable(1))
	env.CreatePUB(t, ns, testobj.MakePUB().Name("sel").MatchLabels("app", "web").MaxUnavailable(intstr.FromInt32(1)))
	env.CreatePUB(t, ns, testobj.MakePUB().Name("tgt").TargetRef("apps/v1", "ReplicaSet", "web").MaxUnavailable(intstr.FromInt32(1)))
	env.CreatePUB(t, ns, testobj.MakePUB().Name("rel").MatchLabels("app", "nothing").MaxUnavailable(intstr.FromInt32(1)))
	env.CreatePUB(t, ns, testobj.MakePUB().Name("empty").MatchLabels("app", "empty").MaxUnavailable(intstr.FromInt32(1)))
	pdbStatus(t, ns, "web", 3, 1, 2, 3)
	for _, name := range []string{"sel", "tgt"} {
		testenv.WaitFor(t, testenv.DefaultWait, "status of pub "+name, env.PUBStatusIs(ns, name, 3, 2, 1))
	}
	for _, name := range []string{"rel", "empty"} {
		testenv.WaitFor(t, testenv.DefaultWait, "status of pub "+name, env.PUBStatusIs(ns, name, 0, 0, 0))
	}
	stable := stabilizer(ns, "web")

	expect(t, kubectl(t, "why", pods[0].Name, "-n", ns), 0, "why-pubs.txt", stable)
	expect(t, kubectl(t, "lint", "-n", ns, "-o", "yaml"), 0, "lint-selectors.yaml", stable)
	expect(t, kubectl(t, "lint", "-n", ns, "-o", "name"), 0, "lint-selectors-names.txt", stable)

	// -A lints every namespace: this one and the overlapping pair of
	// another, whose error makes lint exit 1.
	other := env.NewNamespace(t)
	barePods(t, other, node, "api", 2, nil)
	overlappingPDBs(t, other, "api", 2)
	stableBoth := func(s string) string { return stabilizer(other)(stable(s)) }
	expect(t, kubectl(t, "lint", "-A"), kubectlplugin.ExitFindings, "lint-all.txt", stableBoth)
	// -o name keeps each object's namespace, which kubectl's leaves out.
	expect(t, kubectl(t, "lint", "-A", "-o", "name"), kubectlplugin.ExitFindings, "lint-all-names.txt", stableBoth)
}

// TestLintWording: a PDB with selector {} in a namespace without pods is
// said to select every pod of the namespace (it read `selector ""`); the
// fix for maxUnavailable: 0 is about maxUnavailable; one pod under two PDBs
// is "1 pod is covered".
func TestLintWording(t *testing.T) {
	empty := env.NewNamespace(t)
	env.DumpOnFailure(t, empty)
	env.CreatePDB(t, empty, testobj.MakePDB().Name("all").Selector(&metav1.LabelSelector{}).MinAvailable(1))
	pdbStatus(t, empty, "all", 0, 1, 0, 0)
	expect(t, kubectl(t, "lint", "-n", empty), 0, "lint-empty-selector.txt", stabilizer(empty))

	ns, node := namespaceWithNode(t)
	tmpl := testobj.BoundPod(node).Label("app", "api").Template()
	env.CreateReplicaSet(t, ns, testobj.MakeReplicaSet().Name("api").Replicas(1).Template(tmpl))
	env.WaitForReadyPods(t, ns, map[string]string{"app": "api"}, 1)
	env.CreatePDB(t, ns, testobj.MakePDB().Name("api").MatchLabels("app", "api").MaxUnavailable(0))
	pdbStatus(t, ns, "api", 1, 1, 0, 1)
	// Made once the first is counted, as overlappingPDBs does.
	env.CreatePDB(t, ns, testobj.MakePDB().Name("api-too").MatchLabels("app", "api").MinAvailable(1))
	pdbStatus(t, ns, "api-too", 1, 1, 0, 1)
	expect(t, kubectl(t, "lint", "-n", ns), kubectlplugin.ExitFindings, "lint-wording.txt", stabilizer(ns, "api"))
}

// TestMissingPod: a pod that does not exist is a failure (3), not a usage error.
func TestMissingPod(t *testing.T) {
	ns := env.NewNamespace(t)
	r := kubectl(t, "why", "nope", "-n", ns)
	if r.code != kubectlplugin.ExitFailed || !strings.Contains(r.errOut, `"nope" not found`) {
		t.Errorf("exit code %d, stderr %q; want %d and not found", r.code, r.errOut, kubectlplugin.ExitFailed)
	}
}

// TestPUBDenies: a PodUnavailableBudget by targetRef with no unavailability
// left denies an eviction and a preemption delete with InsufficientBudget,
// and one more available pod would change that.
func TestPUBDenies(t *testing.T) {
	ns, node := namespaceWithNode(t)
	tmpl := testobj.BoundPod(node).Label("app", "api").Template()
	env.CreateReplicaSet(t, ns, testobj.MakeReplicaSet().Name("api").Replicas(2).Template(tmpl))
	pods := env.WaitForReadyPods(t, ns, map[string]string{"app": "api"}, 2)
	env.CreatePUB(t, ns, testobj.MakePUB().Name("api").TargetRef("apps/v1", "ReplicaSet", "api").MaxUnavailable(intstr.FromInt32(0)))
	testenv.WaitFor(t, testenv.DefaultWait, "status of pub api", env.PUBStatusIs(ns, "api", 2, 2, 0))

	expect(t, kubectl(t, "why", pods[0].Name, "-n", ns), 0, "why-pub-denied.txt", stabilizer(ns, "api"))
}

// TestPUBProtectingEvictionOnly: a PodUnavailableBudget of
// policy.kruise.io/v1beta1 whose spec.protectOperations lists EVICT alone,
// with no unavailability left, denies an eviction; a delete it leaves
// free, in its DELETE column and in the preemption-delete decision, as
// OpenKruise's webhook does.
func TestPUBProtectingEvictionOnly(t *testing.T) {
	ns, node := namespaceWithNode(t)
	tmpl := testobj.BoundPod(node).Label("app", "api").Template()
	env.CreateReplicaSet(t, ns, testobj.MakeReplicaSet().Name("api").Replicas(2).Template(tmpl))
	pods := env.WaitForReadyPods(t, ns, map[string]string{"app": "api"}, 2)
	env.CreatePUBv1beta1(t, testobj.MakePUB().Namespace(ns).Name("api").TargetRef("apps/v1", "ReplicaSet", "api").MaxUnavailable(intstr.FromInt32(0)).Obj(),
		func(s *kruisebeta.PodUnavailableBudgetSpec) {
			s.ProtectOperations = []kruisebeta.PubOperation{kruisebeta.PubEvictOperation}
		})
	testenv.WaitFor(t, testenv.DefaultWait, "status of pub api", env.PUBStatusIs(ns, "api", 2, 2, 0))

	expect(t, kubectl(t, "why", pods[0].Name, "-n", ns), 0, "why-pub-evict-only.txt", stabilizer(ns, "api"))
}
