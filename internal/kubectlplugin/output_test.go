package kubectlplugin

import (
	"bytes"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericclioptions"
)

// TestPrintNamesKeepsNamespaces: -o name prints kubectl's TYPE/NAME and the
// namespace, which kubectl's -o name leaves out, so that lint -A tells
// apart the namespaces of its findings.
func TestPrintNamesKeepsNamespaces(t *testing.T) {
	pf := genericclioptions.NewPrintFlags("")
	*pf.OutputFormat = formatName
	p, err := pf.ToPrinter()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err = printNames(p, &out, []ObjectInfo{
		{Kind: "PodDisruptionBudget", Namespace: "shop", Name: "web"},
		{Kind: "Pod", Namespace: "shop", Name: "web-0"},
		{Kind: "PodDisruptionBudget", Namespace: "shop", Name: "web"},
		{Kind: "PodDisruptionBudget", Namespace: "bank", Name: "web"},
		{Kind: "PodUnavailableBudget", Namespace: "bank", Name: "guard"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "poddisruptionbudget.policy/web -n shop\npod/web-0 -n shop\npoddisruptionbudget.policy/web -n bank\npodunavailablebudget.policy.kruise.io/guard -n bank\n"
	if out.String() != want {
		t.Errorf("-o name:\n%s\nwant:\n%s", out.String(), want)
	}
}

// TestNoShowManagedFields: the output is no API object and has no
// managedFields, so --show-managed-fields, which kubectl's print flags
// bring, is not offered.
func TestNoShowManagedFields(t *testing.T) {
	for _, cmd := range []string{"why", "lint"} {
		_, out, _ := run(cmd, "--help")
		if strings.Contains(out, "show-managed-fields") {
			t.Errorf("%s --help offers --show-managed-fields:\n%s", cmd, out)
		}
	}
	if code, _, errOut := run("lint", "--show-managed-fields"); code != ExitUsage || !strings.Contains(errOut, "unknown flag: --show-managed-fields") {
		t.Errorf("lint --show-managed-fields: exit code %d, stderr %q; want %d and an unknown flag", code, errOut, ExitUsage)
	}
	// -o and the template flags stay.
	for _, flag := range []string{"--output", "--template", "--allow-missing-template-keys"} {
		if _, out, _ := run("lint", "--help"); !strings.Contains(out, flag) {
			t.Errorf("lint --help does not offer %s", flag)
		}
	}
}

// TestCompletionCommand: the completion scripts complete kubectl-budgetguard
// (cobra's), and those for bash and zsh load kubectl's own completion,
// which completes "kubectl budgetguard" through
// kubectl_complete-budgetguard; the help says how the two forms complete.
func TestCompletionCommand(t *testing.T) {
	for shell, want := range map[string][]string{
		"bash":       {"__start_kubectl-budgetguard", "complete -p kubectl", "source <(kubectl completion bash)"},
		"zsh":        {"#compdef kubectl-budgetguard", "source <(kubectl completion zsh)"},
		"fish":       {"complete -c kubectl-budgetguard"},
		"powershell": {"Register-ArgumentCompleter"},
	} {
		code, out, errOut := run("completion", shell)
		if code != ExitOK {
			t.Errorf("completion %s: exit code %d, stderr %q", shell, code, errOut)
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("completion %s does not contain %q", shell, w)
			}
		}
	}
	_, out, _ := run("completion", "--help")
	for _, w := range []string{"kubectl budgetguard ...", "kubectl_complete-budgetguard", "1.26 and later", "source <(kubectl budgetguard completion bash)"} {
		if !strings.Contains(out, w) {
			t.Errorf("completion --help does not say %q:\n%s", w, out)
		}
	}
	if code, _, errOut := run("completion", "tcsh"); code != ExitUsage || !strings.Contains(errOut, `unknown shell "tcsh"`) {
		t.Errorf("completion tcsh: exit code %d, stderr %q; want %d", code, errOut, ExitUsage)
	}
}
