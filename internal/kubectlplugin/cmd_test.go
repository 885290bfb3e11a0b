package kubectlplugin

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/budgetguard/budgetguard/internal/version"
)

// TestUsageErrors: mistakes on the command line exit 2 with a message, and
// none of them reaches a cluster (the kubeconfig points nowhere).
func TestUsageErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no command", nil, "a command is required"},
		{"why without a pod", []string{"why"}, "exactly one pod name"},
		{"why with two pods", []string{"why", "a", "b"}, "exactly one pod name"},
		{"lint with an argument", []string{"lint", "x"}, `unexpected argument "x"`},
		{"unknown flag", []string{"lint", "--bogus"}, "unknown flag: --bogus"},
		{"unknown output format", []string{"lint", "-o", "xml"}, `--output "xml"`},
		{"unknown output format for why", []string{"why", "p", "-o", "wide"}, `--output "wide"`},
		{"unknown command", []string{"explain"}, `unexpected argument "explain"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			args := append(tc.args, "--kubeconfig", "/nonexistent/kubeconfig")
			code := Execute(context.Background(), args, genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
			if code != ExitUsage {
				t.Errorf("exit code %d, want %d; stderr %q", code, ExitUsage, errOut.String())
			}
			if !strings.Contains(errOut.String(), tc.want) {
				t.Errorf("stderr %q does not contain %q", errOut.String(), tc.want)
			}
		})
	}
}

// TestUnreadableCluster: a kubeconfig that cannot be loaded is a failure
// (3), not a usage error.
func TestUnreadableCluster(t *testing.T) {
	var out, errOut bytes.Buffer
	code := Execute(context.Background(), []string{"lint", "--kubeconfig", "/nonexistent/kubeconfig"},
		genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	if code != ExitFailed || !strings.Contains(errOut.String(), "/nonexistent/kubeconfig") {
		t.Errorf("exit code %d, stderr %q; want %d and the kubeconfig named", code, errOut.String(), ExitFailed)
	}
}

// TestVersion: --version prints budgetguard's version line and exits 0.
func TestVersion(t *testing.T) {
	var out, errOut bytes.Buffer
	code := Execute(context.Background(), []string{"--version"}, genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	if want := version.Get().String() + "\n"; code != ExitOK || out.String() != want {
		t.Errorf("exit code %d, stdout %q; want 0 and %q", code, out.String(), want)
	}
}
