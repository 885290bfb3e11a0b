package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestKubectlPluginCompletion: with kubectl-budgetguard and
// kubectl_complete-budgetguard on PATH, as make build leaves them in bin/,
// and the pinned kubectl, `source <(kubectl budgetguard completion bash)` in
// a bash without any completion loaded completes "kubectl budgetguard
// l<TAB>" (through kubectl's completion, which it loads, and
// kubectl_complete-budgetguard) and "kubectl-budgetguard l<TAB>" (through
// its own).
func TestKubectlPluginCompletion(t *testing.T) {
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "bin")
	buildBinaries(t, bin)
	script, err := os.ReadFile(filepath.Join(root, "cmd", "kubectl-budgetguard", "kubectl_complete-budgetguard"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "kubectl_complete-budgetguard"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	runOutput(t, filepath.Join("hack", "kubectl.sh"), "version", "--client")
	if err := os.Symlink(filepath.Join(root, "_output", "tools", "kubectl"), filepath.Join(bin, "kubectl")); err != nil {
		t.Fatal(err)
	}

	// The completion functions need bash-completion's
	// _get_comp_words_by_ref; this stands in for it, for words without "="
	// or ":". complete_at completes the words given, the last one partly
	// typed, with the function complete registered for the first.
	const bash = `_get_comp_words_by_ref() { cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD-1]}; words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD; }
complete_at() {
	COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}; COMPREPLY=()
	local spec fn
	spec=$(complete -p "$1") || return 1
	fn=${spec##*-F }; fn=${fn%% *}
	"$fn" "$1" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
	echo "$* => ${COMPREPLY[*]}"
}
source <(kubectl budgetguard completion bash)
complete_at kubectl budgetguard l
complete_at kubectl budgetguard why -o n
complete_at kubectl-budgetguard l
`
	cmd := exec.Command("bash", "--norc", "--noprofile", "-c", bash)
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	for _, want := range []string{"kubectl budgetguard l => lint", "kubectl budgetguard why -o n => name", "kubectl-budgetguard l => lint"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("bash output does not contain %q:\n%s", want, out)
		}
	}
}
