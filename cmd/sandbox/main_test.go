package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/budgetguard/budgetguard/internal/testmain"
	"github.com/budgetguard/budgetguard/internal/testobj"
	"github.com/budgetguard/budgetguard/internal/version"
)

func TestMain(m *testing.M) { testmain.Main(m, main) }

func TestHelpDocumentsTheCommandAndItsFlags(t *testing.T) {
	res := testmain.Run(t, "--help")
	if res.Code != 0 {
		t.Errorf("--help: exit code %d, want 0", res.Code)
	}
	for _, want := range []string{"run", "validate", "version", "--version", "sandbox run --compare examples/scenarios/preemption-under-pdb.yaml"} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("--help does not mention %q:\n%s", want, res.Stdout)
		}
	}

	res = testmain.Run(t, "run", "--help")
	if res.Code != 0 {
		t.Errorf("run --help: exit code %d, want 0", res.Code)
	}
	for _, want := range []string{
		"run SCENARIO", "--compare", "DefaultPreemption", "DefaultEvictor",
		"--output", "table", "json", "--verbose", "stderr", "stdout", "Exit status", "--html",
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
		{"empty --html", []string{"run", "--html", "", "a.yaml"}, []string{`invalid value "" for --html`, "path of the HTML page"}},
		{"--html a directory", []string{"run", "--html", ".", "a.yaml"}, []string{`invalid value "." for --html: it is a directory`}},
		{"unknown command", []string{"frob"}, []string{`unknown command "frob"`}},
		{"validate without a scenario", []string{"validate"}, []string{"exactly one argument"}},
		{"validate two scenarios", []string{"validate", "a.yaml", "b.yaml"}, []string{"exactly one argument", "got 2"}},
		{"version with an argument", []string{"version", "now"}, []string{"no arguments"}},
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
	path := testmain.WriteFile(t, t.TempDir(), "bad.yaml", scenarioHeader+setupStep+shopNamespace+`---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: shop}
spec:
  maxUnavailabel: 1
`)
	res := testmain.Run(t, "run", "--compare", path)
	expectError(t, res, "invalid scenario", path, "document 2 (PodDisruptionBudget shop/web)", "spec.maxUnavailabel")
	// The scenario is rejected before any control plane starts.
	if strings.Contains(res.Stderr, "control plane") {
		t.Errorf("a control plane was started for an invalid scenario:\n%s", res.Stderr)
	}
}

func TestVersion(t *testing.T) {
	want := version.Get().String() + "\n"
	if !strings.HasPrefix(want, "budgetguard ") {
		t.Fatalf("version.Get().String() = %q, want it to start with budgetguard", want)
	}
	for _, args := range [][]string{{"--version"}, {"version"}} {
		res := testmain.Run(t, args...)
		if res.Code != exitOK || res.Stdout != want || res.Stderr != "" {
			t.Errorf("sandbox %s: exit code %d, stdout %q, stderr %q; want 0, %q and nothing", strings.Join(args, " "), res.Code, res.Stdout, res.Stderr, want)
		}
	}
}

// exampleScenarios are the scenario files under examples/scenarios.
func exampleScenarios(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "examples", "scenarios", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios in examples/scenarios: %v", err)
	}
	return files
}

func TestValidateExamples(t *testing.T) {
	for _, path := range exampleScenarios(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			res := testmain.Run(t, "validate", path)
			if res.Code != exitOK || res.Stdout != path+" is valid\n" {
				t.Errorf("exit code %d, stdout %q, want 0 and %q; stderr:\n%s", res.Code, res.Stdout, path+" is valid\n", res.Stderr)
			}
		})
	}
}

func TestValidateRejects(t *testing.T) {
	const scenario = scenarioHeader + "scheduler: {config: sched.yaml}\ndescheduler: {policy: policy.yaml}\n" + setupStep + shopNamespace
	goodConfig := testobj.SchedulerConfig{}.YAML()
	goodPolicy := testobj.DeschedulerPolicy{BudgetAware: true, Strategy: "RemoveDuplicates"}.YAML()
	for _, tc := range []struct {
		name                     string
		scenario, config, policy string
		want                     []string
	}{
		{
			name:     "a PUB OpenKruise rejects",
			scenario: scenario + "---\napiVersion: policy.kruise.io/v1alpha1\nkind: PodUnavailableBudget\nmetadata: {name: web, namespace: shop}\nspec: {maxUnavailable: 1}\n",
			config:   goodConfig, policy: goodPolicy,
			want: []string{"invalid scenario", "document 2 (PodUnavailableBudget shop/web)", "spec", "selector", "targetRef"},
		},
		{
			name:     "BudgetAwarePreemption args with actuation Kill",
			scenario: scenario,
			config:   testobj.SchedulerConfig{Args: "{actuation: Kill}"}.YAML(), policy: goodPolicy,
			want: []string{"invalid scenario", "sched.yaml", "args.actuation", "Kill"},
		},
		{
			name:     "an expect block with an unknown field",
			scenario: scenarioHeader + "scheduler: {config: sched.yaml}\ndescheduler: {policy: policy.yaml}\n" + setupStep + "expect: {budgetguard: {disruption: 1}}\n" + shopNamespace,
			config:   goodConfig, policy: goodPolicy,
			want: []string{"invalid scenario", "document 0 (Scenario): expect.budgetguard.disruption: unknown field"},
		},
		{
			name:     "a bad policy and no deschedule step",
			scenario: scenario,
			config:   goodConfig, policy: strings.Replace(goodPolicy, "kind: DeschedulerPolicy", "kind: DeschedulerPolicy\nmaxNoOfPodsToEvictPerNod: 1", 1),
			want: []string{"invalid scenario", "policy.yaml", "maxNoOfPodsToEvictPerNod"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := testmain.WriteFile(t, dir, "bad.yaml", tc.scenario)
			testmain.WriteFile(t, dir, "sched.yaml", tc.config)
			testmain.WriteFile(t, dir, "policy.yaml", tc.policy)
			res := testmain.Run(t, "validate", path)
			expectError(t, res, append(tc.want, path)...)
		})
	}
}

