package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runMainEnv makes the test binary run main() instead of the tests, so that
// a test can run the real command in a child process and see its exit code
// and output.
const runMainEnv = "BUDGETGUARD_SANDBOX_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// sandbox runs the command with args in a child process and returns its
// stdout, stderr and exit code.
func sandbox(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out.String(), errOut.String(), 0
	case errors.As(err, &exit):
		return out.String(), errOut.String(), exit.ExitCode()
	default:
		t.Fatalf("running the sandbox command: %v", err)
		return "", "", -1
	}
}

func TestHelpDocumentsTheCommandAndItsFlags(t *testing.T) {
	out, _, code := sandbox(t, "--help")
	if code != 0 {
		t.Errorf("--help: exit code %d, want 0", code)
	}
	for _, want := range []string{"run", "sandbox run --compare examples/scenarios/preemption-under-pdb.yaml"} {
		if !strings.Contains(out, want) {
			t.Errorf("--help does not mention %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "--version") {
		t.Errorf("--help offers --version, which this command does not implement:\n%s", out)
	}

	out, _, code = sandbox(t, "run", "--help")
	if code != 0 {
		t.Errorf("run --help: exit code %d, want 0", code)
	}
	for _, want := range []string{
		"run SCENARIO", "--compare", "DefaultPreemption", "DefaultEvictor",
		"--output", "table", "json", "--verbose", "stderr", "stdout", "Exit status",
		"manifests/scheduler/scheduler-config.yaml", "manifests/descheduler/policy.yaml",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("run --help does not mention %q:\n%s", want, out)
		}
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"bad --output", []string{"run", "--output", "yaml", "scenario.yaml"}, []string{`invalid value "yaml" for --output`, "table or json"}},
		{"no scenario", []string{"run"}, []string{"exactly one argument"}},
		{"two scenarios", []string{"run", "a.yaml", "b.yaml"}, []string{"exactly one argument", "got 2"}},
		{"unknown flag", []string{"run", "--compair", "a.yaml"}, []string{"unknown flag: --compair"}},
		{"unknown command", []string{"frob"}, []string{`unknown command "frob"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := sandbox(t, tc.args...)
			if code != exitUsage {
				t.Errorf("exit code %d, want %d", code, exitUsage)
			}
			if out != "" {
				t.Errorf("stdout is not empty:\n%s", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr does not say %q:\n%s", w, errOut)
				}
			}
		})
	}
}

func TestMissingScenarioFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing.yaml")
	out, errOut, code := sandbox(t, "run", path)
	if code != exitError {
		t.Errorf("exit code %d, want %d", code, exitError)
	}
	if out != "" {
		t.Errorf("stdout is not empty:\n%s", out)
	}
	if !strings.Contains(errOut, path) || !strings.Contains(errOut, "no such file") {
		t.Errorf("stderr does not name the missing file:\n%s", errOut)
	}
}

func TestInvalidScenarioNamesDocumentAndField(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	data := `apiVersion: sandbox.budgetguard.io/v1alpha1
kind: Scenario
metadata: {name: bad}
steps:
- apply: {phase: setup}
---
apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: shop}
spec:
  maxUnavailabel: 1
`
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := sandbox(t, "run", "--compare", path)
	if code != exitError {
		t.Errorf("exit code %d, want %d", code, exitError)
	}
	if out != "" {
		t.Errorf("stdout is not empty:\n%s", out)
	}
	for _, want := range []string{"invalid scenario", path, "document 2 (PodDisruptionBudget shop/web)", "spec.maxUnavailabel"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr does not say %q:\n%s", want, errOut)
		}
	}
	// The scenario is rejected before any control plane starts.
	if strings.Contains(errOut, "control plane") {
		t.Errorf("a control plane was started for an invalid scenario:\n%s", errOut)
	}
}
