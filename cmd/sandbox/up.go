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
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/kubernetes"
	componentversion "k8s.io/component-base/version"
	"sigs.k8s.io/yaml"

	"github.com/budgetguard/budgetguard/manifests"
	"github.com/budgetguard/budgetguard/sandbox"
)

// upFlags are the flags of `sandbox up`.
type upFlags struct {
	kubeconfig     string
	nodes          int
	verbose        bool
	apiServerFlags []string
}

func newUpCommand(stdout, stderr io.Writer) *cobra.Command {
	var f upFlags
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start a control plane, write a kubeconfig for it once it is ready, and keep it running until Ctrl-C",
		Long: `up starts the sandbox's control plane (embedded etcd, kube-apiserver
reporting the Kubernetes version the binary embeds, the disruption,
ReplicaSet, Deployment, StatefulSet, namespace, garbage-collector and
clusterrole aggregation controllers, a simulated kubelet, the
PodUnavailableBudget CRD with stand-ins for OpenKruise's status controller
and pod webhooks)
and keeps it running in the foreground, so that kubectl, helm, bin/scheduler
and bin/descheduler can be pointed at it.
It creates --nodes Nodes, which the simulated kubelet makes Ready (4 CPUs,
16Gi, 110 pods each), and only then writes an admin kubeconfig to
--kubeconfig: the file appears once the sandbox is ready, never before.

In a script, start up in the background and wait for it with 'sandbox wait'
before the next command:

  bin/sandbox up --kubeconfig /tmp/sandbox.kubeconfig &
  bin/sandbox wait --kubeconfig /tmp/sandbox.kubeconfig

A kubeconfig that an earlier up left at --kubeconfig (killed before it could
remove it) is replaced; up refuses a file there that the sandbox did not
write, or one whose sandbox still runs.

No scheduler and no descheduler run inside: start bin/scheduler and
bin/descheduler against the kubeconfig, as up prints, or the ones a helm
release of the chart installed with 'sandbox run-chart'. Ctrl-C (or SIGTERM,
e.g. kill %1 for a background job) stops everything, removes the kubeconfig
and exits 0. Nothing is kept: the next up starts empty.`,
		Example: `  sandbox up --kubeconfig /tmp/sandbox.kubeconfig
  # in a script: in the background, then wait until it is ready
  sandbox up --kubeconfig /tmp/sandbox.kubeconfig &
  sandbox wait --kubeconfig /tmp/sandbox.kubeconfig
  # with kube-apiserver's audit log
  sandbox up --apiserver-flag=--audit-policy-file=policy.yaml --apiserver-flag=--audit-log-path=audit.log`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 0 {
				return usageError{fmt.Errorf("up takes no arguments; got %d", len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			return up(cmd.Context(), f, stdout, stderr)
		},
	}
	cmd.Flags().StringVar(&f.kubeconfig, "kubeconfig", defaultKubeconfig(), "where to write the kubeconfig, once the control plane is ready")
	cmd.Flags().IntVar(&f.nodes, "nodes", 3, "how many Nodes to create (sandbox-node-1, ...)")
	cmd.Flags().BoolVarP(&f.verbose, "verbose", "v", false, "show the logs of etcd, kube-apiserver and the controllers on stderr")
	cmd.Flags().StringArrayVar(&f.apiServerFlags, "apiserver-flag", nil, "an extra kube-apiserver flag, e.g. --apiserver-flag=--audit-log-path=audit.log (repeatable)")
	return cmd
}

// up runs the control plane until ctx is cancelled.
func up(ctx context.Context, f upFlags, stdout, stderr io.Writer) error {
	if f.nodes < 0 {
		return usageError{fmt.Errorf("--nodes is %d; want 0 or more", f.nodes)}
	}
	if !f.verbose {
		ctx = quietLogging(ctx, stderr)
	}
	path, err := filepath.Abs(f.kubeconfig)
	if err != nil {
		return err
	}
	if err := claimKubeconfig(ctx, path); err != nil {
		return err
	}
	opts := sandbox.DefaultOptions()
	opts.Verbose = f.verbose
	opts.SimulatePUBStatus = true
	opts.GarbageCollector = true
	opts.APIServerFlags = f.apiServerFlags
	fmt.Fprintln(stderr, "starting the control plane…")
	cp, err := sandbox.Start(ctx, opts)
	if err != nil {
		return err
	}
	defer func() {
		if stopErr := cp.Stop(); stopErr != nil {
			fmt.Fprintf(stderr, "sandbox: stopping the control plane: %v\n", stopErr)
		}
	}()
	for i := 1; i <= f.nodes; i++ {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name:   fmt.Sprintf("sandbox-node-%d", i),
			Labels: map[string]string{corev1.LabelHostname: fmt.Sprintf("sandbox-node-%d", i)},
		}}
		if _, err := cp.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create node %s: %w", node.Name, err)
		}
	}
	if err := nodesReady(ctx, cp.Client, f.nodes); err != nil {
		return err
	}
	schedulerConfig := path + ".scheduler-config.yaml"
	if err := writeSchedulerConfig(schedulerConfig, path); err != nil {
		return err
	}
	defer func() { _ = os.Remove(schedulerConfig) }()
	// The kubeconfig comes last, all at once (written beside it, then
	// renamed): its appearance is what 'sandbox wait' and scripts take for
	// "ready". Not Config's own CA and server name: they verify the
	// loopback certificate only, and a client given --master (the
	// descheduler) drops the server name.
	defer func() { _ = os.Remove(path) }()
	if err := writeKubeconfigAtomically(cp, path); err != nil {
		return err
	}

	// kube-apiserver reports the version stamped into k8s.io/component-base
	// by hack/ldflags.sh; go build and go run leave a placeholder there.
	kubeVersion := componentversion.Get().GitVersion
	if _, err := utilversion.ParseSemantic(kubeVersion); err != nil {
		fmt.Fprintf(stderr, "warning: kube-apiserver reports version %q, which helm and kubectl reject: build the sandbox with make build (hack/ldflags.sh stamps the Kubernetes version it embeds)\n", kubeVersion)
	}
	fmt.Fprintf(stdout, `The sandbox control plane is up (started in %s): kube-apiserver %s at %s, %d node(s).
Kubeconfig (admin): %s

  kubectl --kubeconfig %[5]s get nodes
  export KUBECONFIG=%[5]s

Run budgetguard against it (make build first), each in its own terminal:

  bin/scheduler --config %[6]s \
    --authentication-kubeconfig %[5]s --authorization-kubeconfig %[5]s
  bin/descheduler --policy-config-file manifests/descheduler/policy.yaml --kubeconfig %[5]s \
    --descheduling-interval 1m

%[6]s is manifests/scheduler/scheduler-config.yaml with
clientConnection.kubeconfig set: with --config, kube-scheduler ignores --kubeconfig.
Pods that set schedulerName: budgetguard-scheduler are scheduled by it; no other
scheduler runs here. Press Ctrl-C to stop; nothing is kept.
`, cp.StartDuration.Round(100*time.Millisecond), kubeVersion, cp.Config.Host, f.nodes, path, schedulerConfig)

	<-ctx.Done()
	fmt.Fprintln(stderr, "stopping the control plane…")
	if err := ctx.Err(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// nodesReady waits until the simulated kubelet has made the n nodes up
// created Ready, so that the sandbox is ready for pods when the kubeconfig
// appears.
func nodesReady(ctx context.Context, client kubernetes.Interface, n int) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var last error
	for {
		nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		last = err
		if err == nil {
			ready := 0
			for i := range nodes.Items {
				if nodeReady(&nodes.Items[i]) {
					ready++
				}
			}
			if ready >= n {
				return nil
			}
			last = fmt.Errorf("%d of %d nodes Ready", ready, n)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the nodes did not become Ready within a minute: %w", last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// writeKubeconfigAtomically writes the admin kubeconfig to a file beside
// path and renames it to path, so that a reader sees no file or all of it.
func writeKubeconfigAtomically(cp *sandbox.ControlPlane, path string) error {
	tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
	if err := cp.WriteKubeconfig(tmp, "admin", cp.Config.BearerToken); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}

// writeSchedulerConfig writes the shipped KubeSchedulerConfiguration with
// clientConnection.kubeconfig set to kubeconfig to path: with --config,
// kube-scheduler ignores its --kubeconfig flag.
func writeSchedulerConfig(path, kubeconfig string) error {
	var cfg map[string]any
	if err := yaml.Unmarshal(manifests.SchedulerConfig, &cfg); err != nil {
		return fmt.Errorf("decode the shipped scheduler configuration: %w", err)
	}
	cfg["clientConnection"] = map[string]any{"kubeconfig": kubeconfig}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	header := "# manifests/scheduler/scheduler-config.yaml for `sandbox up`, with its kubeconfig.\n"
	if err := os.WriteFile(path, append([]byte(header), data...), 0o600); err != nil {
		return fmt.Errorf("write scheduler configuration %s: %w", path, err)
	}
	return nil
}
