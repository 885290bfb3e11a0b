package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2/ktesting"

	"github.com/budgetguard/budgetguard/internal/audit"
	"github.com/budgetguard/budgetguard/internal/sandboxtest"
	"github.com/budgetguard/budgetguard/internal/testenv"
	"github.com/budgetguard/budgetguard/internal/testobj"
	"github.com/budgetguard/budgetguard/sandbox"
)

// promiseRunnerUserAgent marks the test's own requests, which the auditor
// ignores.
const promiseRunnerUserAgent = "promise-runner"

// schedulerProcesses is what it takes to run bin/scheduler as a process of
// the chart's Deployment, under its RBAC, with actuation Delete.
type schedulerProcesses struct {
	cp         *sandbox.ControlPlane
	env        *testenv.Env
	binary     string
	workload   *unstructured.Unstructured
	configDir  string
	kubeconfig string
	started    int
	// running are the processes of the current case.
	running []*component
}

// start runs one more scheduler process, a replica of the chart's
// Deployment, and waits until it answers /healthz.
func (s *schedulerProcesses) start(t *testing.T) *component {
	t.Helper()
	s.started++
	c := startComponent(t, fmt.Sprintf("scheduler-%d", s.started), s.binary, s.workload, s.configDir, s.kubeconfig,
		"--authentication-kubeconfig="+s.kubeconfig, "--authorization-kubeconfig="+s.kubeconfig)
	c.waitHealthy(t)
	s.running = append(s.running, c)
	return c
}

// isLeader reports whether the process's log says it acquired the lease.
func isLeader(c *component) (bool, error) {
	data, err := os.ReadFile(c.log)
	return strings.Contains(string(data), "Successfully acquired lease"), err
}

// logVictims logs the lines of the processes' logs about victims.
func (s *schedulerProcesses) logVictims(t *testing.T) {
	t.Helper()
	for _, c := range s.running {
		data, err := os.ReadFile(c.log)
		if err != nil {
			t.Error(err)
			continue
		}
		for _, l := range strings.Split(string(data), "\n") {
			if strings.Contains(l, "ictim") || strings.Contains(l, "lease") {
				t.Logf("%s: %s", c.name, l)
			}
		}
	}
}

// kill sends SIGKILL to the process and waits until it is gone.
func kill(t *testing.T, c *component) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL %s: %v", c.name, err)
	}
	select {
	case <-c.exited:
	case <-time.After(time.Minute):
		t.Fatalf("%s still runs a minute after SIGKILL", c.name)
	}
}

// startPromiseControlPlane builds the binaries, starts a control plane
// whose kube-apiserver writes the auditor's log and authorizes by RBAC,
// applies the chart with actuation Delete, and returns what it takes to
// run scheduler processes, and the auditor's log.
func startPromiseControlPlane(t *testing.T) (*schedulerProcesses, string) {
	t.Helper()
	dir := t.TempDir()
	buildBinaries(t, filepath.Join(dir, "bin"))
	flags, logPath, err := audit.APIServerFlags(dir)
	if err != nil {
		t.Fatal(err)
	}
	opts := sandbox.DefaultOptions()
	opts.APIServerFlags = append(flags, "--authorization-mode=RBAC")
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cp := sandboxtest.Start(ctx, t, opts)
	ensureNamespace(t, cp.Client, releaseNS)
	objs := renderChart(t, releaseNS, "scheduler.pluginArgs.actuation=Delete", "descheduler.enabled=false")
	applyAll(t, cp, objs, false)
	if t.Failed() {
		t.FailNow()
	}
	kubeconfig, _ := serviceAccountKubeconfig(t, cp, releaseNS, schedulerSA, dir)
	configDir := filepath.Join(dir, "scheduler-config")
	writeConfigMap(t, find(t, objs, "ConfigMap", "budgetguard-scheduler-config"), configDir)
	configPath := filepath.Join(configDir, "scheduler-config.yaml")
	setClientKubeconfig(t, configPath, kubeconfig)
	if data, err := os.ReadFile(configPath); err != nil || !strings.Contains(string(data), "actuation: Delete") {
		t.Fatalf("the rendered scheduler configuration does not ask for actuation Delete (%v):\n%s", err, data)
	}
	return &schedulerProcesses{
		cp: cp, env: testenv.New(clientAs(t, cp.Config, promiseRunnerUserAgent)),
		binary: filepath.Join(dir, "bin", "scheduler"), workload: find(t, objs, "Deployment", "budgetguard-scheduler"),
		configDir: configDir, kubeconfig: kubeconfig,
	}, logPath
}

