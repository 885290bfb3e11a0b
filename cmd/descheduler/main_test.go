package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const runMainEnv = "BUDGETGUARD_DESCHEDULER_RUN_MAIN"

// TestMain lets a test run this binary's main with arguments of its choice:
// the test re-executes itself with runMainEnv set.
func TestMain(m *testing.M) {
	if args := os.Getenv(runMainEnv); args != "" {
		os.Args = append([]string{"descheduler"}, strings.Fields(args)...)
		main()
		return
	}
	os.Exit(m.Run())
}

func TestDeschedulerBadPolicyExitsNamingField(t *testing.T) {
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.yaml")
	data := `apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
maxNoOfPodsToEvictPerNod: 3
profiles:
- name: p
  pluginConfig:
  - name: BudgetAwareEvictor
  plugins:
    filter:
      enabled: [BudgetAwareEvictor]
`
	if err := os.WriteFile(policy, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	// No cluster is needed: the policy is checked before any client is built.
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), runMainEnv+"=--policy-config-file="+policy+" --kubeconfig="+filepath.Join(dir, "none"))
	out, err := cmd.CombinedOutput()
	exitErr, ok := err.(*exec.ExitError)
	if !ok || exitErr.ExitCode() == 0 {
		t.Fatalf("descheduler exited with %v, want a non-zero exit; output:\n%s", err, out)
	}
	if !strings.Contains(string(out), "unknown field") || !strings.Contains(string(out), "maxNoOfPodsToEvictPerNod") {
		t.Errorf("output does not name the unknown field:\n%s", out)
	}
}
