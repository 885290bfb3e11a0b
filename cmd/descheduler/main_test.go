package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/budgetguard/budgetguard/internal/testmain"
)

// runMainEnv makes the test binary run main() instead of the tests (see
// package testmain).
const runMainEnv = "BUDGETGUARD_DESCHEDULER_RUN_MAIN"

func TestMain(m *testing.M) { testmain.Main(m, runMainEnv, main) }

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
	res := testmain.Run(t, runMainEnv, "--policy-config-file="+policy, "--kubeconfig="+filepath.Join(dir, "none"))
	out := res.Output()
	if res.Code == 0 {
		t.Fatalf("descheduler exited with code 0, want a non-zero exit; output:\n%s", out)
	}
	if !strings.Contains(out, "unknown field") || !strings.Contains(out, "maxNoOfPodsToEvictPerNod") {
		t.Errorf("output does not name the unknown field:\n%s", out)
	}
}
