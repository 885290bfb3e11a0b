package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/budgetguard/budgetguard/internal/testmain"
	"github.com/budgetguard/budgetguard/sandbox"
)

// TestRunChartRemovesItsWorkDir: run-chart removes the temporary directory
// it made, also when it refuses to start (here: no API server answers).
func TestRunChartRemovesItsWorkDir(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	kubeconfig := filepath.Join(t.TempDir(), "sandbox.kubeconfig")
	writeKubeconfig(t, kubeconfig, sandbox.KubeconfigCluster)
	res := testmain.Run(t, "run-chart", "--kubeconfig", kubeconfig)
	if res.Code != exitError || !strings.Contains(res.Stderr, "list the release's Deployments") {
		t.Errorf("exit code %d, stderr %q; want %d and the failed list", res.Code, res.Stderr, exitError)
	}
	left, err := filepath.Glob(filepath.Join(tmp, "budgetguard-run-chart-*"))
	if err != nil || len(left) > 0 {
		t.Errorf("run-chart left %v behind (%v)", left, err)
	}
}
