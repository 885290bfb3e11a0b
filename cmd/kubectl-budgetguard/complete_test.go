package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// asPlugin makes the test binary run main, as kubectl-budgetguard.
const asPlugin = "KUBECTL_BUDGETGUARD_TEST_AS_PLUGIN"

func TestMain(m *testing.M) {
	if os.Getenv(asPlugin) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// TestCompletionScript runs kubectl_complete-budgetguard as kubectl 1.26+
// does for "kubectl budgetguard <words><TAB>" (the words, then the one to
// complete) with kubectl-budgetguard on PATH, and checks cobra's answer:
// completions, one a line, then :directive.
func TestCompletionScript(t *testing.T) {
	dir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(self, filepath.Join(dir, "kubectl-budgetguard")); err != nil {
		t.Fatal(err)
	}
	script, err := filepath.Abs("kubectl_complete-budgetguard")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{""}, []string{"lint", "why"}},
		{[]string{"l"}, []string{"lint"}},
		{[]string{"lint", "-o", ""}, []string{"wide", "json", "yaml", "name", "jsonpath"}},
		{[]string{"why", "--kubeconfig", "/nonexistent/kubeconfig", ""}, nil},
	}
	for _, tc := range cases {
		cmd := exec.Command(script, tc.args...)
		// Not beside the script: found on PATH, as after make build or a
		// krew install.
		cmd.Env = append(os.Environ(), asPlugin+"=1", "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
		out, err := cmd.Output()
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
		last := lines[len(lines)-1]
		if last != ":4" {
			t.Errorf("%q: last line %q, want the directive :4 (no file completion); output:\n%s", tc.args, last, out)
		}
		var comps []string
		for _, l := range lines[:len(lines)-1] {
			comps = append(comps, strings.SplitN(l, "\t", 2)[0])
		}
		for _, w := range tc.want {
			if !slices.Contains(comps, w) {
				t.Errorf("%q: completions %q lack %q", tc.args, comps, w)
			}
		}
		if tc.want == nil && len(comps) > 0 {
			t.Errorf("%q: completions %q, want none", tc.args, comps)
		}
	}
}

// TestCompletionBashCompletesTheBinary sources `kubectl-budgetguard
// completion bash` in bash, as `source <(...)` does, without kubectl on
// PATH, and completes "kubectl-budgetguard l<TAB>" through the function it
// registers. ("kubectl budgetguard <TAB>" goes through kubectl's
// completion: test/e2e runs that with the pinned kubectl.)
func TestCompletionBashCompletesTheBinary(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	dir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(self, filepath.Join(dir, "kubectl-budgetguard")); err != nil {
		t.Fatal(err)
	}
	// cobra's script needs bash-completion's _get_comp_words_by_ref; this
	// stands in for it, for a plain "kubectl-budgetguard l" (no "=" or ":").
	script := `_get_comp_words_by_ref() { cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD-1]}; words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD; }
source <(kubectl-budgetguard completion bash 2>/dev/null)
complete -p kubectl-budgetguard
complete -p kubectl || echo "no kubectl completion"
COMP_WORDS=(kubectl-budgetguard l); COMP_CWORD=1; COMP_LINE="kubectl-budgetguard l"; COMP_POINT=${#COMP_LINE}
__start_kubectl-budgetguard kubectl-budgetguard l kubectl-budgetguard
echo "COMPREPLY=${COMPREPLY[*]}"
`
	cmd := exec.Command(bash, "--norc", "--noprofile", "-c", script)
	// kubectl-budgetguard alone on PATH: no kubectl, so the script loads
	// no kubectl completion.
	cmd.Env = append(os.Environ(), asPlugin+"=1", "PATH="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	for _, want := range []string{"-F __start_kubectl-budgetguard kubectl-budgetguard", "no kubectl completion", "COMPREPLY=lint"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("bash output does not contain %q:\n%s", want, out)
		}
	}
}
