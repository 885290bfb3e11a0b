//go:build e2enode

package e2enode

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/budgetguard/budgetguard/internal/audit"
	"github.com/budgetguard/budgetguard/internal/realnode"
)

var (
	kubeconfig = flag.String("e2e-node.kubeconfig", "", "the admin kubeconfig of the running real node (hack/e2e-node.sh passes it)")
	auditLog   = flag.String("e2e-node.audit-log", "", "kube-apiserver's audit log on the real node (hack/e2e-node.sh passes it)")
)

const (
	repoRoot = "../.."
	release  = "budgetguard"
	// The release's namespace, and its components' names there.
	releaseNS   = "kube-system"
	scheduler   = "budgetguard-scheduler"
	descheduler = "budgetguard-descheduler"
	// The user agents of the test's own clients: runnerAgent's requests
	// (set-up, cleanup) are not disruptions; drainAgent's evictions are an
	// actor's, as kubectl drain's would be.
	runnerAgent = "e2e-node-runner"
	drainAgent  = "e2e-node-drain"
)

// env is the cluster as the tests reach it.
type env struct {
	cfg  *rest.Config
	kube kubernetes.Interface
	// drain is a client whose requests the auditor counts as another
	// actor's.
	drain kubernetes.Interface
	node  string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	if *kubeconfig == "" || *auditLog == "" {
		t.Fatal("no real node: run these tests with make e2e-node (hack/e2e-node.sh), which brings one up and passes -e2e-node.kubeconfig and -e2e-node.audit-log")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	kube, err := kubernetes.NewForConfig(rest.AddUserAgent(rest.CopyConfig(cfg), runnerAgent))
	if err != nil {
		t.Fatal(err)
	}
	drain, err := kubernetes.NewForConfig(rest.AddUserAgent(rest.CopyConfig(cfg), drainAgent))
	if err != nil {
		t.Fatal(err)
	}
	return &env{cfg: cfg, kube: kube, drain: drain, node: realnode.NodeName}
}

// command runs a program from the repository's root with the node's
// kubeconfig, and returns its output; it fails the test if it fails.
func command(t *testing.T, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "KUBECONFIG="+*kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestRealNode runs in order, each step on what the one before left: the
// release installed with helm, the quick start, a descheduling loop, and
// the multi-actor run.
func TestRealNode(t *testing.T) {
	e := newEnv(t)
	steps := []struct {
		name string
		run  func(*testing.T, *env)
	}{
		{"Release", testRelease},
		{"QuickStart", testQuickStart},
		{"DeschedulingLoop", testDeschedulingLoop},
		{"MultiActor", testMultiActor},
	}
	for _, s := range steps {
		if !t.Run(s.name, func(t *testing.T) { s.run(t, e) }) {
			t.Fatalf("step %s failed; the steps after it need what it leaves", s.name)
		}
	}
}

// testRelease installs the release as a user would: the chart that make
// chart packaged, with the pinned helm, its images imported into the
// node's containerd (make images, IfNotPresent: nothing is pulled). Both
// components run as real pods under the chart's ServiceAccounts, non-root
// on read-only root filesystems; each holds its leader-election Lease,
// answers its probes (the Deployments turn available only then) and serves
// its metrics.
func testRelease(t *testing.T, e *env) {
	charts, err := filepath.Glob(filepath.Join(repoRoot, "_output/chart/budgetguard-*.tgz"))
	if err != nil || len(charts) != 1 {
		t.Fatalf("want one chart in _output/chart (make chart), found %v (%v)", charts, err)
	}
	chart, _ := filepath.Rel(repoRoot, charts[0])
	command(t, "hack/helm.sh", "install", release, chart, "-n", releaseNS, "-f", "test/e2enode/values.yaml", "--wait", "--timeout", "3m")
	ctx := t.Context()

	for _, name := range []string{scheduler, descheduler} {
		d, err := e.kube.AppsV1().Deployments(releaseNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := ptr.Deref(d.Spec.Replicas, 1)
		if d.Status.AvailableReplicas != want {
			t.Errorf("deployment %s: %d of %d replicas available after helm --wait", name, d.Status.AvailableReplicas, want)
		}
		pods := podsOf(t, e, releaseNS, d.Spec.Selector.MatchLabels)
		if len(pods) != int(want) {
			t.Errorf("deployment %s: %d pods, want %d", name, len(pods), want)
		}
		for _, p := range pods {
			c := p.Spec.Containers[0]
			t.Logf("%s: image %s, serviceAccount %s, IP %s", p.Name, c.Image, p.Spec.ServiceAccountName, p.Status.PodIP)
			if p.Spec.ServiceAccountName != name {
				t.Errorf("pod %s runs under ServiceAccount %q, want the chart's %q", p.Name, p.Spec.ServiceAccountName, name)
			}
			if !podReady(&p) {
				t.Errorf("pod %s is not Ready: its readiness probe does not pass", p.Name)
			}
			for _, s := range p.Status.ContainerStatuses {
				if s.State.Running == nil {
					t.Errorf("pod %s: container %s is not running: %+v", p.Name, s.Name, s.State)
				}
				if !strings.HasPrefix(s.ImageID, "sha256:") && !strings.Contains(s.ImageID, "@sha256:") {
					t.Errorf("pod %s: container %s has no image ID (%q)", p.Name, s.Name, s.ImageID)
				}
			}
			if sc := c.SecurityContext; sc == nil || !ptr.Deref(sc.ReadOnlyRootFilesystem, false) || !ptr.Deref(sc.RunAsNonRoot, false) {
				t.Errorf("pod %s: container %s is not non-root on a read-only root filesystem: %+v", p.Name, c.Name, sc)
			}
			port := int(c.Ports[0].ContainerPort)
			metrics := scrape(t, p.Status.PodIP, port, "/metrics")
			for _, want := range []string{"budgetguard_build_info", "budgetguard_"} {
				if !strings.Contains(metrics, want) {
					t.Errorf("pod %s: /metrics on port %d has no %s", p.Name, port, want)
				}
			}
		}
		// The Lease's holder is one of these pods ("<pod>_<uuid>").
		var holder string
		if err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
			lease, err := e.kube.CoordinationV1().Leases(releaseNS).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			holder = ptr.Deref(lease.Spec.HolderIdentity, "")
			for _, p := range pods {
				if strings.HasPrefix(holder, p.Name+"_") {
					return true, nil
				}
			}
			return false, nil
		}); err != nil {
			t.Fatalf("lease %s/%s is held by %q, not by one of the Deployment's pods: %v", releaseNS, name, holder, err)
		}
		t.Logf("lease %s/%s held by %s", releaseNS, name, holder)
	}
}

// scrape GETs a component's secure endpoint on its pod's IP with the admin's
// client certificate (the components authenticate it through the API
// server's client CA and authorize it with a SubjectAccessReview), as
// Prometheus would with its own credentials.
func scrape(t *testing.T, ip string, port int, path string) string {
	t.Helper()
	tlsCfg, err := rest.TLSConfigFor(mustConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	// The components serve self-signed certificates.
	tlsCfg.InsecureSkipVerify = true
	tlsCfg.RootCAs = x509.NewCertPool()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	url := fmt.Sprintf("https://%s:%d%s", ip, port, path)
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", url, resp.Status, body)
	}
	return string(body)
}

func mustConfig(t *testing.T) *rest.Config {
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func podsOf(t *testing.T, e *env, ns string, labels map[string]string) []corev1.Pod {
	t.Helper()
	var sel []string
	for k, v := range labels {
		sel = append(sel, k+"="+v)
	}
	list, err := e.kube.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: strings.Join(sel, ",")})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// app is a Deployment of the webapp image under the release's scheduler,
// with a real readiness probe and a grace period that its shutdown uses.
type app struct {
	ns, name      string
	replicas      int32
	cpu           string
	priorityClass string
	readyAfter    time.Duration
	shutdown      time.Duration
	grace         int64
	flapEvery     time.Duration
}

func (a app) deployment() *appsv1.Deployment {
	env := []corev1.EnvVar{
		{Name: "READY_AFTER", Value: a.readyAfter.String()},
		{Name: "SHUTDOWN_DELAY", Value: a.shutdown.String()},
	}
	if a.flapEvery > 0 {
		env = append(env, corev1.EnvVar{Name: "FLAP_EVERY", Value: a.flapEvery.String()}, corev1.EnvVar{Name: "FLAP_FOR", Value: "3s"}, corev1.EnvVar{Name: "FLAP_PROBABILITY", Value: "0.3"})
	}
	labels := map[string]string{"app": a.name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: a.name, Namespace: a.ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(a.replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					SchedulerName:                 scheduler,
					PriorityClassName:             a.priorityClass,
					TerminationGracePeriodSeconds: ptr.To(a.grace),
					EnableServiceLinks:            ptr.To(false),
					Containers: []corev1.Container{{
						Name:            "web",
						Image:           realnode.WebappImage,
						ImagePullPolicy: corev1.PullNever,
						Env:             env,
						Ports:           []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(8080)}},
							PeriodSeconds:    1,
							FailureThreshold: 1,
						},
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(a.cpu), corev1.ResourceMemory: resource.MustParse("16Mi")}},
					}},
				},
			},
		},
	}
}