// startAuditor starts the independent auditor on the control plane; the
// scheduler processes are told apart by their user agent.
func startAuditor(t *testing.T, cp *sandbox.ControlPlane, logPath string) *audit.Auditor {
	t.Helper()
	a, err := audit.New(audit.Options{
		Config:     cp.Config,
		LogPath:    logPath,
		Components: []audit.ComponentMatch{{UserAgentPrefix: "scheduler/", Component: audit.ComponentScheduler}},
		Ignore:     []string{"sandbox-kubelet", promiseRunnerUserAgent},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(testenv.Context(t)); err != nil {
		t.Fatalf("start the auditor: %v", err)
	}
	return a
}

// victimApps is the preemption both cases interrupt: one 4-CPU node full
// of 500m pods of four ReplicaSets, two pods each, each under a PDB with
// maxUnavailable 1, and a preemptor that asks for 2 CPU. It needs four
// victims, and the budgets allow one per application: all four budgets
// must be spent once each, whichever process does it. Once the pods are
// Ready, the ReplicaSets' replacements go nowhere and are never Ready, so
// that a disruption is neither undone nor its room taken back.
func victimApps(t *testing.T, s *schedulerProcesses, ns string) (node string) {
	t.Helper()
	env := s.env
	ensureNamespace(t, env.Client, ns)
	env.DumpOnFailure(t, ns)
	node = env.ReadyNode(t, ns, "4")
	low := env.PriorityClass(t, ns, 0)
	ctx := testenv.Context(t)
	for i := range 4 {
		name := fmt.Sprintf("app-%d", i)
		tmpl := testobj.BoundPod(node).Label("app", name).Label("role", "victim").PriorityClass(low).GracePeriod(0).Template()
		tmpl.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("500m")
		env.CreateReplicaSet(t, ns, testobj.MakeReplicaSet().Name(name).Replicas(2).Template(tmpl))
		env.CreatePDB(t, ns, testobj.MakePDB().Name(name).MatchLabels("app", name).MaxUnavailable(1))
	}
	env.WaitForReadyPods(t, ns, map[string]string{"role": "victim"}, 8)
	for i := range 4 {
		name := fmt.Sprintf("app-%d", i)
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			rs, err := env.Client.AppsV1().ReplicaSets(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			rs.Spec.Template.Spec.NodeName = "nowhere-" + ns
			rs.Spec.Template.Annotations = map[string]string{sandbox.ReadinessAnnotation: sandbox.ReadinessNever}
			_, err = env.Client.AppsV1().ReplicaSets(ns).Update(ctx, rs, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		testenv.WaitFor(t, time.Minute, "pdb "+name+" allows 1", func(ctx context.Context) (bool, error) {
			pdb, err := env.Client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{})
			return err == nil && pdb.Status.ObservedGeneration == pdb.Generation && pdb.Status.DisruptionsAllowed == 1, err
		})
	}
	return node
}

// preemptAndKillAtFirstVictim creates the preemptor, watches the victims,
// and calls kill as soon as the first of them is disrupted (terminating or
// deleted). It returns how many victims were disrupted when kill returned.
func preemptAndKillAtFirstVictim(t *testing.T, s *schedulerProcesses, ns, node string, kill func()) int {
	t.Helper()
	ctx := testenv.Context(t)
	w, err := s.env.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: "role=victim"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	high := s.env.PriorityClass(t, ns, 1000)
	testenv.WaitFor(t, testenv.DefaultWait, "the preemptor created", func(ctx context.Context) (bool, error) {
		_, err := s.env.Client.CoreV1().Pods(ns).Create(ctx, testobj.MakePod().Name("preemptor").SchedulerName(schedulerName).
			PriorityClass(high).GracePeriod(0).Container("app", "2").OnNodes(node).Obj(), metav1.CreateOptions{})
		return err == nil, err
	})
	timeout := time.After(time.Minute)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the watch of the victims ended")
			}
			p, isPod := ev.Object.(*corev1.Pod)
			if !isPod || p.Spec.NodeName != node || (ev.Type != watch.Deleted && p.DeletionTimestamp == nil) {
				continue
			}
			t.Logf("first victim %s disrupted (%s); killing the scheduler", p.Name, ev.Type)
			kill()
			return disruptedVictims(t, s, ns, node)
		case <-timeout:
			t.Fatal("no victim was disrupted within a minute")
		}
	}
}

// disruptedVictims counts the victims on node that are gone or terminating.
func disruptedVictims(t *testing.T, s *schedulerProcesses, ns, node string) int {
	t.Helper()
	list, err := s.env.ListPods(testenv.Context(t), ns, map[string]string{"role": "victim"})
	if err != nil {
		t.Fatal(err)
	}
	alive := 0
	for _, p := range list {
		if p.Spec.NodeName == node && p.DeletionTimestamp == nil {
			alive++
		}
	}
	return 8 - alive
}

