package realnode

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Requirement is one thing the host must have; Preflight reports every one
// it lacks.
type Requirement struct {
	What string // what is missing, as the error says it
	Fix  string // how to get it
}

// hostCommands are the programs a run executes, and the Debian packages
// that hack/e2e-node.sh installs them from.
var hostCommands = map[string]string{
	"containerd": "containerd",
	"ctr":        "containerd",
	"runc":       "runc",
	"ip":         "iproute2",
	"iptables":   "iptables",
}

// cniPlugins are the CNI plugins the run's network needs, from Debian's
// containernetworking-plugins, in CNIBinDir.
var cniPlugins = []string{"bridge", "host-local", "loopback"}

// CNIBinDir is where Debian's containernetworking-plugins installs them.
const CNIBinDir = "/usr/lib/cni"

// Preflight lists what the host lacks to run a real node: root, the
// programs and plugins, overlayfs, cgroups, the binaries built into
// BinDir. An empty list means the host can run it.
func Preflight(l Layout) []Requirement {
	var missing []Requirement
	if os.Geteuid() != 0 {
		missing = append(missing, Requirement{"root (a kubelet, containerd and the network setup need it)", "run make e2e-node as root"})
	}
	names := make([]string, 0, len(hostCommands))
	for n := range hostCommands {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			missing = append(missing, Requirement{"the program " + n, "apt-get install " + hostCommands[n]})
		}
	}
	for _, p := range cniPlugins {
		if _, err := os.Stat(filepath.Join(CNIBinDir, p)); err != nil {
			missing = append(missing, Requirement{"the CNI plugin " + filepath.Join(CNIBinDir, p), "apt-get install containernetworking-plugins"})
		}
	}
	if fs, err := os.ReadFile("/proc/filesystems"); err != nil || !strings.Contains(string(fs), "\toverlay\n") {
		missing = append(missing, Requirement{"overlayfs in /proc/filesystems (containerd's snapshotter)", "load the overlay module on the host"})
	}
	if _, err := os.Stat("/sys/fs/cgroup/cpu"); err != nil {
		if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err != nil {
			missing = append(missing, Requirement{"cgroups under /sys/fs/cgroup (neither v1's cpu hierarchy nor v2's cgroup.controllers)", "run on a host with cgroups mounted"})
		}
	}
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet"} {
		if _, err := os.Stat(filepath.Join(l.BinDir, b)); err != nil {
			missing = append(missing, Requirement{"the binary " + filepath.Join(l.BinDir, b), "hack/e2e-node.sh builds it"})
		}
	}
	return missing
}

// CgroupV1 tells whether the host runs cgroup v1 (the kubelet then needs
// failCgroupV1: false).
func CgroupV1() bool {
	_, err := os.Stat("/sys/fs/cgroup/cgroup.controllers")
	return err != nil
}

// state is what Up did that Down must undo, in RunDir/state.json.
type state struct {
	IPForward string   `json:"ipForward"` // /proc/sys/net/ipv4/ip_forward before the run
	Created   []string `json:"created"`   // paths the run created outside StateDir and RunDir
	Rules     [][]string
	Links     []string `json:"links"`
}

const ipForwardPath = "/proc/sys/net/ipv4/ip_forward"

func (l Layout) statePath() string { return filepath.Join(l.RunDir, "state.json") }

func (l Layout) readState() (state, error) {
	var s state
	data, err := os.ReadFile(l.statePath())
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return s, fmt.Errorf("%s: %w", l.statePath(), err)
	}
	return s, nil
}

func (l Layout) writeState(s state) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(l.statePath(), data, 0o600)
}

// hostPaths are paths a kubelet or containerd may create outside the
// directories they are given; Up records those that were not there, and
// Down removes them.
var hostPaths = []string{
	"/var/log/containers", "/var/log/pods", "/var/lib/kubelet", "/var/lib/cni",
	"/var/lib/containerd", "/run/containerd", "/opt/containerd", "/opt/cni", "/etc/cni",
	"/run/netns", "/var/run/netns", "/etc/kubernetes",
}

