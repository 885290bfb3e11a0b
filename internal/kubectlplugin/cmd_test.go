package kubectlplugin

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/klog/v2"

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
		{"why without a pod", []string{"why"}, "exactly one pod, as NAME or pod/NAME"},
		{"why with two pods", []string{"why", "a", "b"}, "exactly one pod, as NAME or pod/NAME"},
		{"why with another kind", []string{"why", "deployment/web"}, `"deployment/web" names a deployment; give NAME or pod/NAME`},
		{"why with pod/ and no name", []string{"why", "pod/"}, `"pod/" names no pod`},
		{"why with a name with a slash", []string{"why", "pod/a/b"}, `"pod/a/b" is not a pod name`},
		{"lint with an argument", []string{"lint", "x"}, `unexpected argument "x"`},
		{"unknown flag", []string{"lint", "--bogus"}, "unknown flag: --bogus"},
		{"unknown output format", []string{"lint", "-o", "xml"}, `--output "xml"`},
		{"unknown output format for why", []string{"why", "p", "-o", "xml"}, `--output "xml": unknown format; use one of wide, json, yaml,`},
		{"a jsonpath that does not parse", []string{"why", "p", "-o", "jsonpath={.pod"}, `--output "jsonpath={.pod"`},
		{"-v without a level", []string{"lint", "-v"}, `invalid argument "--kubeconfig" for "-v, --v" flag`},
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

// run runs Execute with args and a kubeconfig that does not exist: what
// reaches the cluster fails with exit code 3.
func run(args ...string) (code int, out, errOut string) {
	var o, e bytes.Buffer
	args = append(args, "--kubeconfig", "/nonexistent/kubeconfig")
	code = Execute(context.Background(), args, genericiooptions.IOStreams{In: strings.NewReader(""), Out: &o, ErrOut: &e})
	return code, o.String(), e.String()
}

// TestVerbosityFlag: -v is klog's verbosity, as in kubectl, not
// --version: "-v=6" and "-v 6" are accepted before or after the command,
// and the command goes on to the cluster (here, a missing kubeconfig: 3).
func TestVerbosityFlag(t *testing.T) {
	for _, args := range [][]string{{"-v=6", "lint"}, {"lint", "-v", "6"}, {"--v=2", "why", "pod/web-0"}} {
		code, out, errOut := run(args...)
		if code != ExitFailed || !strings.Contains(errOut, "/nonexistent/kubeconfig") || out != "" {
			t.Errorf("%q: exit code %d, stdout %q, stderr %q; want %d and the kubeconfig named", args, code, out, errOut, ExitFailed)
		}
	}
}

// TestVerbositySet: -v sets klog's verbosity while the command runs, and
// Execute puts it back.
func TestVerbositySet(t *testing.T) {
	root := NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}})
	restore := restoreVerbosity(root)
	root.SetArgs([]string{"-v=6", "lint", "--kubeconfig", "/nonexistent/kubeconfig"})
	_ = root.Execute()
	if !klog.V(6).Enabled() {
		t.Error("-v=6 did not set klog's verbosity to 6")
	}
	restore()
	if klog.V(1).Enabled() {
		t.Error("the verbosity was not put back")
	}
}

// TestHelpNamesKubectlBudgetguard: help and usage say "kubectl
// budgetguard", as the user types it, never the binary's name.
func TestHelpNamesKubectlBudgetguard(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"why", "--help"}, {"lint", "--help"}} {
		code, out, errOut := run(args...)
		if code != ExitOK {
			t.Errorf("%q: exit code %d, stderr %q", args, code, errOut)
		}
		if strings.Contains(out, "kubectl-budgetguard") || !strings.Contains(out, "kubectl budgetguard") {
			t.Errorf("%q: help does not name the command as kubectl budgetguard:\n%s", args, out)
		}
	}
	_, out, _ := run("why", "--help")
	if !strings.Contains(out, "Usage:\n  kubectl budgetguard why (POD | pod/POD) [flags]") {
		t.Errorf("why --help, usage line:\n%s", out)
	}
	_, _, errOut := run("why")
	if !strings.Contains(errOut, "See 'kubectl budgetguard why --help'.") {
		t.Errorf("usage error %q does not point to kubectl budgetguard why --help", errOut)
	}
}

// TestPodName: why takes NAME, pod/NAME, pods/NAME and po/NAME.
func TestPodName(t *testing.T) {
	for arg, want := range map[string]string{"web-0": "web-0", "pod/web-0": "web-0", "pods/web-0": "web-0", "po/web-0": "web-0"} {
		if got, err := podName(arg); err != nil || got != want {
			t.Errorf("podName(%q) = %q, %v; want %q", arg, got, err, want)
		}
	}
	for _, arg := range []string{"deploy/web", "Pod/web-0", "pod/", "/web-0", "pod/a/b"} {
		if got, err := podName(arg); err == nil {
			t.Errorf("podName(%q) = %q, want an error", arg, got)
		}
	}
}