// TestRunValidatesBeforeAnyRun: with --compare, a mistake in the
// budgetguard-only args stops the command before the upstream run starts a
// control plane.
func TestRunValidatesBeforeAnyRun(t *testing.T) {
	dir := t.TempDir()
	path := testmain.WriteFile(t, dir, "s.yaml", `apiVersion: sandbox.budgetguard.io/v1alpha1
kind: Scenario
metadata: {name: kill}
scheduler: {config: sched.yaml}
steps:
- apply: {phase: setup}
---
apiVersion: v1
kind: Node
metadata: {name: node-a}
`)
	testmain.WriteFile(t, dir, "sched.yaml", testobj.SchedulerConfig{Args: "{actuation: Kill}"}.YAML())
	res := testmain.Run(t, "run", "--compare", path)
	expectError(t, res, "args.actuation", "Kill")
	if strings.Contains(res.Stderr, "control plane") {
		t.Errorf("a control plane was started:\n%s", res.Stderr)
	}
}

// TestRunChecksExpect: a run that differs from the expect block exits 1,
// says what differed, and still prints the report, and writes the page
// --html asks for (in a directory it creates) and says where.
func TestRunChecksExpect(t *testing.T) {
	dir := t.TempDir()
	page := filepath.Join(dir, "out", "report.html")
	path := testmain.WriteFile(t, dir, "s.yaml", scenarioHeader+setupStep+`expect:
  budgetguard: {disruptions: 1, violations: 0}
---
apiVersion: v1
kind: Node
metadata: {name: node-a}
`)
	res := testmain.Run(t, "run", "--html", page, path)
	if res.Code != exitError {
		t.Errorf("exit code %d, want %d; stderr:\n%s", res.Code, exitError, res.Stderr)
	}
	if data, err := os.ReadFile(page); err != nil || !strings.Contains(string(data), `id="timeline-data"`) || !strings.Contains(string(data), "VERDICT") {
		t.Errorf("--html %s: no timeline page (%v):\n%.300s", page, err, data)
	}
	if want := "wrote the timeline page " + page + " (file://"; !strings.Contains(res.Stderr, want) {
		t.Errorf("stderr does not say %q:\n%s", want, res.Stderr)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "out", ".*")); len(left) > 0 {
		t.Errorf("temporary files left beside the page: %v", left)
	}
	if !strings.Contains(res.Stdout, "VERDICT") {
		t.Errorf("no report on stdout:\n%s", res.Stdout)
	}
	if want := "expect block:\n  expect.budgetguard.disruptions: want 1, got 0\n"; !strings.Contains(res.Stderr, want) || strings.Contains(res.Stderr, "expect.budgetguard.violations") {
		t.Errorf("stderr does not say only %q:\n%s", want, res.Stderr)
	}
}

// expectError checks that the command failed with exit code 1, wrote
// nothing to stdout (the report), and said each of want on stderr.
func expectError(t *testing.T, res testmain.Result, want ...string) {
	t.Helper()
	if res.Code != exitError {
		t.Errorf("exit code %d, want %d", res.Code, exitError)
	}
	if res.Stdout != "" {
		t.Errorf("stdout is not empty:\n%s", res.Stdout)
	}
	for _, w := range want {
		if !strings.Contains(res.Stderr, w) {
			t.Errorf("stderr does not say %q:\n%s", w, res.Stderr)
		}
	}
}

// The parts of the scenarios the tests write: a header named bad, one step
// that applies the setup phase, and a namespace shop.
const (
	scenarioHeader = "apiVersion: sandbox.budgetguard.io/v1alpha1\nkind: Scenario\nmetadata: {name: bad}\n"
	setupStep      = "steps:\n- apply: {phase: setup}\n"
	shopNamespace  = "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n"
)