// Snapshot is the host's state that a run touches: interfaces and
// addresses, routes, iptables rules, ip_forward, mounts, the top cgroups,
// the paths a kubelet may create, and processes of the programs a run
// starts. Two snapshots compare equal when a run left the machine as it
// found it.
func Snapshot() (map[string][]string, error) {
	snap := map[string][]string{}
	run := func(key string, name string, args ...string) error {
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
		}
		snap[key] = cleanLines(string(out))
		return nil
	}
	if err := run("links", "ip", "-o", "link", "show"); err != nil {
		return nil, err
	}
	if err := run("addresses", "ip", "-o", "addr", "show"); err != nil {
		return nil, err
	}
	if err := run("routes", "ip", "route", "show", "table", "all"); err != nil {
		return nil, err
	}
	out, err := exec.Command("iptables-save").Output()
	if err != nil {
		return nil, fmt.Errorf("iptables-save: %w", err)
	}
	snap["iptables"] = iptablesRules(string(out))
	fwd, err := os.ReadFile(ipForwardPath)
	if err != nil {
		return nil, err
	}
	snap["ip_forward"] = []string{strings.TrimSpace(string(fwd))}
	mounts, err := mountPoints()
	if err != nil {
		return nil, err
	}
	snap["mounts"] = mounts
	var cgroups []string
	for _, pattern := range []string{"/sys/fs/cgroup/*/*", "/sys/fs/cgroup/*"} {
		m, _ := filepath.Glob(pattern)
		for _, p := range m {
			if fi, err := os.Stat(p); err == nil && fi.IsDir() {
				cgroups = append(cgroups, p)
			}
		}
	}
	slices.Sort(cgroups)
	snap["cgroups"] = cgroups
	var present []string
	for _, p := range hostPaths {
		if _, err := os.Lstat(p); err == nil {
			present = append(present, p)
		}
	}
	snap["paths"] = present
	procs, err := processesOf("containerd", "containerd-shim-runc-v2", "kubelet", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd", "webapp", "pause", "scheduler", "descheduler")
	if err != nil {
		return nil, err
	}
	snap["processes"] = procs
	return snap, nil
}

// iptablesRules are iptables-save's rules and chains, each with its
// table, leaving out what a table that was merely loaded shows (its
// built-in chains with policy ACCEPT, no rule): using the nat table loads
// it, and it cannot be unloaded.
func iptablesRules(out string) []string {
	builtin := map[string]bool{"INPUT": true, "OUTPUT": true, "FORWARD": true, "PREROUTING": true, "POSTROUTING": true}
	var lines []string
	table := ""
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "*"):
			table = line[1:]
		case strings.HasPrefix(line, ":"):
			f := strings.Fields(line[1:])
			if len(f) >= 2 && builtin[f[0]] && f[1] == "ACCEPT" {
				continue
			}
			if len(f) >= 2 {
				lines = append(lines, table+" chain "+f[0]+" "+f[1])
			}
		case strings.HasPrefix(line, "-"):
			lines = append(lines, table+" "+line)
		}
	}
	slices.Sort(lines)
	return lines
}

var (
	// Counters and interface statistics change without a run.
	countersRE = regexp.MustCompile(`\[\d+:\d+\]`)
	// ip -o link: the qlen and state of an interface are not the run's.
	linkNoiseRE = regexp.MustCompile(`\\\s+link/.*$|state \S+ |mode \S+ |group \S+ |qlen \d+`)
)

func cleanLines(out string) []string {
	var lines []string
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = countersRE.ReplaceAllString(line, "")
		line = linkNoiseRE.ReplaceAllString(line, "")
		lines = append(lines, line)
	}
	slices.Sort(lines)
	return lines
}

// mountPoints are the mount points of /proc/self/mountinfo.
func mountPoints() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 {
			points = append(points, unescapeMount(fields[4]))
		}
	}
	slices.Sort(points)
	return points, sc.Err()
}

func unescapeMount(s string) string {
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(s)
}

// processesOf lists the running processes whose executable's base name is
// one of names, as "name pid".
func processesOf(names ...string) ([]string, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var procs []string
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(cmdline) == 0 {
			continue
		}
		argv0 := filepath.Base(strings.SplitN(string(cmdline), "\x00", 2)[0])
		if slices.Contains(names, argv0) {
			procs = append(procs, argv0+" "+e.Name())
		}
	}
	slices.Sort(procs)
	return procs, nil
}

// Compare returns what differs between two snapshots, one line a
// difference; none when the run left the machine as it found it.
func Compare(before, after map[string][]string) []string {
	var diffs []string
	keys := map[string]bool{}
	for k := range before {
		keys[k] = true
	}
	for k := range after {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	slices.Sort(sorted)
	for _, k := range sorted {
		count := map[string]int{}
		for _, l := range before[k] {
			count[l]--
		}
		for _, l := range after[k] {
			count[l]++
		}
		lines := make([]string, 0, len(count))
		for l := range count {
			lines = append(lines, l)
		}
		slices.Sort(lines)
		for _, l := range lines {
			switch n := count[l]; {
			case n < 0:
				diffs = append(diffs, fmt.Sprintf("%s: gone: %s", k, l))
			case n > 0:
				diffs = append(diffs, fmt.Sprintf("%s: added: %s", k, l))
			}
		}
	}
	return diffs
}

// WriteSnapshot and ReadSnapshot keep a snapshot in a file.
func WriteSnapshot(path string, snap map[string][]string) error {
	data, err := json.MarshalIndent(snap, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// ReadSnapshot reads what WriteSnapshot wrote.
func ReadSnapshot(path string) (map[string][]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	snap := map[string][]string{}
	if err := json.Unmarshal(data, &snap); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return snap, nil
}
