package kubectlplugin

import (
	"bytes"
	"fmt"
	"io"
	"os/exec"

	"github.com/spf13/cobra"
)

// completeExecutable is what kubectl 1.26+ runs to complete "kubectl
// budgetguard ...": cmd/kubectl-budgetguard/kubectl_complete-budgetguard,
// which make build installs beside the plugin.
const completeExecutable = "kubectl_complete-budgetguard"

// completionLong is the help of the completion command. cobra's own says
// the script completes the program, which here is kubectl-budgetguard
// typed as one word; what a user types is "kubectl budgetguard", which
// only kubectl's completion can complete.
const completionLong = `Print a shell completion script for kubectl budgetguard.

Two commands run the plugin, and they complete differently:

  kubectl budgetguard ...   kubectl's own completion completes it (kubectl
                            1.26 and later): it runs ` + completeExecutable + `
                            from PATH, which make build puts in bin/ beside
                            kubectl-budgetguard (krew: see its caveats).
  kubectl-budgetguard ...   the script this command prints completes it.

A plugin cannot register completion for a word after "kubectl" without
replacing kubectl's, so the bash and zsh scripts also load kubectl's own
completion (kubectl completion bash|zsh) when kubectl is on PATH and its
completion is not loaded yet. Then one line completes both:

  source <(kubectl budgetguard completion bash)   # or zsh
  kubectl budgetguard why -n shop <TAB>

For fish and PowerShell, load kubectl's completion as kubectl completion
--help says; the script here completes kubectl-budgetguard only.`

// newCompletionCommand returns "completion SHELL", in place of cobra's
// default one, for bash, zsh, fish and powershell.
func newCompletionCommand(out, errOut io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:       "completion (bash | zsh | fish | powershell)",
		Short:     "Print a shell completion script (bash, zsh, fish or powershell)",
		Long:      completionLong,
		ValidArgs: []string{"bash", "zsh", "fish", "powershell"},
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{fmt.Errorf("completion takes exactly one shell (bash, zsh, fish or powershell); got %d arguments", len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			var script bytes.Buffer
			root := cmd.Root()
			var err error
			switch args[0] {
			case "bash":
				err = root.GenBashCompletionV2(&script, true)
				script.WriteString(loadKubectlBash)
			case "zsh":
				err = root.GenZshCompletion(&script)
				script.WriteString(loadKubectlZsh)
			case "fish":
				err = root.GenFishCompletion(&script, true)
			case "powershell":
				err = root.GenPowerShellCompletionWithDesc(&script)
			default:
				return usageError{fmt.Errorf("completion: unknown shell %q; use bash, zsh, fish or powershell", args[0])}
			}
			if err != nil {
				return err
			}
			if _, err := exec.LookPath(completeExecutable); err != nil {
				fmt.Fprintf(errOut, "warning: %s is not on PATH: kubectl budgetguard <TAB> completes nothing until it is (make build puts it in bin/)\n", completeExecutable)
			}
			_, err = out.Write(script.Bytes())
			return err
		},
	}
	return cmd
}

// loadKubectlBash, after cobra's script for kubectl-budgetguard, loads
// kubectl's completion if none is registered for kubectl: kubectl's is
// what completes "kubectl budgetguard", through kubectl_complete-budgetguard.
// A kubectl completion already there (kubectl's own, or bash-completion's
// lazily loaded one) is left alone.
const loadKubectlBash = `
# kubectl budgetguard <TAB> is completed by kubectl's own completion (kubectl
# 1.26+), which runs kubectl_complete-budgetguard from PATH; load it unless
# a completion for kubectl is there already.
if ! complete -p kubectl >/dev/null 2>&1 && command -v kubectl >/dev/null 2>&1; then
	# shellcheck disable=SC1090
	source <(kubectl completion bash)
fi
`

// loadKubectlZsh is loadKubectlBash for zsh, run only when the script is
// sourced (not when compinit autoloads it as _kubectl-budgetguard).
const loadKubectlZsh = `
# kubectl budgetguard <TAB> is completed by kubectl's own completion (kubectl
# 1.26+), which runs kubectl_complete-budgetguard from PATH; load it unless
# a completion for kubectl is there already.
if [ "$funcstack[1]" != "_kubectl-budgetguard" ] && (( ! ${+_comps[kubectl]} )) && (( ${+commands[kubectl]} )); then
	source <(kubectl completion zsh)
fi
`
