// Package integration tests budgetguard against the real control plane of
// package sandbox: etcd, kube-apiserver, the disruption, ReplicaSet and
// Deployment controllers, and the simulated kubelet, all in this process.
package integration

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/budgetguard/budgetguard/internal/audit"
	"github.com/budgetguard/budgetguard/internal/testenv"
	"github.com/budgetguard/budgetguard/sandbox"
)

// cp is the control plane that all tests of this package share.
var cp *sandbox.ControlPlane

var (
	verbose   = flag.Bool("sandbox.verbose", false, "leave the logs of etcd, kube-apiserver and the controllers on")
	keepAudit = flag.String("audit.keep", "", "when a test failed, copy kube-apiserver's audit log to this path before it is removed (to trace a verdict of the auditor)")
)

// simulatedPUBLabel marks the PUBs whose status the sandbox simulates, as
// OpenKruise's controller would write it; other tests write their PUBs'
// status by hand.
const simulatedPUBLabel = "sandbox.budgetguard.io/simulate-status"

// auditLog is kube-apiserver's audit log, written with the flags of
// audit.APIServerFlags, for the tests that run the independent auditor.
var auditLog string

// TestMain starts one control plane for the whole package and stops it after
// the tests. Starting one takes about 4 s and holds about 300 MB, and only
// one can run in a process at a time (kube-apiserver changes process-wide
// feature gates), so tests do not get their own. They isolate themselves
// instead: each works in its own namespace and on its own Nodes (see
// env.NewNamespace and env.CreateNode).
//
// klog's flags are registered (by kube-apiserver's test helpers, which the
// sandbox imports): go test ./test/integration/ -args -v=4 shows the
// simulated kubelet's messages, -sandbox.verbose everything.
func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "budgetguard-integration-audit-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: create the audit log's directory: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	flags, logPath, err := audit.APIServerFlags(dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: audit flags: %v\n", err)
		return 1
	}
	auditLog = logPath
	opts := sandbox.DefaultOptions()
	opts.Verbose = *verbose
	if *gangs {
		flags = append(flags, gangAPIServerFlags()...)
	}
	opts.APIServerFlags = flags
	opts.SimulatePUBStatus = true
	opts.PUBStatusSelector = labels.SelectorFromSet(labels.Set{simulatedPUBLabel: "true"})

	began := time.Now()
	cp, err = sandbox.Start(ctx, opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: start the sandbox control plane: %v\n", err)
		return 1
	}
	env = testenv.New(cp.Client).WithKruise(cp.KruiseClient).WithConfig(cp.Config)
	fmt.Printf("sandbox control plane started in %s\n", time.Since(began).Round(time.Millisecond))

	code := m.Run()
	if code != 0 && *keepAudit != "" {
		if err := copyFile(auditLog, *keepAudit); err != nil {
			fmt.Fprintf(os.Stderr, "keep the audit log: %v\n", err)
		} else {
			fmt.Printf("audit log kept in %s\n", *keepAudit)
		}
	}
	if differentialSummary != "" {
		fmt.Println(differentialSummary)
	}

	began = time.Now()
	if err := cp.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: stop the sandbox control plane: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	fmt.Printf("sandbox control plane stopped in %s\n", time.Since(began).Round(time.Millisecond))
	if hwm := peakRSS(); hwm != "" {
		fmt.Printf("peak RSS (VmHWM) of the test process: %s\n", hwm)
	}
	return code
}

// copyFile copies the file at from to a new file at to.
func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o644)
}

// peakRSS returns the VmHWM line of /proc/self/status, or "" where there is
// no such file.
func peakRSS() string {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return ""
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
