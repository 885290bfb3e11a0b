package kubectl

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/budgetguard/budgetguard/internal/kubectlplugin"
	"github.com/budgetguard/budgetguard/internal/testenv"
	"github.com/budgetguard/budgetguard/internal/testobj"
)

// result is one run of kubectl-budgetguard.
type result struct {
	out, errOut string
	code        int
}

// kubectl runs kubectl-budgetguard in this process with args, against the
// shared control plane through a kubeconfig file, as kubectl would run it,
// as the cluster's administrator.
func kubectl(t *testing.T, args ...string) result {
	t.Helper()
	return kubectlWith(t, testenv.WriteKubeconfig(t, cp.Config), args...)
}

// kubectlWith runs kubectl-budgetguard with args and --kubeconfig kubeconfig.
func kubectlWith(t *testing.T, kubeconfig string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	args = append(args, "--kubeconfig", kubeconfig)
	code := kubectlplugin.Execute(testenv.Context(t), args, genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	return result{out: out.String(), errOut: errOut.String(), code: code}
}

// expect checks the exit code and compares the output, made stable by
// stable, with testdata/name (rewritten with -update).
func expect(t *testing.T, r result, code int, name string, stable func(string) string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit code %d, want %d; stderr: %s\nstdout:\n%s", r.code, code, r.errOut, r.out)
	}
	got := stable(r.out)
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read the golden file (run with -update to create it): %v", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want,+got):\n%s", path, diff)
	}
}

// stabilizer replaces the test's namespace, its nodes' and the named
// workloads' generated name suffixes with fixed text, so that golden files
// do not change from run to run. Replacements keep the length, so that
// table columns stay aligned as they were printed.
func stabilizer(ns string, workloads ...string) func(string) string {
	res := []*regexp.Regexp{regexp.MustCompile(regexp.QuoteMeta(ns) + `-node-[a-z0-9]{5}`)}
	for _, w := range workloads {
		res = append(res, regexp.MustCompile(`\b`+regexp.QuoteMeta(w)+`-[a-z0-9]{5}\b`))
	}
	nsRE := regexp.MustCompile(`\b` + regexp.QuoteMeta(ns) + `\b`)
	return func(s string) string {
		for _, re := range res {
			s = re.ReplaceAllStringFunc(s, func(m string) string { return m[:len(m)-5] + "xxxxx" })
		}
		return nsRE.ReplaceAllStringFunc(s, func(m string) string { return m[:len(m)-5] + "xxxxx" })
	}
}

// barePods creates bare pods name-0 .. name-(n-1) labelled app=name on node
// with annotations and waits until they run with the readiness they ask for.
func barePods(t *testing.T, ns, node, name string, n int, annotations map[string]string) {
	t.Helper()
	for i := range n {
		pod := env.CreatePod(t, ns, testobj.BoundPod(node).Name(fmt.Sprintf("%s-%d", name, i)).Label("app", name).Annotations(annotations))
		ready := annotations[readiness] == ""
		testenv.WaitFor(t, testenv.DefaultWait, "pod "+pod.Name+" running", env.PodRunningReady(ns, pod.Name, ready))
	}
}

// pdbStatus waits until the disruption controller has written the PDB's
// status with these numbers.
func pdbStatus(t *testing.T, ns, name string, healthy, desired, allowed, expected int32) {
	t.Helper()
	testenv.WaitFor(t, testenv.DefaultWait, "status of pdb "+name, env.PDBStatusIs(ns, name, policyv1.PodDisruptionBudgetStatus{
		CurrentHealthy: healthy, DesiredHealthy: desired, DisruptionsAllowed: allowed, ExpectedPods: expected,
	}))
}

// overlappingPDBs makes the seeds' overlapping pair over n Ready pods of app
// in ns: a PDB "app" (minAvailable 1) and "all" (selector {}, minAvailable 1),
// and waits for both statuses. "all" is made only once the disruption
// controller has counted every pod of "app" healthy: for a pod under several
// PDBs the controller requeues one of them only (getPdbForPod picks the
// first), so had "all" been synced before its informer saw the last pod
// Ready, no pod event would bring "all" up to date.
func overlappingPDBs(t *testing.T, ns, app string, n int32) {
	t.Helper()
	env.CreatePDB(t, ns, testobj.MakePDB().Name(app).MatchLabels("app", app).MinAvailable(1))
	pdbStatus(t, ns, app, n, 1, n-1, n)
	env.CreatePDB(t, ns, testobj.MakePDB().Name("all").Selector(&metav1.LabelSelector{}).MinAvailable(1))
	pdbStatus(t, ns, "all", n, 1, n-1, n)
}

// namespaceWithNode creates the test's namespace, dumped when the test
// fails, and a Ready node of its own.
func namespaceWithNode(t *testing.T) (ns, node string) {
	t.Helper()
	ns = env.NewNamespace(t)
	env.DumpOnFailure(t, ns)
	return ns, env.ReadyNode(t, ns, "4")
}
