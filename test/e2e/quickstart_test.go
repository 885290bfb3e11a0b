package e2e

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/budgetguard/budgetguard/internal/testenv"
)

// quickStartKubectl, when set, is the kubectl TestQuickStart runs the quick
// start with, in place of the pinned one: e.g. -args
// -quickstart.kubectl=/usr/bin/kubectl to try another version.
var quickStartKubectl = flag.String("quickstart.kubectl", "", "the kubectl TestQuickStart runs README's quick start with (default: the pinned one, hack/kubectl.sh)")

// TestQuickStart runs README's quick start as a script, as a user who
// pastes it into one would: its first sh block, with bash -euo pipefail,
// from the repository's root, its `make build chart` included (it writes
// bin/ and _output/chart there, as for the user). Two things differ: the
// kubeconfig path of its export line is the test's own, and kubectl is the
// pinned one (hack/kubectl.sh, go.mod's Kubernetes version) first on PATH.
// The script must get through every step (the sandbox waited for, the
// chart installed by the pinned helm, run-chart's processes under the
// release's ServiceAccounts, web rolled out, checkout refused); then the
// test checks through the API what README says happened: the refusal
// event names pdb shop/web with README's example sentence, checkout is
// unbound, no web pod was disrupted, and the release's own pods are
// Pending. Last, the script runs README's stop block: both background
// processes exit, the kubeconfig is gone and run-chart left no temporary
// directory.
func TestQuickStart(t *testing.T) {
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	block, stop := quickStartBlocks(t, string(readme))
	example := introExample(t, string(readme))
	dir := t.TempDir()

	// The block's one path of its own: the kubeconfig, exported once.
	const readmeKubeconfig = "/tmp/sandbox.kubeconfig"
	kubeconfig := filepath.Join(dir, "sandbox.kubeconfig")
	if n := strings.Count(block, readmeKubeconfig); n != 1 || !strings.Contains(block, "export KUBECONFIG="+readmeKubeconfig+" ") {
		t.Fatalf("README's quick start names %s %d times, want once, in its export line:\n%s", readmeKubeconfig, n, block)
	}
	block = strings.Replace(block, readmeKubeconfig, kubeconfig, 1)

	tools := filepath.Join(dir, "tools")
	if err := os.MkdirAll(tools, 0o755); err != nil {
		t.Fatal(err)
	}
	kubectl := *quickStartKubectl
	if kubectl == "" {
		runOutput(t, filepath.Join("hack", "kubectl.sh"), "version", "--client")
		kubectl = filepath.Join(root, "_output", "tools", "kubectl")
	}
	if err := os.Symlink(kubectl, filepath.Join(tools, "kubectl")); err != nil {
		t.Fatal(err)
	}
	t.Logf("kubectl: %s", strings.TrimSpace(runOutput(t, kubectl, "version", "--client")))
	// TMPDIR of the script: where run-chart makes its directory.
	tmp := filepath.Join(dir, "tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		t.Fatal(err)
	}

	const done = "=== the quick start is done ==="
	stopFile := filepath.Join(dir, "stop")
	script := "set -euo pipefail\n" + block + "\necho '" + done + "'\n" +
		"until [ -e '" + stopFile + "' ]; do sleep 0.2; done\n" + stop
	sh := startProcess(t, "the quick start", []string{"PATH=" + tools + string(os.PathListSeparator) + os.Getenv("PATH"), "TMPDIR=" + tmp},
		"bash", "-c", script)
	// make build on a cold build cache takes minutes.
	sh.waitFor(t, 15*time.Minute, done)
	out := sh.output()
	if testing.Verbose() {
		t.Logf("the quick start's output:\n%s", out)
	}
	for _, want := range []string{"The sandbox is ready: kube-apiserver ", "deployment \"web\" successfully rolled out", "PreemptionBlockedByBudget"} {
		if !strings.Contains(out, want) {
			t.Errorf("the quick start's output does not contain %q", want)
		}
	}
	// kubectl budgetguard why: the budgets the refusal named.
	if _, named, _ := strings.Cut(out, "budgets named"); !strings.HasPrefix(strings.TrimLeft(named, " "), "pdb shop/web\n") {
		t.Errorf("kubectl budgetguard why pod/checkout does not name pdb shop/web")
	}

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(cfg)
	// The sandbox reports the Kubernetes version it embeds (helm and kubectl
	// check it): hack/ldflags.sh's, from go.mod.
	sv, err := client.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	ldflags := runOutput(t, filepath.Join("hack", "ldflags.sh"))
	if !strings.Contains(ldflags, "k8s.io/component-base/version.gitVersion="+sv.GitVersion+" ") || sv.Major != "1" {
		t.Errorf("the sandbox reports Kubernetes %q (major %q); hack/ldflags.sh stamps %s", sv.GitVersion, sv.Major, ldflags)
	}

	events, err := client.CoreV1().Events("shop").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=checkout,reason=PreemptionBlockedByBudget"})
	if err != nil || len(events.Items) == 0 {
		t.Fatalf("no PreemptionBlockedByBudget event on shop/checkout (%v)", err)
	}
	if refusal := events.Items[0].Message; !strings.Contains(refusal, "pdb shop/web") || !strings.Contains(refusal, example) {
		t.Errorf("the refusal %q does not name pdb shop/web with README's example %q", refusal, example)
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
	if len(pods.Items) != 4 {
		t.Errorf("%d web pods, want 4", len(pods.Items))
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || !isReady(&p) {
			t.Errorf("web pod %s was disrupted", p.Name)
		}
	}
	// README: the release's own pods stay Pending, no scheduler being there
	// for them.
	release, err := client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=budgetguard"})
	if err != nil || len(release.Items) == 0 {
		t.Errorf("the release's pods: %v, %d of them", err, len(release.Items))
	}
	for _, p := range release.Items {
		if p.Status.Phase != corev1.PodPending || p.Spec.NodeName != "" {
			t.Errorf("release pod %s is %s on %q, README says it stays Pending", p.Name, p.Status.Phase, p.Spec.NodeName)
		}
	}

	// README's stop block.
	if err := os.WriteFile(stopFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// The script, and every job it started (they hold its output).
	stopped := time.After(2 * time.Minute)
	for _, ch := range []chan struct{}{sh.exited, sh.drained} {
		select {
		case <-ch:
		case <-stopped:
			t.Fatalf("the quick start's stop block did not end within 2 minutes:\n%s", sh.output())
		}
	}
	if !sh.cmd.ProcessState.Success() {
		t.Errorf("the quick start's script: %v", sh.cmd.ProcessState)
	}
	if _, err := os.Stat(kubeconfig); !os.IsNotExist(err) {
		t.Errorf("the kubeconfig is still there after the stop block: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "budgetguard-run-chart-*")); len(left) > 0 {
		t.Errorf("run-chart left %v behind", left)
	}
}

// quickStartBlocks returns the sh blocks of README's quick start section:
// the quick start and the block that stops it.
func quickStartBlocks(t *testing.T, readme string) (block, stop string) {
	t.Helper()
	_, section, ok := strings.Cut(readme, "\n## Quick start")
	if !ok {
		t.Fatal("README has no section \"## Quick start\"")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var blocks []string
	for {
		_, rest, ok := strings.Cut(section, "```sh\n")
		if !ok {
			break
		}
		b, after, ok := strings.Cut(rest, "```")
		if !ok {
			t.Fatal("README's quick start has an sh block without its end")
		}
		blocks = append(blocks, b)
		section = after
	}
	if len(blocks) != 2 || !strings.Contains(blocks[0], "bin/sandbox up") || !strings.Contains(blocks[1], "kill ") {
		t.Fatalf("README's quick start: want two sh blocks, the quick start and how to stop it; got %d:\n%s", len(blocks), strings.Join(blocks, "---\n"))
	}
	return blocks[0], blocks[1]
}

// introExample is the refusal README's introduction quotes, "for example,
// in the quick start below, `...`".
func introExample(t *testing.T, readme string) string {
	t.Helper()
	_, rest, ok := strings.Cut(readme, "for example, in the quick start below,")
	if !ok {
		t.Fatal("README's introduction quotes no refusal of the quick start")
	}
	_, rest, _ = strings.Cut(rest, "`")
	example, _, ok := strings.Cut(rest, "`")
	if !ok || example == "" {
		t.Fatal("README's introduction: the example refusal is not in backquotes")
	}
	return example
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
	name string
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  strings.Builder
	// exited is closed when the process has exited, drained when nothing
	// holds its output any more (its background jobs have ended too).
	exited, drained chan struct{}
}

func (p *process) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// startProcess starts name with args from the repository's root, with env
// added to the test's environment, in a process group of its own; the
// test's end stops the group (what a script started in the background
// too) with SIGTERM, and SIGKILL 30 s later.
func startProcess(t *testing.T, label string, env []string, name string, args ...string) *process {
	t.Helper()
	p := &process{name: label, cmd: exec.Command(name, args...), exited: make(chan struct{}), drained: make(chan struct{})}
	p.cmd.Dir = repoRoot
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// An *os.File, so that Wait returns when the process exits, while its
	// background jobs may still hold the pipe (drained says when none does).
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stdout, p.cmd.Stderr = w, w
	err = p.cmd.Start()
	_ = w.Close()
	if err != nil {
		_ = r.Close()
		t.Fatal(err)
	}
	go func() {
		defer close(p.drained)
		defer r.Close()
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
	}()
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		group := -p.cmd.Process.Pid
		_ = syscall.Kill(group, syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(group, syscall.SIGKILL)
			<-p.exited
		}
		// The group's other processes (a script's background jobs) may
		// outlive its leader by a little; SIGKILL those that are left.
		time.Sleep(time.Second)
		_ = syscall.Kill(group, syscall.SIGKILL)
		select {
		case <-p.drained:
		case <-time.After(10 * time.Second):
		}
		if t.Failed() {
			t.Logf("output of %s:\n%s", label, p.output())
		}
	})
	return p
}

// waitFor waits until the process has printed text; it fails at once
// when the process exits first (a step of a script failed).
func (p *process) waitFor(t *testing.T, timeout time.Duration, text string) {
	t.Helper()
	exited := false
	testenv.WaitFor(t, timeout, p.name+" to print "+text, func(context.Context) (bool, error) {
		if strings.Contains(p.output(), text) {
			return true, nil
		}
		select {
		case <-p.exited:
			exited = true
			return true, nil
		default:
		}
		return false, nil
	})
	if exited && !strings.Contains(p.output(), text) {
		t.Fatalf("%s exited (%v) before it printed %q", p.name, p.cmd.ProcessState, text)
	}
}
