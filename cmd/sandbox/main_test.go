package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/budgetguard/budgetguard/internal/testmain"
)

func TestMain(m *testing.M) { testmain.Main(m, main) }

func TestHelpDocumentsTheCommandAndItsFlags(t *testing.T) {
	res := testmain.Run(t, "--help")
	if res.Code != 0 {
		t.Errorf("--help: exit code %d, want 0", res.Code)
	}
	for _, want := range []string{"run", "sandbox run --compare examples/scenarios/preemption-under-pdb.yaml"} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("--help does not mention %q:\n%s", want, res.Stdout)
		}
	}
	if strings.Contains(res.Stdout, "--version") {
		t.Errorf("--help offers --version, which this command does not implement:\n%s", res.Stdout)
	}

	res = testmain.Run(t, "run", "--help")
	if res.Code != 0 {
		t.Errorf("run --help: exit code %d, want 0", res.Code)
	}
	for _, want := range []string{
		"run SCENARIO", "--compare", "DefaultPreemption", "DefaultEvictor",
		"--output", "table", "json", "--verbose", "stderr", "stdout", "Exit status",
		"manifests/scheduler/scheduler-config.yaml", "manifests/descheduler/policy.yaml",
	} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("run --help does not mention %q:\n%s", want, res.Stdout)
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
			res := testmain.Run(t, tc.args...)
			if res.Code != exitUsage {
				t.Errorf("exit code %d, want %d", res.Code, exitUsage)
			}
			if res.Stdout != "" {
				t.Errorf("stdout is not empty:\n%s", res.Stdout)
			}
			for _, w := range tc.want {
				if !strings.Contains(res.Stderr, w) {
					t.Errorf("stderr does not say %q:\n%s", w, res.Stderr)
				}
			}
		})
	}
}

func TestMissingScenarioFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing.yaml")
	res := testmain.Run(t, "run", path)
	if res.Code != exitError {
		t.Errorf("exit code %d, want %d", res.Code, exitError)
	}
	if res.Stdout != "" {
		t.Errorf("stdout is not empty:\n%s", res.Stdout)
	}
	if !strings.Contains(res.Stderr, path) || !strings.Contains(res.Stderr, "no such file") {
		t.Errorf("stderr does not name the missing file:\n%s", res.Stderr)
	}
}

func TestInvalidScenarioNamesDocumentAndField(t *testing.T) {
	path := testmain.WriteFile(t, t.TempDir(), "bad.yaml", `apiVersion: sandbox.budgetguard.io/v1alpha1
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
`)
	res := testmain.Run(t, "run", "--compare", path)
	if res.Code != exitError {
		t.Errorf("exit code %d, want %d", res.Code, exitError)
	}
	if res.Stdout != "" {
		t.Errorf("stdout is not empty:\n%s", res.Stdout)
	}
	for _, want := range []string{"invalid scenario", path, "document 2 (PodDisruptionBudget shop/web)", "spec.maxUnavailabel"} {
		if !strings.Contains(res.Stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, res.Stderr)
		}
	}
	// The scenario is rejected before any control plane starts.
	if strings.Contains(res.Stderr, "control plane") {
		t.Errorf("a control plane was started for an invalid scenario:\n%s", res.Stderr)
	}
}
