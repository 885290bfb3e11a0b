// Package realnode brings up, and tears down, the real single-node cluster
// of make e2e-node (hack/e2e-node.sh): etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler built from the pinned modules,
// containerd, runc and the CNI plugins from Debian's packages, and a kubelet
// that runs real containers from images imported into containerd.
//
// The cluster lives on addresses the run makes itself: the node's address on
// a veth pair of its own, the pods' on a bridge. The one Service the pods need,
// kubernetes.default, is reached through two DNAT rules that do for it what
// kube-proxy would. Nothing is sent to another host: the pods' images are
// imported, never pulled, and the pods get no DNS.
//
// Up writes what Down needs into the run directory (pids, the rules it
// added, the paths it created, ip_forward's value), so that Down, from
// another process, even after Up failed half-way, leaves the machine as it
// found it. Snapshot and Compare check that.
package realnode

import (
	"fmt"
	"path/filepath"
)

// The cluster's names and addresses. They are constants: one real node runs
// on a machine at a time (Up refuses to start over a run directory that is
// there).
const (
	NodeName = "bg-e2e-node"
	// NodeIP is on an interface of the run's own (NodeLink, one end of a
	// veth pair whose other end stays on the host too), in TEST-NET-2
	// (RFC 5737), which no host on the machine's network uses.
	NodeIP       = "198.51.100.10"
	NodeLink     = "bge2e0"
	BridgeName   = "bge2e-br0"
	PodCIDR      = "10.244.0.0/24"
	ServiceCIDR  = "10.96.0.0/24"
	KubernetesIP = "10.96.0.1" // the kubernetes Service's ClusterIP
	APIPort      = 6443
	EtcdClient   = "http://127.0.0.1:23790"
	EtcdPeer     = "http://127.0.0.1:23800"
	// PauseImage is containerd's sandbox_image: imported, never pulled.
	PauseImage = "budgetguard.local/e2e/pause:e2e"
	// WebappImage is the test application.
	WebappImage = "budgetguard.local/e2e/webapp:e2e"
	// ruleComment marks the iptables rules the run adds.
	ruleComment = "budgetguard-e2e"
)

// Layout is where a run keeps its files.
type Layout struct {
	// BinDir holds etcd, kube-apiserver, kube-controller-manager,
	// kube-scheduler and kubelet.
	BinDir string
	// StateDir holds etcd's data, containerd's root, the kubelet's root and
	// the pods' logs; Down removes it.
	StateDir string
	// RunDir holds the pids, the sockets, containerd's state, the PKI, the
	// kubeconfigs and the audit log; Down removes it.
	RunDir string
	// LogDir keeps each process's output; it stays after Down.
	LogDir string
}

// DefaultLayout is the layout of hack/e2e-node.sh under the repository's
// _output.
func DefaultLayout(repo string) Layout {
	return Layout{
		BinDir:   filepath.Join(repo, "_output/e2e-node/bin"),
		StateDir: "/var/lib/budgetguard-e2e",
		RunDir:   "/run/budgetguard-e2e",
		LogDir:   filepath.Join(repo, "_output/e2e-node/logs"),
	}
}

func (l Layout) pki(name string) string     { return filepath.Join(l.RunDir, "pki", name) }
func (l Layout) pidFile(name string) string { return filepath.Join(l.RunDir, "pids", name) }

// AdminKubeconfig is the kubeconfig of the cluster's admin (system:masters).
func (l Layout) AdminKubeconfig() string { return filepath.Join(l.RunDir, "admin.kubeconfig") }

// AuditLog is kube-apiserver's audit log, which the auditor reads.
func (l Layout) AuditLog() string { return filepath.Join(l.RunDir, "audit", "audit.log") }

// ContainerdSocket is the run's containerd's address.
func (l Layout) ContainerdSocket() string {
	return filepath.Join(l.RunDir, "containerd", "containerd.sock")
}

func (l Layout) logFile(name string) string { return filepath.Join(l.LogDir, name+".log") }

// APIServerURL is kube-apiserver's address on the node.
func APIServerURL() string { return fmt.Sprintf("https://%s:%d", NodeIP, APIPort) }
