//go:build perf

package perf

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	_ "k8s.io/component-base/logs/json/register"
	schedperf "k8s.io/kubernetes/test/integration/scheduler_perf"
)

// repoRoot is the repository, from this package's directory (go test runs
// in it).
const repoRoot = "../.."

func TestMain(m *testing.M) {
	if err := setup(); err != nil {
		fmt.Fprintf(os.Stderr, "test/perf: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	stopLoopCluster()
	os.Exit(code)
}

// setup parses scheduler_perf's flags, puts _output/bin (where
// hack/build-etcd.sh puts etcd) first on PATH, and sends scheduler_perf's
// data files to _output/perf unless -data-items-dir says otherwise.
func setup() error {
	if err := schedperf.InitTests(); err != nil {
		return err
	}
	bin, err := filepath.Abs(filepath.Join(repoRoot, "_output", "bin"))
	if err != nil {
		return err
	}
	if err := os.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH")); err != nil {
		return err
	}
	if _, err := exec.LookPath("etcd"); err != nil {
		return fmt.Errorf("scheduler_perf needs an etcd binary on PATH: run hack/build-etcd.sh (make perf does): %w", err)
	}
	if f := flag.Lookup("data-items-dir"); f != nil && f.Value.String() == "" {
		dir, err := filepath.Abs(filepath.Join(repoRoot, "_output", "perf"))
		if err != nil {
			return err
		}
		if err := f.Value.Set(dir); err != nil {
			return err
		}
	}
	return nil
}
