package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/budgetguard/budgetguard/internal/testmain"
)

func TestMain(m *testing.M) { testmain.Main(m, main) }

func TestDeschedulerBadPolicyExitsNamingField(t *testing.T) {
	dir := t.TempDir()
	policy := testmain.WriteFile(t, dir, "policy.yaml", `apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
maxNoOfPodsToEvictPerNod: 3
profiles:
- name: p
  pluginConfig:
  - name: BudgetAwareEvictor
  plugins:
    filter:
      enabled: [BudgetAwareEvictor]
`)
	// No cluster is needed: the policy is checked before any client is built.
	res := testmain.Run(t, "--policy-config-file="+policy, "--kubeconfig="+filepath.Join(dir, "none"))
	out := res.Output()
	if res.Code == 0 {
		t.Fatalf("descheduler exited with code 0, want a non-zero exit; output:\n%s", out)
	}
	if !strings.Contains(out, "unknown field") || !strings.Contains(out, "maxNoOfPodsToEvictPerNod") {
		t.Errorf("output does not name the unknown field:\n%s", out)
	}
}