func createNamespace(t *testing.T, e *env, ns string) {
	t.Helper()
	_, err := e.kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// Pods need the namespace's default ServiceAccount.
	if err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := e.kube.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("namespace %s has no default ServiceAccount: %v", ns, err)
	}
}

// deleteNamespace removes a namespace and waits until its pods are gone,
// so that the next step has the node's CPU.
func deleteNamespace(t *testing.T, e *env, ns string) {
	t.Helper()
	ctx := context.WithoutCancel(t.Context())
	_ = e.kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := e.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Errorf("namespace %s was not removed: %v", ns, err)
	}
}

func createApp(t *testing.T, e *env, a app) {
	t.Helper()
	if _, err := e.kube.AppsV1().Deployments(a.ns).Create(t.Context(), a.deployment(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func createPDB(t *testing.T, e *env, pdb *policyv1.PodDisruptionBudget) {
	t.Helper()
	if _, err := e.kube.PolicyV1().PodDisruptionBudgets(pdb.Namespace).Create(t.Context(), pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func createPriorityClass(t *testing.T, e *env, name string, value int32) {
	t.Helper()
	_, err := e.kube.SchedulingV1().PriorityClasses().Create(t.Context(), &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// waitAvailable waits until a Deployment's pods are all Ready, and its
// PDB (if name is given) allows what the test expects.
func waitAvailable(t *testing.T, e *env, ns, name string) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := e.kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return d.Status.ObservedGeneration == d.Generation && d.Status.ReadyReplicas == *d.Spec.Replicas && d.Status.UpdatedReplicas == *d.Spec.Replicas, nil
	}); err != nil {
		t.Fatalf("deployment %s/%s did not turn Ready: %v", ns, name, err)
	}
}

func waitPDBAllows(t *testing.T, e *env, ns, name string, allowed int32) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pdb, err := e.kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && pdb.Status.ObservedGeneration == pdb.Generation && pdb.Status.DisruptionsAllowed == allowed, nil
	}); err != nil {
		t.Fatalf("pdb %s/%s does not allow %d disruptions: %v", ns, name, allowed, err)
	}
}

// freeCPU is the node's allocatable CPU less what its pods request, in
// millicores.
func freeCPU(t *testing.T, e *env) int64 {
	t.Helper()
	free, err := e.freeCPU(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return free
}

func (e *env) freeCPU(ctx context.Context) (int64, error) {
	n, err := e.kube.CoreV1().Nodes().Get(ctx, e.node, metav1.GetOptions{})
	if err != nil {
		return 0, err
	}
	free := n.Status.Allocatable.Cpu().MilliValue()
	pods, err := e.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + e.node})
	if err != nil {
		return 0, err
	}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, c := range p.Spec.Containers {
			free -= c.Resources.Requests.Cpu().MilliValue()
		}
	}
	return free, nil
}

