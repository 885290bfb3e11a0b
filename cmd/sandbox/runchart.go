package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/budgetguard/budgetguard/internal/localrun"
)

// runChartFlags are the flags of `sandbox run-chart`.
type runChartFlags struct {
	kubeconfig string
	namespace  string
	release    string
	binDir     string
	workDir    string
}

func newRunChartCommand(stdout, stderr io.Writer) *cobra.Command {
	var f runChartFlags
	cmd := &cobra.Command{
		Use:   "run-chart",
		Short: "Run the scheduler and descheduler a helm release of budgetguard's chart installed, as processes under the release's ServiceAccounts",
		Long: `run-chart runs what a helm release of charts/budgetguard installed into the
sandbox (which runs no containers) as processes of this machine, as the
release's pods would run them: bin/scheduler and bin/descheduler with the
command line of the release's Deployments, the configuration of their
ConfigMaps, and the identity of their ServiceAccounts (TokenRequest tokens),
so that the chart's RBAC is what they run under.

The binaries stand in for the release's images: their version must be the
image tag the release pulls (install the chart make release or make chart
packaged for this build). A descheduler installed as a CronJob is not run.

The release's own pods stay Pending in the sandbox, which runs no default
scheduler and no containers: that is expected, these processes stand in for
them. Ctrl-C (or SIGTERM, e.g. kill %2 for a background job) stops both; so
does either one's exit, whose error ends with the last lines of its log.

Their configuration, kubeconfigs and logs go to --work-dir, which is kept;
without it, to a temporary directory that run-chart removes whenever it
exits, also when it refuses to start.`,
		Example: `  bin/sandbox up --kubeconfig /tmp/sandbox.kubeconfig &
  bin/sandbox wait --kubeconfig /tmp/sandbox.kubeconfig
  hack/helm.sh install budgetguard _output/chart/budgetguard-*.tgz -n kube-system --kubeconfig /tmp/sandbox.kubeconfig
  bin/sandbox run-chart --kubeconfig /tmp/sandbox.kubeconfig`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) != 0 {
				return usageError{fmt.Errorf("run-chart takes no arguments; got %d", len(args))}
			}
			return runChart(cmd.Context(), f, stdout, stderr)
		},
	}
	cmd.Flags().StringVar(&f.kubeconfig, "kubeconfig", defaultKubeconfig(), "the sandbox's admin kubeconfig (sandbox up's --kubeconfig)")
	cmd.Flags().StringVarP(&f.namespace, "namespace", "n", "kube-system", "the release's namespace")
	cmd.Flags().StringVar(&f.release, "release", "budgetguard", "the release's name")
	cmd.Flags().StringVar(&f.binDir, "bin-dir", "", "where scheduler and descheduler are (default: beside this binary)")
	cmd.Flags().StringVar(&f.workDir, "work-dir", "", "where the configuration, kubeconfigs and logs go, kept after run-chart exits (default: a new temporary directory, removed when it exits)")
	return cmd
}

// chartProcess is one of the release's workloads running here.
type chartProcess struct {
	component string
	cmd       *exec.Cmd
	log       string
	port      int
	// exited is closed once the process has exited, with err its Wait's.
	exited chan struct{}
	err    error
}

