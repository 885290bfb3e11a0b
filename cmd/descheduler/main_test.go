package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/budgetguard/budgetguard/internal/testmain"
	"github.com/budgetguard/budgetguard/manifests"
)

func TestMain(m *testing.M) { testmain.Main(m, main) }

// run runs the descheduler with policy (a policy file's content) and args;
// the kubeconfig names no file, so no cluster is reached, and nothing
// listens (--secure-port=0). It returns the
// path of the policy file and what the command wrote, with klog's escaped
// quotes unescaped, and its exit code.
func run(t *testing.T, policy string, args ...string) (path, out string, code int) {
	t.Helper()
	dir := t.TempDir()
	path = testmain.WriteFile(t, dir, "policy.yaml", policy)
	res := testmain.Run(t, append([]string{"--policy-config-file=" + path, "--kubeconfig=" + filepath.Join(dir, "none"), "--secure-port=0"}, args...)...)
	return path, strings.ReplaceAll(res.Output(), `\"`, `"`), res.Code
}

func TestDeschedulerBadPolicyExitsNamingField(t *testing.T) {
	_, out, code := run(t, `apiVersion: descheduler/v1alpha2
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
	if code == 0 {
		t.Fatalf("descheduler exited with code 0, want a non-zero exit; output:\n%s", out)
	}
	if !strings.Contains(out, "unknown field") || !strings.Contains(out, "maxNoOfPodsToEvictPerNod") {
		t.Errorf("output does not name the unknown field:\n%s", out)
	}
}

// TestDeschedulerStartupErrors: policies the stock descheduler would run
// without BudgetAwareEvictor at some extension point stop the binary.
func TestDeschedulerStartupErrors(t *testing.T) {
	shipped := string(manifests.DeschedulerPolicy)
	// edit replaces old in the shipped policy, and fails the test when the
	// shipped policy no longer contains it (the case would test nothing).
	edit := func(old, new string) string {
		t.Helper()
		if !strings.Contains(shipped, old) {
			t.Fatalf("the shipped policy no longer contains %q", old)
		}
		return strings.ReplaceAll(shipped, old, new)
	}
	for _, tc := range []struct {
		name, policy, want string
	}{
		{
			name:   "field name in another case",
			policy: edit("preevictionfilter:", "preEvictionFilter:"),
			want:   `profiles[0].plugins.preEvictionFilter: unknown field; field names are case-sensitive, write "preevictionfilter"`,
		},
		{
			name:   "BudgetAwareEvictor configured but not enabled",
			policy: edit("      - DefaultEvictor\n      - BudgetAwareEvictor\n", "      - DefaultEvictor\n"),
			want:   `profiles[0] ("budgetguard").pluginConfig[1]: BudgetAwareEvictor is configured but not enabled at filter or preevictionfilter`,
		},
		{
			name:   "v1alpha1",
			policy: "apiVersion: descheduler/v1alpha1\nkind: DeschedulerPolicy\nstrategies:\n  RemoveDuplicates:\n    enabled: true\n",
			want:   "descheduler/v1alpha1 is not supported; use descheduler/v1alpha2",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, out, code := run(t, tc.policy)
			if code == 0 || !strings.Contains(out, tc.want) || !strings.Contains(out, path) {
				t.Errorf("exit code %d, want non-zero with an error naming %s and containing %q; output:\n%s", code, path, tc.want, out)
			}
		})
	}
}

func TestDeschedulerValidateOnly(t *testing.T) {
	path, out, code := run(t, string(manifests.DeschedulerPolicy), "--validate-only")
	if want := "policy " + path + " is valid\n"; code != 0 || out != want {
		t.Errorf("valid policy: exit code %d, output %q; want 0 and %q", code, out, want)
	}

	bad := strings.Replace(string(manifests.DeschedulerPolicy), "preevictionfilter:", "preEvictionFilter:", 1) + "MaxNoOfPodsToEvictPerNode: 3\n"
	path, out, code = run(t, bad, "--validate-only")
	for _, want := range []string{
		"policy " + path + " is invalid",
		`profiles[0].plugins.preEvictionFilter: unknown field`,
		`MaxNoOfPodsToEvictPerNode: unknown field`,
	} {
		if code == 0 || !strings.Contains(out, want) {
			t.Errorf("invalid policy: exit code %d, want non-zero with %q; output:\n%s", code, want, out)
		}
	}
	if strings.Contains(out, "is valid") {
		t.Errorf("invalid policy reported valid:\n%s", out)
	}
}

// TestDeschedulerValidateOnlyPluginNames: a plugin name misspelt under
// plugins.<point>.enabled is refused by --validate-only as the descheduler
// refuses it at start ("configures balance extension point of
// non-existing plugins"), with the field and the misspelt word in the
// message. RemoveDuplicats alone was reported valid; BudgetAwareEvicter
// was refused without the word. The binary without --validate-only stops
// on it too, before it needs a cluster.
func TestDeschedulerValidateOnlyPluginNames(t *testing.T) {
	shipped := string(manifests.DeschedulerPolicy)
	for _, tc := range []struct {
		old, new, want string
	}{
		{
			old:  "      - RemoveDuplicates\n",
			new:  "      - RemoveDuplicats\n",
			want: `profiles[0].plugins.balance.enabled[0]: unknown plugin "RemoveDuplicats"; did you mean "RemoveDuplicates"?`,
		},
		{
			// The first BudgetAwareEvictor enabled is filter's.
			old:  "      - BudgetAwareEvictor\n",
			new:  "      - BudgetAwareEvicter\n",
			want: `profiles[0].plugins.filter.enabled[1]: unknown plugin "BudgetAwareEvicter"; did you mean "BudgetAwareEvictor"?`,
		},
	} {
		if !strings.Contains(shipped, tc.old) {
			t.Fatalf("the shipped policy no longer contains %q", tc.old)
		}
		bad := strings.Replace(shipped, tc.old, tc.new, 1)
		name := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(tc.new), "-"))
		for _, args := range [][]string{{"--validate-only"}, nil} {
			path, out, code := run(t, bad, args...)
			if code == 0 || strings.Contains(out, "is valid") {
				t.Errorf("%s, %v: exit code %d, want non-zero; output:\n%s", name, args, code, out)
			}
			for _, want := range []string{tc.want, path} {
				if !strings.Contains(out, want) {
					t.Errorf("%s, %v: output does not contain %q:\n%s", name, args, want, out)
				}
			}
		}
	}
}

func TestDeschedulerVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}} {
		res := testmain.Run(t, args...)
		out := res.Output()
		// No "Kubernetes v1.37.2": the descheduler links no
		// k8s.io/kubernetes, and package version leaves out what a binary
		// does not link.
		for _, want := range []string{"budgetguard v", "Kubernetes v1.37.2", "descheduler v0.36.0"} {
			if res.Code != 0 || !strings.Contains(out, want) {
				t.Errorf("%v: exit code %d, output %q; want 0 and %q", args, res.Code, out, want)
			}
		}
	}
}

// TestDeschedulerReportsProfiles: at start, once the policy is loaded, the
// binary logs where BudgetAwareEvictor is enabled in each profile (and
// then fails here, having no cluster).
func TestDeschedulerReportsProfiles(t *testing.T) {
	_, out, _ := run(t, string(manifests.DeschedulerPolicy))
	want := `"budgetguard plugins enabled" component="descheduler" profile="budgetguard" plugins="BudgetAwareEvictor@filter,BudgetAwareEvictor@preEvictionFilter"`
	if !strings.Contains(out, want) {
		t.Errorf("output does not contain %s:\n%s", want, out)
	}
}
