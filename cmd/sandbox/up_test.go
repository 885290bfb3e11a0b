package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/budgetguard/budgetguard/internal/testmain"
	"github.com/budgetguard/budgetguard/sandbox"
)

// TestUp runs `sandbox up` in this process, uses the kubeconfig it writes as
// kubectl would (through clientcmd: the CA must verify kube-apiserver's
// serving certificate, and the user must be an admin), checks the scheduler
// configuration it writes, and stops it as Ctrl-C does: exit 0, files gone.
// A kubeconfig an earlier, killed up left behind is at the path when it
// starts, and `sandbox wait` runs from the start: the kubeconfig up writes
// appears only once every node is Ready, and wait returns only then.
func TestUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	upCtx, stop := context.WithCancel(ctx)
	defer stop()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	writeKubeconfig(t, path, sandbox.KubeconfigCluster)
	waited := make(chan testmain.Result, 1)
	go func() { waited <- testmain.Run(t, "wait", "--kubeconfig", path, "--timeout", "2m") }()
	var stdout, stderr bytes.Buffer
	done := make(chan int)
	go func() { done <- execute(upCtx, []string{"up", "--kubeconfig", path, "--nodes", "2"}, &stdout, &stderr) }()

	deadline := time.Now().Add(2 * time.Minute)
	var cfg *rest.Config
	for {
		// The stale kubeconfig names port 1; up's names its API server.
		if c, err := clientcmd.BuildConfigFromFlags("", path); err == nil && c.Host != "https://127.0.0.1:1" {
			cfg = c
			break
		}
		select {
		case code := <-done:
			t.Fatalf("up exited with %d before writing the kubeconfig:\n%s", code, stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("up wrote no kubeconfig within 2 minutes")
		}
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list nodes with the kubeconfig: %v", err)
	}
	for i := range nodes.Items {
		if !nodeReady(&nodes.Items[i]) {
			t.Errorf("node %s is not Ready when the kubeconfig appears", nodes.Items[i].Name)
		}
	}
	w := <-waited
	if w.Code != 0 || !strings.Contains(w.Stdout, "The sandbox is ready: kube-apiserver ") || !strings.Contains(w.Stdout, "2 node(s) Ready") {
		t.Errorf("sandbox wait: exit code %d, stdout %q, stderr %q; want 0 and the sandbox ready with 2 nodes", w.Code, w.Stdout, w.Stderr)
	}
	review, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil || !slices.Contains(review.Status.UserInfo.Groups, "system:masters") {
		t.Errorf("the kubeconfig's user is not an admin: %v %+v", err, review)
	}
	if len(nodes.Items) != 2 {
		t.Errorf("%d nodes, want 2", len(nodes.Items))
	}
	schedulerConfig, err := os.ReadFile(path + ".scheduler-config.yaml")
	if err != nil || !strings.Contains(string(schedulerConfig), "kubeconfig: "+path) || !strings.Contains(string(schedulerConfig), "BudgetAwarePreemption") {
		t.Errorf("the scheduler configuration up wrote: %v\n%s", err, schedulerConfig)
	}

	stop()
	if code := <-done; code != exitOK {
		t.Errorf("exit code %d after Ctrl-C, want 0; stderr:\n%s", code, stderr.String())
	}
	for _, want := range []string{"kubectl --kubeconfig " + path, "bin/scheduler --config " + path + ".scheduler-config.yaml", "bin/descheduler --policy-config-file"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("up's instructions do not mention %q:\n%s", want, stdout.String())
		}
	}
	for _, f := range []string{path, path + ".scheduler-config.yaml"} {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("%s is still there after up stopped: %v", f, err)
		}
	}
}

func TestUpUsage(t *testing.T) {
	res := testmain.Run(t, "up", "extra")
	if res.Code != exitUsage || !strings.Contains(res.Stderr, "up takes no arguments") {
		t.Errorf("up extra: exit code %d, stderr %q; want %d and a usage error", res.Code, res.Stderr, exitUsage)
	}
}