// startAuditor starts the independent auditor on kube-apiserver's audit log:
// requests by the release's scheduler and descheduler (their user agents,
// the binaries' names) are theirs; the kubelet's deletes of pods it finished
// terminating, and the test's own set-up and cleanup, are not disruptions.
func startAuditor(t *testing.T, e *env) *audit.Auditor {
	t.Helper()
	a, err := audit.New(audit.Options{
		Config:  e.cfg,
		LogPath: *auditLog,
		Components: []audit.ComponentMatch{
			{UserAgentPrefix: "scheduler/", Component: audit.ComponentScheduler},
			{UserAgentPrefix: "descheduler/", Component: audit.ComponentDescheduler},
		},
		Ignore: []string{"kubelet/", runnerAgent},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	return a
}

// failures collects a step's failures as it reports them, so that the step
// can repeat them as its last lines: CI keeps the end of a failing test's
// output, and a long step's failures are otherwise far above it.
type failures struct{ lines []string }

// errorf reports a failure, and keeps it when f is not nil.
func (f *failures) errorf(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if f != nil {
		f.lines = append(f.lines, msg)
	}
	t.Error(msg)
}

// recap repeats the failures kept, if any.
func (f *failures) recap(t *testing.T) {
	t.Helper()
	if len(f.lines) > 0 {
		t.Logf("%d failures, as reported above:\n\t%s", len(f.lines), strings.Join(f.lines, "\n\t"))
	}
}

// judge finishes the auditor and fails the test on any violation by
// budgetguard's components and on any disagreement; it logs the rest.
// It keeps its failures in f, which may be nil.
func judge(t *testing.T, a *audit.Auditor, f *failures) audit.Result {
	t.Helper()
	r, err := a.Finish(context.WithoutCancel(t.Context()))
	if err != nil {
		t.Fatalf("the auditor: %v", err)
	}
	by := map[audit.Component]int{}
	for _, d := range r.Disruptions {
		by[d.Component]++
	}
	t.Logf("the auditor: %d disruptions (%v), %d API refusals, %d violations, %d races, %d disagreements; informer lag p99 %s",
		len(r.Disruptions), by, len(r.Refusals), len(r.Violations), len(r.Races), len(r.Disagreements), r.Windows.InformerLag.Duration)
	for _, v := range r.Violations {
		line := fmt.Sprintf("violation: %s %s %s/%s (%s) left %s %s/%s at %d healthy of %d desired",
			v.Disruption.Component, v.Disruption.Action, v.Disruption.Namespace, v.Disruption.Pod, v.Disruption.UserAgent,
			v.Budget.Kind, v.Budget.Namespace, v.Budget.Name, v.Healthy, v.Desired)
		if v.Disruption.Component == audit.ComponentScheduler || v.Disruption.Component == audit.ComponentDescheduler {
			f.errorf(t, "%s", line)
		} else {
			t.Log(line, "(not budgetguard's)")
		}
	}
	for _, r := range r.Races {
		t.Logf("race: %s %s %s/%s, %s %s/%s at %d of %d (known %d of %d)", r.Disruption.Component, r.Disruption.Action,
			r.Disruption.Namespace, r.Disruption.Pod, r.Budget.Kind, r.Budget.Namespace, r.Budget.Name, r.Healthy, r.Desired, r.KnownHealthy, r.KnownDesired)
	}
	for _, d := range r.Disagreements {
		f.errorf(t, "disagreement: %s %s %s/%s: the judge counted %d of %d, %s %s/%s's status %d of %d",
			d.Disruption.Component, d.Disruption.Action, d.Disruption.Namespace, d.Disruption.Pod, d.Healthy, d.Desired,
			d.Budget.Kind, d.Budget.Namespace, d.Budget.Name, d.StatusHealthy, d.StatusDesired)
	}
	return r
}

// auditUsers returns the users kube-apiserver's audit log names for the
// eviction and delete requests whose user agent starts with prefix: who
// the API server says made them.
func auditUsers(t *testing.T, prefix string) map[string]int {
	t.Helper()
	data, err := os.ReadFile(*auditLog)
	if err != nil {
		t.Fatal(err)
	}
	users := map[string]int{}
	for _, line := range bytes.Split(data, []byte("\n")) {
		var ev struct {
			UserAgent string `json:"userAgent"`
			User      struct {
				Username string `json:"username"`
			} `json:"user"`
		}
		if len(line) == 0 || json.Unmarshal(line, &ev) != nil || !strings.HasPrefix(ev.UserAgent, prefix) {
			continue
		}
		users[ev.User.Username]++
	}
	return users
}
