package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/budgetguard/budgetguard/internal/testenv"
)

// TestQuickStart runs README's quick start as a user would, command by
// command, each as its own process: the binaries built as make build builds
// them, the chart packaged as make chart packages it, `sandbox up`,
// `hack/helm.sh install` of that chart into it (the pinned helm checks the
// chart's kubeVersion against the version the sandbox reports), `sandbox
// run-chart` (the scheduler and descheduler under the release's
// ServiceAccounts, their version the tag of the images the release pulls),
// the two example files applied, a preemption refused with the budget named,
// and `kubectl budgetguard why` naming it too. `kubectl apply` is the one
// step done here through the API (server-side apply, as kubectl apply
// --server-side): kubectl is not among the pinned tools.
func TestQuickStart(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	buildBinaries(t, bin)
	// The building above may take minutes on a cold cache; the steps have
	// their own deadline.
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
	defer cancel()

	version := strings.TrimSpace(runOutput(t, filepath.Join("hack", "version.sh")))
	chartOut := strings.Split(strings.TrimSpace(runOutput(t, filepath.Join("hack", "chart.sh"), filepath.Join(dir, "chart"))), "\n")
	chart := chartOut[len(chartOut)-1]
	if want := "budgetguard-" + strings.TrimPrefix(version, "v") + ".tgz"; filepath.Base(chart) != want {
		t.Fatalf("make chart wrote %s, want %s", chart, want)
	}

	kubeconfig := filepath.Join(dir, "sandbox.kubeconfig")
	up := startProcess(t, "sandbox up", filepath.Join(bin, "sandbox"), "up", "--kubeconfig", kubeconfig)
	up.waitFor(t, 2*time.Minute, "The sandbox control plane is up")

	// The sandbox reports the Kubernetes version it embeds (helm and kubectl
	// check it): hack/ldflags.sh's, from go.mod.
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(cfg)
	sv, err := client.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	ldflags := runOutput(t, filepath.Join("hack", "ldflags.sh"))
	if !strings.Contains(ldflags, "k8s.io/component-base/version.gitVersion="+sv.GitVersion+" ") || sv.Major != "1" {
		t.Errorf("the sandbox reports Kubernetes %q (major %q); hack/ldflags.sh stamps %s", sv.GitVersion, sv.Major, ldflags)
	}

	runOutput(t, filepath.Join("hack", "helm.sh"), "install", "budgetguard", chart,
		"--namespace", "kube-system", "--kubeconfig", kubeconfig)

	run := startProcess(t, "sandbox run-chart", filepath.Join(bin, "sandbox"), "run-chart", "--kubeconfig", kubeconfig,
		"--work-dir", filepath.Join(dir, "run-chart"))
	run.waitFor(t, time.Minute, "Press Ctrl-C to stop.")
	for _, c := range []string{"scheduler", "descheduler"} {
		if !strings.Contains(run.output(), c+": running as ServiceAccount kube-system/budgetguard-"+c) {
			t.Errorf("run-chart did not run the %s under the release's ServiceAccount:\n%s", c, run.output())
		}
	}

	applyFile(t, ctx, kubeconfig, filepath.Join(repoRoot, "examples", "quickstart", "web.yaml"))
	testenv.WaitFor(t, 2*time.Minute, "web's 4 pods Ready and its PDB allowing 1 disruption", func(ctx context.Context) (bool, error) {
		pdb, err := client.PolicyV1().PodDisruptionBudgets("shop").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return pdb.Status.CurrentHealthy == 4 && pdb.Status.DisruptionsAllowed == 1 && pdb.Status.ObservedGeneration == pdb.Generation, nil
	})
	applyFile(t, ctx, kubeconfig, filepath.Join(repoRoot, "examples", "quickstart", "checkout.yaml"))

	var refusal string
	testenv.WaitFor(t, 2*time.Minute, "a PreemptionBlockedByBudget event on shop/checkout", func(ctx context.Context) (bool, error) {
		events, err := client.CoreV1().Events("shop").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=checkout,reason=PreemptionBlockedByBudget"})
		if err != nil || len(events.Items) == 0 {
			return false, err
		}
		refusal = events.Items[0].Message
		return true, nil
	})
	if !strings.Contains(refusal, "pdb shop/web") {
		t.Errorf("the refusal does not name pdb shop/web: %q", refusal)
	}
	pod, err := client.CoreV1().Pods("shop").Get(ctx, "checkout", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.NodeName != "" {
		t.Errorf("checkout was bound to %s", pod.Spec.NodeName)
	}
	pods, err := client.CoreV1().Pods("shop").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || !isReady(&p) {
			t.Errorf("web pod %s was disrupted", p.Name)
		}
	}

	why := runOutput(t, filepath.Join(bin, "kubectl-budgetguard"), "why", "pod/checkout", "-n", "shop", "--kubeconfig", kubeconfig)
	if !strings.Contains(why, "shop/web") {
		t.Errorf("kubectl budgetguard why pod/checkout does not name pdb shop/web:\n%s", why)
	}
}

func isReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// runOutput runs a command from the repository's root and returns its
// standard output; a failure fails the test with its standard error.
func runOutput(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = repoRoot
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// process is a command of the quick start that keeps running, its output
// collected.
type process struct {
	name   string
	cmd    *exec.Cmd
	mu     sync.Mutex
	out    strings.Builder
	exited chan struct{}
}

func (p *process) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// startProcess starts name with args from the repository's root; the test's
// end stops it with SIGTERM (SIGKILL 30 s later).
func startProcess(t *testing.T, label, name string, args ...string) *process {
	t.Helper()
	p := &process{name: label, cmd: exec.Command(name, args...), exited: make(chan struct{})}
	p.cmd.Dir = repoRoot
	r, w := io.Pipe()
	p.cmd.Stdout, p.cmd.Stderr = w, w
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
	}()
	go func() { _ = p.cmd.Wait(); _ = w.Close(); close(p.exited) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("output of %s:\n%s", label, p.output())
		}
	})
	return p
}

// waitFor waits until the process has printed text.
func (p *process) waitFor(t *testing.T, timeout time.Duration, text string) {
	t.Helper()
	testenv.WaitFor(t, timeout, p.name+" to print "+text, func(context.Context) (bool, error) {
		select {
		case <-p.exited:
			return false, fmt.Errorf("%s exited: %v\n%s", p.name, p.cmd.ProcessState, p.output())
		default:
		}
		return strings.Contains(p.output(), text), nil
	})
}

// applyFile applies every object of a YAML file with server-side apply, as
// `kubectl apply --server-side -f` does.
func applyFile(t *testing.T, ctx context.Context, kubeconfig, path string) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(cfg)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(cfg)))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		gvk := obj.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s: %s: %v", path, gvk, err)
		}
		body, err := obj.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			ri = dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace())
		}
		if _, err := ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: "kubectl", Force: ptr.To(true)}); err != nil {
			t.Fatalf("%s: apply %s %s: %v", path, gvk.Kind, obj.GetName(), err)
		}
	}
}
