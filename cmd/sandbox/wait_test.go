package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/budgetguard/budgetguard/internal/testmain"
	"github.com/budgetguard/budgetguard/sandbox"
)

// writeKubeconfig writes a kubeconfig for a server that does not answer
// (port 1 refuses at once), whose one cluster is named cluster.
func writeKubeconfig(t *testing.T, path, cluster string) {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters[cluster] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1", InsecureSkipTLSVerify: true}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: "t"}
	kc.Contexts["admin"] = &clientcmdapi.Context{Cluster: cluster, AuthInfo: "admin"}
	kc.CurrentContext = "admin"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
}

// TestWaitTimesOut: without a sandbox, wait gives up after --timeout with
// exit 1 and says what it waited for: the kubeconfig, then an API server
// that answers.
func TestWaitTimesOut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sandbox.kubeconfig")
	res := testmain.Run(t, "wait", "--kubeconfig", path, "--timeout", "600ms")
	if res.Code != exitError || !strings.Contains(res.Stderr, "not ready within 600ms") || !strings.Contains(res.Stderr, "no kubeconfig at "+path+" yet") {
		t.Errorf("no kubeconfig: exit code %d, stderr %q; want %d, the timeout and the missing file", res.Code, res.Stderr, exitError)
	}
	// A kubeconfig left by a sandbox that was killed.
	writeKubeconfig(t, path, sandbox.KubeconfigCluster)
	res = testmain.Run(t, "wait", "--kubeconfig", path, "--timeout", "600ms")
	if res.Code != exitError || !strings.Contains(res.Stderr, "kube-apiserver at https://127.0.0.1:1 is not ready") {
		t.Errorf("stale kubeconfig: exit code %d, stderr %q; want %d and the API server not ready", res.Code, res.Stderr, exitError)
	}
	if res.Stdout != "" {
		t.Errorf("stdout is not empty: %q", res.Stdout)
	}
}

func TestWaitUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"wait", "now"}, "wait takes no arguments"},
		{[]string{"wait", "--timeout", "0s"}, "--timeout is 0s; want more than 0"},
		{[]string{"wait", "--timeout", "soon"}, `invalid argument "soon"`},
	} {
		res := testmain.Run(t, tc.args...)
		if res.Code != exitUsage || !strings.Contains(res.Stderr, tc.want) {
			t.Errorf("%q: exit code %d, stderr %q; want %d and %q", tc.args, res.Code, res.Stderr, exitUsage, tc.want)
		}
	}
	res := testmain.Run(t, "wait", "--help")
	for _, want := range []string{"bin/sandbox up --kubeconfig /tmp/sandbox.kubeconfig &", "bin/sandbox wait --kubeconfig /tmp/sandbox.kubeconfig", "--timeout", "Exit status"} {
		if res.Code != 0 || !strings.Contains(res.Stdout, want) {
			t.Errorf("wait --help: exit code %d, does not mention %q:\n%s", res.Code, want, res.Stdout)
		}
	}
}

// TestUpRefusesAForeignKubeconfig: up never overwrites, and so never
// removes at exit, a file at --kubeconfig that the sandbox did not write,
// such as someone's ~/.kube/config; it stops before starting anything.
func TestUpRefusesAForeignKubeconfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config")
	writeKubeconfig(t, path, "production")
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// In this process, with a deadline: an up that did not refuse would
	// run until it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := execute(ctx, []string{"up", "--kubeconfig", path}, &stdout, &stderr)
	if code != exitUsage || !strings.Contains(stderr.String(), "--kubeconfig "+path+" exists and is not a kubeconfig the sandbox wrote") {
		t.Errorf("exit code %d, stderr %q; want %d and the refusal", code, stderr.String(), exitUsage)
	}
	if after, err := os.ReadFile(path); err != nil || string(after) != string(before) {
		t.Errorf("the file changed: %v\n%s", err, after)
	}
}