func runChart(ctx context.Context, f runChartFlags, stdout, stderr io.Writer) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", f.kubeconfig)
	if err != nil {
		return fmt.Errorf("--kubeconfig %s: %w", f.kubeconfig, err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	binDir := f.binDir
	if binDir == "" {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		binDir = filepath.Dir(self)
	}
	workDir, keep := f.workDir, true
	if workDir == "" {
		if workDir, err = os.MkdirTemp("", "budgetguard-run-chart-"); err != nil {
			return err
		}
		// The ServiceAccounts' tokens are in there; the logs that matter
		// when a process fails go into the error. Removed after stopAll,
		// which runs first.
		keep = false
		defer func() { _ = os.RemoveAll(workDir) }()
	}
	var procs []*chartProcess
	defer func() { stopAll(procs, stderr) }()
	for _, component := range []string{"scheduler", "descheduler"} {
		dep, err := releaseDeployment(ctx, client, f.namespace, f.release, component)
		if err != nil {
			return err
		}
		if dep == nil {
			fmt.Fprintf(stderr, "run-chart: release %s in %s has no %s Deployment (a CronJob is not run); skipping it\n", f.release, f.namespace, component)
			continue
		}
		p, err := startChartProcess(ctx, client, f, dep, component, filepath.Join(binDir, component), workDir)
		if err != nil {
			return fmt.Errorf("%s (Deployment %s/%s): %w", component, dep.Namespace, dep.Name, err)
		}
		procs = append(procs, p)
		fmt.Fprintf(stdout, "%s: running as ServiceAccount %s/%s, https://127.0.0.1:%d, log %s\n", component, dep.Namespace, dep.Spec.Template.Spec.ServiceAccountName, p.port, p.log)
	}
	if len(procs) == 0 {
		return fmt.Errorf("release %s in namespace %s installed no scheduler or descheduler Deployment", f.release, f.namespace)
	}
	fmt.Fprintln(stdout, "Press Ctrl-C to stop.")
	cases := make(chan error, len(procs))
	for _, p := range procs {
		go func() {
			<-p.exited
			if keep {
				cases <- fmt.Errorf("%s exited (%v); its log: %s", p.component, p.err, p.log)
				return
			}
			cases <- fmt.Errorf("%s exited (%v); the end of its log:\n%s", p.component, p.err, logTail(p.log, 20))
		}()
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-cases:
		return err
	}
}

// releaseDeployment returns the release's Deployment of component, or nil
// when it has none.
func releaseDeployment(ctx context.Context, client kubernetes.Interface, namespace, release, component string) (*appsv1.Deployment, error) {
	sel := labels.SelectorFromSet(labels.Set{
		"app.kubernetes.io/name":      "budgetguard",
		"app.kubernetes.io/instance":  release,
		"app.kubernetes.io/component": component,
	})
	list, err := client.AppsV1().Deployments(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, fmt.Errorf("list the release's Deployments in %s: %w", namespace, err)
	}
	switch len(list.Items) {
	case 0:
		return nil, nil
	case 1:
		return &list.Items[0], nil
	default:
		return nil, fmt.Errorf("%d Deployments in %s match %s", len(list.Items), namespace, sel)
	}
}

// startChartProcess starts binary as the Deployment's pod would run it.
func startChartProcess(ctx context.Context, client kubernetes.Interface, f runChartFlags, dep *appsv1.Deployment, component, binary, workDir string) (*chartProcess, error) {
	spec := &dep.Spec.Template.Spec
	c, err := localrun.Container(spec)
	if err != nil {
		return nil, err
	}
	if err := checkImageVersion(binary, c.Image); err != nil {
		return nil, err
	}
	_, cmName, err := localrun.ConfigVolume(spec)
	if err != nil {
		return nil, err
	}
	cm, err := client.CoreV1().ConfigMaps(dep.Namespace).Get(ctx, cmName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("the configuration's ConfigMap: %w", err)
	}
	configDir := filepath.Join(workDir, component)
	if err := localrun.WriteConfig(cm.Data, configDir); err != nil {
		return nil, err
	}
	sa := spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	kubeconfig := filepath.Join(workDir, component+".kubeconfig")
	if err := localrun.WriteServiceAccountKubeconfig(ctx, client, f.kubeconfig, dep.Namespace, sa, kubeconfig); err != nil {
		return nil, err
	}
	port, err := freeLocalPort()
	if err != nil {
		return nil, err
	}
	args, err := localrun.Args(spec, configDir, kubeconfig, port)
	if err != nil {
		return nil, err
	}
	for _, a := range args {
		if path, ok := strings.CutPrefix(a, "--config="); ok {
			if err := localrun.SetClientKubeconfig(path, kubeconfig); err != nil {
				return nil, err
			}
		}
	}
	p := &chartProcess{component: component, port: port, log: filepath.Join(workDir, component+".log"), exited: make(chan struct{})}
	logFile, err := os.Create(p.log)
	if err != nil {
		return nil, err
	}
	p.cmd = exec.Command(binary, args...)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	if err := p.cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, err
	}
	go func() {
		p.err = p.cmd.Wait()
		_ = logFile.Close()
		close(p.exited)
	}()
	return p, nil
}

// checkImageVersion refuses a binary whose version is not the tag of the
// image the release pulls: the process stands in for that image.
func checkImageVersion(binary, image string) error {
	out, err := exec.Command(binary, "--version").Output()
	if err != nil {
		return fmt.Errorf("%s --version: %w", binary, err)
	}
	// "budgetguard v0.2.0 (Kubernetes v1.37.2, ...)"
	fields := strings.Fields(string(bytes.TrimSpace(out)))
	if len(fields) < 2 || fields[0] != "budgetguard" {
		return fmt.Errorf("%s --version printed %q, not budgetguard's version", binary, out)
	}
	tag := ""
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		tag = image[i+1:]
	}
	if tag != fields[1] {
		return fmt.Errorf("the release runs image %s but %s is %s: install the chart packaged for this build (make chart or make release), or build the binaries of the release (make build on its tag)", image, binary, fields[1])
	}
	return nil
}

// logTail returns the last n lines of the file at path, or why it could
// not be read.
func logTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// freeLocalPort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freeLocalPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// stopAll stops the processes with SIGTERM, and kills those still running
// 20 seconds later.
func stopAll(procs []*chartProcess, stderr io.Writer) {
	for _, p := range procs {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range procs {
		select {
		case <-p.exited:
		case <-time.After(20 * time.Second):
			fmt.Fprintf(stderr, "run-chart: %s did not stop in 20s; killing it\n", p.component)
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	}
}
