package realnode

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Down stops everything Up started and undoes what it changed, in an order
// that lets each step succeed: the kubelet first (it would restart
// containers), then every process in the pods' cgroups and containerd's
// shims, containerd, the control plane; then the mounts under the run's
// directories, the pods' cgroups, the interfaces, the iptables rules,
// ip_forward, and the files. Every step runs even when one before it
// failed, and running Down twice, or with nothing up, is harmless. It
// returns every step's error.
func Down(l Layout, logf func(string, ...any)) error {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	st, err := l.readState()
	haveState := err == nil
	var errs []error
	note := func(err error) {
		if err != nil {
			errs = append(errs, err)
			logf("%v", err)
		}
	}

	note(stopPID(l, "spare-node"))
	note(stopPID(l, "kubelet"))
	note(killPodProcesses())
	note(killShims(l))
	for _, name := range []string{"containerd", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"} {
		note(stopPID(l, name))
	}
	note(stopStrays(l))
	note(unmountUnder(l.StateDir, l.RunDir))
	note(removePodCgroups())

	for _, link := range []string{BridgeName, NodeLink} {
		if exec.Command("ip", "link", "show", link).Run() == nil {
			note(run("ip", "link", "del", link))
		}
	}
	note(removeRules())
	if haveState && st.IPForward != "" {
		note(os.WriteFile(ipForwardPath, []byte(st.IPForward+"\n"), 0o644))
	}
	if haveState {
		for _, p := range st.Created {
			note(removeAll(p))
		}
	}
	note(removeAll(l.StateDir))
	note(removeAll(l.RunDir))
	if !haveState && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("read the run's state: %w (ip_forward and the paths it created were not restored)", err))
	}
	return errors.Join(errs...)
}

// stopPID stops the process whose pid Up recorded, if it is still that
// process: SIGTERM, then SIGKILL after 10 s.
func stopPID(l Layout, name string) error {
	data, err := os.ReadFile(l.pidFile(name))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	// "<pid> <the program's base name>": a pid that now runs another
	// program is left alone.
	f := strings.Fields(string(data))
	if len(f) != 2 {
		return fmt.Errorf("%s: want \"<pid> <program>\", have %q", l.pidFile(name), data)
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil {
		return fmt.Errorf("%s: %w", l.pidFile(name), err)
	}
	name = f[1]
	if !isProcess(pid, name) {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if !isProcess(pid, name) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for range 50 {
		if !isProcess(pid, name) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", name, pid)
}

// isProcess tells whether pid runs a program called name (and is not a
// zombie).
func isProcess(pid int, name string) bool {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(cmdline) == 0 {
		return false
	}
	if filepath.Base(strings.SplitN(string(cmdline), "\x00", 2)[0]) != name {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	if i := strings.LastIndexByte(string(stat), ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
		return false
	}
	return true
}

// stopStrays stops the run's processes that no pid file named (a pid file
// lost, a run that Up left half-way): every process whose command line
// names the run's directories, and the spare node's heartbeat.
func stopStrays(l Layout) error {
	find := func() map[int]string {
		found := map[int]string{}
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err != nil || len(cmdline) == 0 {
				continue
			}
			args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
			base := filepath.Base(args[0])
			ours := base == "e2enode" && slices.Contains(args, "spare-node")
			for _, a := range args[1:] {
				if strings.Contains(a, l.RunDir) || strings.Contains(a, l.StateDir) {
					ours = true
				}
			}
			if ours && isProcess(pid, base) {
				found[pid] = base
			}
		}
		return found
	}
	for round := range 60 {
		found := find()
		if len(found) == 0 {
			return nil
		}
		sig := syscall.SIGTERM
		if round >= 30 {
			sig = syscall.SIGKILL
		}
		for pid := range found {
			_ = syscall.Kill(pid, sig)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("processes of the run are still running after SIGKILL: %v", find())
}

// podCgroupDirs are the kubelet's pod cgroups on this host: kubepods under
// every cgroup v1 hierarchy, or under the v2 root.
func podCgroupDirs() []string {
	if !CgroupV1() {
		return []string{"/sys/fs/cgroup/kubepods"}
	}
	m, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods")
	return m
}

// killPodProcesses kills every process in the pods' cgroups.
func killPodProcesses() error {
	for range 20 {
		var pids []int
		for _, root := range podCgroupDirs() {
			_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
				if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
					return nil
				}
				data, _ := os.ReadFile(p)
				for _, f := range strings.Fields(string(data)) {
					if pid, err := strconv.Atoi(f); err == nil {
						pids = append(pids, pid)
					}
				}
				return nil
			})
		}
		if len(pids) == 0 {
			return nil
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return errors.New("processes are still left in the pods' cgroups after 20 rounds of SIGKILL")
}

// killShims kills containerd's shims of this run (their command line names
// the run's containerd socket).
func killShims(l Layout) error {
	sock := l.ContainerdSocket()
	for range 20 {
		entries, err := os.ReadDir("/proc")
		if err != nil {
			return err
		}
		left := 0
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err != nil {
				continue
			}
			args := strings.Split(string(cmdline), "\x00")
			if !strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") || !slices.Contains(args, sock) {
				continue
			}
			if isProcess(pid, filepath.Base(args[0])) {
				left++
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if left == 0 {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return errors.New("containerd shims of the run are still running after 20 rounds of SIGKILL")
}

// unmountUnder unmounts every mount point under the directories, deepest
// first (lazily when a plain unmount fails).
func unmountUnder(dirs ...string) error {
	points, err := mountPoints()
	if err != nil {
		return err
	}
	var ours []string
	for _, p := range points {
		for _, d := range dirs {
			if p == d || strings.HasPrefix(p, d+"/") {
				ours = append(ours, p)
			}
		}
	}
	slices.SortFunc(ours, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	var errs []error
	for _, p := range ours {
		if err := syscall.Unmount(p, 0); err != nil {
			if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
			}
		}
	}
	return errors.Join(errs...)
}

// removePodCgroups removes the kubelet's cgroups, deepest first (a cgroup
// is removed with rmdir, and only once it has no children).
func removePodCgroups() error {
	var errs []error
	for _, root := range podCgroupDirs() {
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		slices.SortFunc(dirs, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
		for _, d := range dirs {
			var err error
			for range 50 {
				if err = syscall.Rmdir(d); err == nil || errors.Is(err, syscall.ENOENT) {
					err = nil
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

// removeRules deletes every iptables rule the run added (they carry its
// comment), whether or not the state recorded them.
func removeRules() error {
	var errs []error
	for _, r := range dnatRules() {
		for exec.Command("iptables", ruleArgs("-C", r)...).Run() == nil {
			if err := run("iptables", ruleArgs("-D", r)...); err != nil {
				errs = append(errs, err)
				break
			}
		}
	}
	out, err := exec.Command("iptables-save").Output()
	if err == nil && strings.Contains(string(out), ruleComment) {
		errs = append(errs, fmt.Errorf("iptables still holds rules commented %q:\n%s", ruleComment, out))
	}
	return errors.Join(errs...)
}

func removeAll(p string) error {
	if err := os.RemoveAll(p); err != nil {
		return fmt.Errorf("remove %s: %w", p, err)
	}
	return nil
}
