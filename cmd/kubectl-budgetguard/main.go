// Command kubectl-budgetguard is the kubectl plugin "kubectl budgetguard":
// "why POD" explains a pod's budget decision, "lint" finds budget designs
// that break the Eviction API. See docs/kubectl-plugin.md.
//
// kubectl_complete-budgetguard, beside this file, is the completion
// executable kubectl 1.26+ runs for "kubectl budgetguard <TAB>": it hands
// the words to this command's cobra "__complete". make build installs both
// in bin/.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/budgetguard/budgetguard/internal/kubectlplugin"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := kubectlplugin.Execute(ctx, os.Args[1:], genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	stop()
	os.Exit(code)
}
