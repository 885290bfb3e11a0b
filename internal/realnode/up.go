package realnode

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/budgetguard/budgetguard/internal/audit"
)

// Options are what Up is told besides the layout.
type Options struct {
	// Images are OCI archives to import into containerd before the kubelet
	// starts (the pause image among them, named PauseImage).
	Images []string
	// SpareNode is the command line of a process that runs RunSpareNode
	// (hack/e2enode spare-node); Up starts it once the control plane
	// answers, and Down stops it.
	SpareNode []string
	// Logf reports progress.
	Logf func(format string, args ...any)
}

// process is one process Up started.
type process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

// exited reports the process's end, with the tail of its log.
func (p *process) exited(l Layout) error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited: %v; the end of %s:\n%s", p.name, p.cmd.ProcessState, l.logFile(p.name), tail(l.logFile(p.name), 30))
	default:
		return nil
	}
}

func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// Up brings the real node up: network, PKI, etcd, kube-apiserver (with the
// auditor's audit log), kube-controller-manager, kube-scheduler,
// containerd with the images imported, and the kubelet, and returns once the
// Node is Ready and untainted. Whatever it started stays running when it
// returns, and Down stops it; on an error Up leaves it for Down too.
func Up(ctx context.Context, l Layout, opts Options) error {
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if missing := Preflight(l); len(missing) > 0 {
		var b strings.Builder
		for _, m := range missing {
			fmt.Fprintf(&b, "\n  - %s (%s)", m.What, m.Fix)
		}
		return fmt.Errorf("this host cannot run a real node; it lacks:%s", b.String())
	}
	if _, err := os.Stat(l.RunDir); err == nil {
		return fmt.Errorf("%s exists: a real node is running, or a run was not torn down (hack/e2e-node.sh down)", l.RunDir)
	}
	for _, d := range []string{l.RunDir, filepath.Join(l.RunDir, "pids"), filepath.Join(l.RunDir, "audit"), filepath.Join(l.RunDir, "cni"), l.StateDir, l.LogDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	fwd, err := os.ReadFile(ipForwardPath)
	if err != nil {
		return err
	}
	st := state{IPForward: strings.TrimSpace(string(fwd))}
	for _, p := range hostPaths {
		if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
			st.Created = append(st.Created, p)
		}
	}
	st.Links = []string{NodeLink, BridgeName}
	st.Rules = dnatRules()
	if err := l.writeState(st); err != nil {
		return err
	}

	logf("network: %s on %s, pods on %s (%s), DNAT %s:443 -> %s:%d", NodeIP, NodeLink, BridgeName, PodCIDR, KubernetesIP, NodeIP, APIPort)
	if err := setUpNetwork(); err != nil {
		return err
	}
	if err := writePKI(l); err != nil {
		return fmt.Errorf("PKI: %w", err)
	}

	etcd, err := start(l, "etcd", filepath.Join(l.BinDir, "etcd"),
		"--name=e2e-node", "--data-dir="+filepath.Join(l.StateDir, "etcd"),
		"--listen-client-urls="+EtcdClient, "--advertise-client-urls="+EtcdClient,
		"--listen-peer-urls="+EtcdPeer, "--initial-advertise-peer-urls="+EtcdPeer,
		"--initial-cluster=e2e-node="+EtcdPeer, "--unsafe-no-fsync", "--log-level=warn")
	if err != nil {
		return err
	}
	if err := waitHTTP(ctx, l, etcd, EtcdClient+"/health", nil); err != nil {
		return err
	}
	logf("etcd is healthy")

	auditFlags, _, err := audit.APIServerFlags(filepath.Join(l.RunDir, "audit"))
	if err != nil {
		return err
	}
	apiArgs := append([]string{
		"--etcd-servers=" + EtcdClient,
		"--bind-address=" + NodeIP, "--advertise-address=" + NodeIP, "--secure-port=" + strconv.Itoa(APIPort),
		"--cert-dir=" + filepath.Join(l.RunDir, "apiserver"),
		"--tls-cert-file=" + l.pki("apiserver.crt"), "--tls-private-key-file=" + l.pki("apiserver.key"),
		"--client-ca-file=" + l.pki("ca.crt"),
		"--service-account-key-file=" + l.pki("sa.pub"), "--service-account-signing-key-file=" + l.pki("sa.key"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range=" + ServiceCIDR,
		"--authorization-mode=Node,RBAC",
		"--kubelet-client-certificate=" + l.pki("apiserver-kubelet-client.crt"), "--kubelet-client-key=" + l.pki("apiserver-kubelet-client.key"),
		"--kubelet-preferred-address-types=InternalIP",
		"--profiling=false",
	}, auditFlags...)
	api, err := start(l, "kube-apiserver", filepath.Join(l.BinDir, "kube-apiserver"), apiArgs...)
	if err != nil {
		return err
	}
	adminTLS, err := clientTLS(l, "admin")
	if err != nil {
		return err
	}
	if err := waitHTTP(ctx, l, api, APIServerURL()+"/readyz", adminTLS); err != nil {
		return err
	}
	logf("kube-apiserver is ready at %s", APIServerURL())

	kcm, err := start(l, "kube-controller-manager", filepath.Join(l.BinDir, "kube-controller-manager"),
		"--kubeconfig="+l.kubeconfigPath("kube-controller-manager"),
		"--authentication-kubeconfig="+l.kubeconfigPath("kube-controller-manager"),
		"--authorization-kubeconfig="+l.kubeconfigPath("kube-controller-manager"),
		"--bind-address=127.0.0.1", "--secure-port=10357", "--leader-elect=false",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+l.pki("sa.key"), "--root-ca-file="+l.pki("ca.crt"),
		"--cluster-signing-cert-file="+l.pki("ca.crt"), "--cluster-signing-key-file="+l.pki("ca.key"),
		"--controllers=*", "--profiling=false")
	if err != nil {
		return err
	}
	sched, err := start(l, "kube-scheduler", filepath.Join(l.BinDir, "kube-scheduler"),
		"--kubeconfig="+l.kubeconfigPath("kube-scheduler"),
		"--authentication-kubeconfig="+l.kubeconfigPath("kube-scheduler"),
		"--authorization-kubeconfig="+l.kubeconfigPath("kube-scheduler"),
		"--bind-address=127.0.0.1", "--secure-port=10359", "--leader-elect=false", "--profiling=false")
	if err != nil {
		return err
	}

	if err := writeContainerdConfig(l); err != nil {
		return err
	}
	ctrd, err := start(l, "containerd", "containerd", "--config="+filepath.Join(l.RunDir, "containerd.toml"))
	if err != nil {
		return err
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		if err := ctrd.exited(l); err != nil {
			return false, err
		}
		return exec.Command("ctr", "--address", l.ContainerdSocket(), "version").Run() == nil, nil
	}); err != nil {
		return fmt.Errorf("containerd: %w", err)
	}
	for _, img := range opts.Images {
		out, err := exec.CommandContext(ctx, "ctr", "--address", l.ContainerdSocket(), "-n", "k8s.io", "images", "import", "--all-platforms", img).CombinedOutput()
		if err != nil {
			return fmt.Errorf("import %s into containerd: %v: %s", img, err, out)
		}
		logf("imported %s", img)
	}

	if err := writeKubeletConfig(l); err != nil {
		return err
	}
	kubelet, err := start(l, "kubelet", filepath.Join(l.BinDir, "kubelet"),
		"--config="+filepath.Join(l.RunDir, "kubelet.yaml"),
		"--kubeconfig="+l.kubeconfigPath("kubelet"),
		"--root-dir="+filepath.Join(l.StateDir, "kubelet"),
		"--cert-dir="+filepath.Join(l.StateDir, "kubelet", "pki"),
		"--node-ip="+NodeIP, "--hostname-override="+NodeName, "--v=2")
	if err != nil {
		return err
	}

	var spare *process
	if len(opts.SpareNode) > 0 {
		if spare, err = start(l, "spare-node", opts.SpareNode[0], opts.SpareNode[1:]...); err != nil {
			return err
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", l.AdminKubeconfig())
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	started := time.Now()
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, p := range []*process{etcd, api, kcm, sched, ctrd, kubelet, spare} {
			if p == nil {
				continue
			}
			if err := p.exited(l); err != nil {
				return false, err
			}
		}
		n, err := cs.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if !nodeReady(n) {
			return false, nil
		}
		if spare == nil {
			return true, nil
		}
		sn, err := cs.CoreV1().Nodes().Get(ctx, SpareNodeName, metav1.GetOptions{})
		return err == nil && len(sn.Status.Conditions) > 0, nil
	}); err != nil {
		return fmt.Errorf("the Node %s did not turn Ready and untainted: %w; the end of %s:\n%s", NodeName, err, l.logFile("kubelet"), tail(l.logFile("kubelet"), 30))
	}
	logf("node %s is Ready, untainted, %s after the kubelet started", NodeName, time.Since(started).Round(100*time.Millisecond))
	return nil
}