// finishAudit waits for the preemptor to be bound, checks that every
// budget was spent once, then reads the auditor's verdict: no violation.
func finishAudit(t *testing.T, s *schedulerProcesses, a *audit.Auditor, ns, node string) {
	t.Helper()
	testenv.WaitFor(t, 2*time.Minute, "the preemptor bound to "+node, s.env.BoundTo(ns, "preemptor", node))
	if n := disruptedVictims(t, s, ns, node); n != 4 {
		t.Errorf("%d victims disrupted, want 4: one per budget", n)
	}
	s.logVictims(t)
	res, err := a.Finish(testenv.Context(t))
	if err != nil {
		t.Fatalf("auditor: %v", err)
	}
	by := map[string]int{}
	for _, d := range res.Disruptions {
		by[fmt.Sprintf("%s/%s", d.Component, d.Action)]++
	}
	refusals := map[string]int{}
	for _, r := range res.Refusals {
		refusals[fmt.Sprintf("%s/%d", r.Component, r.Code)]++
	}
	t.Logf("auditor: %d disruptions %v, refusals %v, %d violations", len(res.Disruptions), by, refusals, len(res.Violations))
	for _, v := range res.Violations {
		t.Errorf("violation: %s %s/%s left %d healthy, %d desired, by %s %s of %s", v.Budget.Kind, v.Budget.Namespace, v.Budget.Name,
			v.Healthy, v.Desired, v.Disruption.UserAgent, v.Disruption.Action, v.Disruption.Pod)
	}
	for _, b := range res.Budgets {
		if b.Budget.Namespace == ns && b.Met && b.LowestHealthy < b.Desired {
			t.Errorf("budget %s went down to %d healthy, %d desired", b.Budget.Name, b.LowestHealthy, b.Desired)
		}
	}
	pdbs, err := s.env.Client.PolicyV1().PodDisruptionBudgets(ns).List(testenv.Context(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pdbs.Items {
		if p.Status.CurrentHealthy < p.Status.DesiredHealthy {
			t.Errorf("pdb %s: %d healthy, %d desired", p.Name, p.Status.CurrentHealthy, p.Status.DesiredHealthy)
		}
	}
}

// TestPromiseSchedulerRestartAndFailover: bin/scheduler, a process of the
// chart's Deployment under its RBAC with actuation Delete, is killed with
// SIGKILL as soon as the first of the four victims of a preemption is
// disrupted, then started again; then two replicas run under leader
// election, and the leader is killed the same way mid-preemption, and the
// other takes over. Each time the preemptor is bound in the end (the
// budgets allow its four victims, one per application), every budget is
// spent once, and the independent auditor counts no violation.
func TestPromiseSchedulerRestartAndFailover(t *testing.T) {
	s, logPath := startPromiseControlPlane(t)

	t.Run("restart", func(t *testing.T) {
		const ns = "promise-restart"
		s.running = nil
		node := victimApps(t, s, ns)
		a := startAuditor(t, s.cp, logPath)
		first := s.start(t)
		n := preemptAndKillAtFirstVictim(t, s, ns, node, func() { kill(t, first) })
		t.Logf("%d of the 4 victims were disrupted when the scheduler was killed; starting it again", n)
		s.start(t)
		finishAudit(t, s, a, ns, node)
	})

	t.Run("failover", func(t *testing.T) {
		const ns = "promise-failover"
		s.running = nil
		node := victimApps(t, s, ns)
		a := startAuditor(t, s.cp, logPath)
		replicas := []*component{s.start(t), s.start(t)}
		var leader, standby *component
		testenv.WaitFor(t, time.Minute, "one replica leading", func(ctx context.Context) (bool, error) {
			var leaders []*component
			for _, c := range replicas {
				ok, err := isLeader(c)
				if err != nil {
					return false, err
				}
				if ok {
					leaders = append(leaders, c)
				}
			}
			if len(leaders) != 1 {
				return false, fmt.Errorf("%d leaders", len(leaders))
			}
			leader = leaders[0]
			standby = replicas[0]
			if standby == leader {
				standby = replicas[1]
			}
			return true, nil
		})
		t.Logf("%s leads, %s stands by", leader.name, standby.name)
		n := preemptAndKillAtFirstVictim(t, s, ns, node, func() { kill(t, leader) })
		t.Logf("%d of the 4 victims were disrupted when the leader was killed", n)
		finishAudit(t, s, a, ns, node)
		if ok, err := isLeader(standby); err != nil || !ok {
			t.Errorf("%s does not lead after the failover (%v)", standby.name, err)
		}
	})
}
