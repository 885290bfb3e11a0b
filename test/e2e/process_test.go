package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/budgetguard/budgetguard/internal/localrun"
	"github.com/budgetguard/budgetguard/internal/testenv"
	"github.com/budgetguard/budgetguard/sandbox"
)

// built holds the binaries every test of the package runs, built once.
var built struct {
	once sync.Once
	dir  string
	err  error
}

// binaries are the commands the tests run, as make build builds them.
var binaries = []string{"./cmd/scheduler", "./cmd/descheduler", "./cmd/sandbox", "./cmd/kubectl-budgetguard"}

// buildBinaries puts scheduler, descheduler, sandbox and kubectl-budgetguard
// into dir, built as make build builds them: with hack/ldflags.sh's flags (the
// version, and the Kubernetes version the sandbox reports), without
// -trimpath. They are built once per run of the package (TestMain removes
// them) and linked into each test's dir.
func buildBinaries(t *testing.T, dir string) {
	t.Helper()
	built.once.Do(func() {
		began := time.Now()
		if built.dir, built.err = os.MkdirTemp("", "budgetguard-e2e-bin-"); built.err != nil {
			return
		}
		ldflags, err := exec.Command(filepath.Join(repoRoot, "hack", "ldflags.sh")).Output()
		if err != nil {
			built.err = fmt.Errorf("hack/ldflags.sh: %w", err)
			return
		}
		args := append([]string{"build", "-ldflags", strings.TrimSpace(string(ldflags)), "-o", built.dir + string(filepath.Separator)}, binaries...)
		cmd := exec.Command("go", args...)
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %w\n%s", err, out)
			return
		}
		t.Logf("built %s in %s", strings.Join(binaries, " "), time.Since(began).Round(time.Second))
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, pkg := range binaries {
		name := filepath.Base(pkg)
		if err := os.Symlink(filepath.Join(built.dir, name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

// serviceAccountKubeconfig writes a kubeconfig that authenticates as the
// ServiceAccount namespace/name with a token from the TokenRequest API, and
// returns its path and a rest.Config for the same identity.
func serviceAccountKubeconfig(t *testing.T, cp *sandbox.ControlPlane, namespace, name, dir string) (string, *rest.Config) {
	t.Helper()
	tr, err := cp.Client.CoreV1().ServiceAccounts(namespace).CreateToken(testenv.Context(t), name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s/%s: %v", namespace, name, err)
	}
	path := filepath.Join(dir, name+".kubeconfig")
	if err := cp.WriteKubeconfig(path, name, tr.Status.Token); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	return path, cfg
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// component is a budgetguard binary running as its own process.
type component struct {
	name string
	port int
	cmd  *exec.Cmd
	log  string
	// exited is closed once the process has exited.
	exited chan struct{}
}

// startComponent runs binary with the command line of the rendered
// workload's one container: its config mount is replaced by configDir, its
// --secure-port by a free port on 127.0.0.1, and it authenticates with
// kubeconfig. The process is stopped (SIGTERM) when the test ends.
func startComponent(t *testing.T, name, binary string, workload *unstructured.Unstructured, configDir, kubeconfig string, extra ...string) *component {
	t.Helper()
	spec, err := localrun.PodSpecOf(workload)
	if err != nil {
		t.Fatal(err)
	}
	c := &component{name: name, port: freePort(t)}
	argv, err := localrun.Args(spec, configDir, kubeconfig, c.port)
	if err != nil {
		t.Fatalf("%s: %v", workload.GetName(), err)
	}
	argv = append(argv, extra...)
	c.log = filepath.Join(t.TempDir(), name+".log")
	logFile, err := os.Create(c.log)
	if err != nil {
		t.Fatal(err)
	}
	c.cmd = exec.Command(binary, argv...)
	c.cmd.Stdout, c.cmd.Stderr = logFile, logFile
	t.Logf("starting %s %s", binary, strings.Join(argv, " "))
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	c.exited = exited
	go func() { _ = c.cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = c.cmd.Process.Kill()
			<-exited
		}
		_ = logFile.Close()
		if t.Failed() {
			data, _ := os.ReadFile(c.log)
			lines := strings.Split(string(data), "\n")
			t.Logf("last lines of %s's log:\n%s", name, strings.Join(lines[max(0, len(lines)-60):], "\n"))
		}
	})
	return c
}

// get fetches path from the component's secure port (its certificate is
// self-signed) with token as the bearer token, if any.
func (c *component) get(ctx context.Context, path, token string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d%s", c.port, path), nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		// The components serve with self-signed certificates.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
	}}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// waitHealthy waits until /healthz answers ok.
func (c *component) waitHealthy(t *testing.T) {
	t.Helper()
	testenv.WaitFor(t, time.Minute, c.name+" /healthz ok", func(ctx context.Context) (bool, error) {
		if c.cmd.ProcessState != nil {
			t.Fatalf("%s exited: %v", c.name, c.cmd.ProcessState)
		}
		code, body, err := c.get(ctx, "/healthz", "")
		if err != nil {
			return false, err
		}
		return code == http.StatusOK && strings.TrimSpace(body) == "ok", fmt.Errorf("%d %q", code, body)
	})
}

// metricValue returns the sum of the samples of metric in a Prometheus
// text exposition.
func metricValue(exposition, metric string) (float64, bool) {
	var sum float64
	found := false
	for _, line := range strings.Split(exposition, "\n") {
		if !strings.HasPrefix(line, metric+"{") && !strings.HasPrefix(line, metric+" ") {
			continue
		}
		fields := strings.Fields(line)
		var v float64
		if _, err := fmt.Sscan(fields[len(fields)-1], &v); err == nil {
			sum += v
			found = true
		}
	}
	return sum, found
}

// clientAs returns a clientset for cfg whose requests carry userAgent.
func clientAs(t *testing.T, cfg *rest.Config, userAgent string) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(rest.AddUserAgent(rest.CopyConfig(cfg), userAgent))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// ensureNamespace creates namespace ns.
func ensureNamespace(t *testing.T, client kubernetes.Interface, ns string) {
	t.Helper()
	testenv.Create(t, client.CoreV1().Namespaces(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
}