func nodeReady(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			return false
		}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// start runs a process in a session of its own, its output appended to its
// log, and records its pid for Down.
func start(l Layout, name, binary string, args ...string) (*process, error) {
	logFile, err := os.OpenFile(l.logFile(name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	fmt.Fprintf(logFile, "=== %s %s %s\n", time.Now().Format(time.RFC3339), binary, strings.Join(args, " "))
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	if err := os.WriteFile(l.pidFile(name), []byte(strconv.Itoa(cmd.Process.Pid)+" "+filepath.Base(binary)), 0o644); err != nil {
		return nil, err
	}
	p := &process{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func clientTLS(l Layout, identity string) (*tls.Config, error) {
	pool := x509.NewCertPool()
	ca, err := os.ReadFile(l.pki("ca.crt"))
	if err != nil {
		return nil, err
	}
	pool.AppendCertsFromPEM(ca)
	cert, err := tls.LoadX509KeyPair(l.pki(identity+".crt"), l.pki(identity+".key"))
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// waitHTTP waits until url answers 200, or p exits.
func waitHTTP(ctx context.Context, l Layout, p *process, url string, tlsConfig *tls.Config) error {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := p.exited(l); err != nil {
			return false, err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return false, nil
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("%s did not answer %s: %w; the end of %s:\n%s", p.name, url, err, l.logFile(p.name), tail(l.logFile(p.name), 30))
	}
	return nil
}

// dnatRules are the iptables rules (table nat) that send the kubernetes
// Service's ClusterIP to kube-apiserver, from the pods (PREROUTING) and the
// host (OUTPUT), as kube-proxy would.
func dnatRules() [][]string {
	var rules [][]string
	for _, chain := range []string{"PREROUTING", "OUTPUT"} {
		rules = append(rules, []string{"-t", "nat", chain, "-d", KubernetesIP + "/32", "-p", "tcp", "--dport", "443",
			"-m", "comment", "--comment", ruleComment, "-j", "DNAT", "--to-destination", fmt.Sprintf("%s:%d", NodeIP, APIPort)})
	}
	return rules
}

// ruleArgs turns a rule into iptables' arguments for op (-A, -C, -D).
func ruleArgs(op string, rule []string) []string {
	return append([]string{rule[0], rule[1], op}, rule[2:]...)
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func setUpNetwork() error {
	steps := [][]string{
		// A veth pair, both ends on the host, carries the node's address
		// (kernels without the dummy driver have veth).
		{"ip", "link", "add", NodeLink, "type", "veth", "peer", "name", NodeLink + "p"},
		{"ip", "addr", "add", NodeIP + "/32", "dev", NodeLink},
		{"ip", "link", "set", NodeLink + "p", "up"},
		{"ip", "link", "set", NodeLink, "up"},
	}
	for _, r := range dnatRules() {
		steps = append(steps, append([]string{"iptables"}, ruleArgs("-A", r)...))
	}
	for _, s := range steps {
		if err := run(s[0], s[1:]...); err != nil {
			return fmt.Errorf("network: %w", err)
		}
	}
	return nil
}

func writeContainerdConfig(l Layout) error {
	cni := fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "budgetguard-e2e",
  "plugins": [{
    "type": "bridge",
    "bridge": %q,
    "isGateway": true,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {
      "type": "host-local",
      "ranges": [[{"subnet": %q}]],
      "routes": [{"dst": "0.0.0.0/0"}],
      "dataDir": %q
    }
  }]
}
`, BridgeName, PodCIDR, filepath.Join(l.StateDir, "cni-ipam"))
	if err := os.WriteFile(filepath.Join(l.RunDir, "cni", "10-budgetguard-e2e.conflist"), []byte(cni), 0o644); err != nil {
		return err
	}
	// restrict_oom_score_adj: the run may lack CAP_SYS_RESOURCE.
	// netns_mounts_under_state_dir keeps the pods' network namespaces
	// under the run's directory.
	cfg := fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = %q

[plugins."io.containerd.internal.v1.opt"]
  path = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
`, filepath.Join(l.StateDir, "containerd"), filepath.Join(l.RunDir, "containerd-state"), l.ContainerdSocket(),
		filepath.Join(l.StateDir, "containerd-opt"), PauseImage, CNIBinDir, filepath.Join(l.RunDir, "cni"))
	return os.WriteFile(filepath.Join(l.RunDir, "containerd.toml"), []byte(cfg), 0o644)
}

func writeKubeletConfig(l Layout) error {
	cgroupV1 := ""
	if CgroupV1() {
		cgroupV1 = "failCgroupV1: false\n"
	}
	// Image garbage collection is off (threshold 100): the imported images
	// cannot be pulled again. Eviction thresholds are low: the machine's
	// disk is shared, and a node-pressure eviction would be a disruption
	// that no budget governs. makeIPTablesUtilChains: false leaves iptables
	// as it was. resolvConf "": the pods get no DNS from the host.
	cfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %q}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
%scontainerRuntimeEndpoint: unix://%s
resolvConf: ""
failSwapOn: false
makeIPTablesUtilChains: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: "1%%"
  nodefs.inodesFree: "1%%"
  imagefs.available: "1%%"
podLogsDir: %q
clusterDomain: cluster.local
registerNode: true
serializeImagePulls: false
rotateCertificates: false
nodeStatusReportFrequency: 10s
syncFrequency: 10s
`, NodeIP, l.pki("ca.crt"), cgroupV1, l.ContainerdSocket(), filepath.Join(l.StateDir, "pod-logs"))
	return os.WriteFile(filepath.Join(l.RunDir, "kubelet.yaml"), []byte(cfg), 0o644)
}
