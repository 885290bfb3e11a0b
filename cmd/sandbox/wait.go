package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/budgetguard/budgetguard/sandbox"
)

// defaultKubeconfig is where up writes its kubeconfig, and where wait and
// run-chart look for it, without --kubeconfig.
func defaultKubeconfig() string {
	return filepath.Join(os.TempDir(), "budgetguard-sandbox.kubeconfig")
}

// waitFlags are the flags of `sandbox wait`.
type waitFlags struct {
	kubeconfig string
	timeout    time.Duration
}

// waitPoll is how often wait looks again.
const waitPoll = 250 * time.Millisecond

func newWaitCommand(stdout io.Writer) *cobra.Command {
	var f waitFlags
	cmd := &cobra.Command{
		Use:   "wait",
		Short: "Wait until the control plane of `sandbox up` is ready, for scripts",
		Long: `wait returns once the sandbox that 'sandbox up --kubeconfig FILE' starts
is ready for kubectl, helm and budgetguard's binaries: FILE exists (up writes
it only then), kube-apiserver answers /readyz through it, and every Node is
Ready. It is for scripts that start up in the background:

  bin/sandbox up --kubeconfig /tmp/sandbox.kubeconfig &
  bin/sandbox wait --kubeconfig /tmp/sandbox.kubeconfig

wait starts nothing and changes nothing; run it as often as you like.

Exit status: 0 when the sandbox is ready (it prints one line saying so); 1
when it is not within --timeout, with what it waited for last; 2 for bad
arguments or flags.`,
		Example: `  sandbox wait --kubeconfig /tmp/sandbox.kubeconfig --timeout 5m`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 0 {
				return usageError{fmt.Errorf("wait takes no arguments; got %d", len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.timeout <= 0 {
				return usageError{fmt.Errorf("--timeout is %s; want more than 0", f.timeout)}
			}
			return waitReady(cmd.Context(), f, stdout)
		},
	}
	cmd.Flags().StringVar(&f.kubeconfig, "kubeconfig", defaultKubeconfig(), "the kubeconfig sandbox up writes (its --kubeconfig)")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 2*time.Minute, "how long to wait before giving up")
	return cmd
}

// waitReady polls until probeReady succeeds or f.timeout passes.
func waitReady(ctx context.Context, f waitFlags, stdout io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	for {
		ready, err := probeReady(ctx, f.kubeconfig)
		if err == nil {
			_, err = fmt.Fprintln(stdout, ready)
			return err
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("the sandbox was not ready within %s: %w", f.timeout, err)
			}
			return ctx.Err()
		case <-time.After(waitPoll):
		}
	}
}

// probeReady says whether the sandbox behind the kubeconfig at path is
// ready, with a line that says so, or what it is not yet.
func probeReady(ctx context.Context, path string) (string, error) {
	client, host, err := answering(ctx, path)
	if err != nil {
		return "", err
	}
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", fmt.Errorf("list nodes: %w", err)
	}
	for i := range nodes.Items {
		if !nodeReady(&nodes.Items[i]) {
			return "", fmt.Errorf("node %s is not Ready yet", nodes.Items[i].Name)
		}
	}
	v, err := client.Discovery().ServerVersion()
	if err != nil {
		return "", fmt.Errorf("kube-apiserver version: %w", err)
	}
	return fmt.Sprintf("The sandbox is ready: kube-apiserver %s at %s, %d node(s) Ready (kubeconfig %s).", v.GitVersion, host, len(nodes.Items), path), nil
}

// answering returns a client through the kubeconfig at path once its
// kube-apiserver answers /readyz, and the server's address.
func answering(ctx context.Context, path string) (kubernetes.Interface, string, error) {
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, "", fmt.Errorf("no kubeconfig at %s yet (sandbox up --kubeconfig %s writes it once its control plane is ready)", path, path)
		}
		return nil, "", err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	// Each request of a probe gives up soon: the next probe asks again.
	cfg.Timeout = 5 * time.Second
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, "", err
	}
	if _, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
		return nil, "", fmt.Errorf("kube-apiserver at %s is not ready: %w", cfg.Host, err)
	}
	return client, cfg.Host, nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// claimKubeconfig makes path free for up's kubeconfig. A file there is
// removed when it is a kubeconfig of a sandbox that no longer answers (one
// killed before it could remove it), so that wait never takes it for the
// new sandbox's. Any other file is refused, never overwritten: it may be
// someone's real kubeconfig; so is the kubeconfig of a sandbox that still
// answers.
func claimKubeconfig(ctx context.Context, path string) error {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil || !onlySandbox(kc) {
		return usageError{fmt.Errorf("--kubeconfig %s exists and is not a kubeconfig the sandbox wrote; name another file", path)}
	}
	probeCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, _, err := answering(probeCtx, path); err == nil {
		return usageError{fmt.Errorf("--kubeconfig %s belongs to a sandbox that is running; stop it or name another file", path)}
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("remove the stale kubeconfig %s: %w", path, err)
	}
	return nil
}

// onlySandbox reports whether every cluster of kc is the sandbox's.
func onlySandbox(kc *clientcmdapi.Config) bool {
	if len(kc.Clusters) == 0 {
		return false
	}
	for name := range kc.Clusters {
		if name != sandbox.KubeconfigCluster {
			return false
		}
	}
	return true
}
