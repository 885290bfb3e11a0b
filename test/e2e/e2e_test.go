package e2e

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2/ktesting"

	"github.com/budgetguard/budgetguard/internal/sandboxtest"
	"github.com/budgetguard/budgetguard/internal/testenv"
	"github.com/budgetguard/budgetguard/internal/testobj"
	"github.com/budgetguard/budgetguard/sandbox"
)

const (
	releaseNS     = "budgetguard" // the chart's namespace, not kube-system
	schedulerName = "budgetguard-scheduler"
	deschedulerSA = "budgetguard-descheduler"
	schedulerSA   = "budgetguard-scheduler"
	preemptNS     = "e2e-preempt"
	deschedNS     = "e2e-deschedule"
)

// TestShippedArtifacts is the end-to-end test of issue 13: the chart
// applied, both binaries as processes under its RBAC with its config and
// policy, the showcase preemption and a descheduling case through them, and
// the audit log.
func TestShippedArtifacts(t *testing.T) {
	began := time.Now()
	dir := t.TempDir()
	buildBinaries(t, filepath.Join(dir, "bin"))

	flags, auditLog := auditFlags(t, dir, releaseNS)
	opts := sandbox.DefaultOptions()
	opts.GarbageCollector = true
	opts.SimulatePUBStatus = true
	// The test server authorizes everything unless told otherwise.
	opts.APIServerFlags = append(flags, "--authorization-mode=RBAC")
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, 8*time.Minute)
	defer cancel()
	cp := sandboxtest.Start(ctx, t, opts)
	env := testenv.New(cp.Client)

	// The chart, rendered into its own namespace (so that the RoleBinding
	// it needs in kube-system is tested) and applied as it stands. A short
	// descheduling interval, so that the test need not wait 5 minutes.
	ensureNamespace(t, cp.Client, releaseNS)
	objs := renderChart(t, releaseNS, "descheduler.deschedulingInterval=2s")
	applyAll(t, cp, objs, false)
	// The descheduler as a CronJob, and without PUB rules: accepted too
	// (a dry run; the processes below run the Deployment's command line).
	applyAll(t, cp, renderChart(t, releaseNS, "descheduler.kind=CronJob", "podUnavailableBudgets.enabled=false"), true)
	if t.Failed() {
		t.FailNow()
	}

	// Each binary with the rendered config, as its ServiceAccount.
	schedKubeconfig, schedCfg := serviceAccountKubeconfig(t, cp, releaseNS, schedulerSA, dir)
	deschedKubeconfig, deschedCfg := serviceAccountKubeconfig(t, cp, releaseNS, deschedulerSA, dir)
	writeConfigMap(t, find(t, objs, "ConfigMap", "budgetguard-scheduler-config"), filepath.Join(dir, "scheduler-config"))
	writeConfigMap(t, find(t, objs, "ConfigMap", "budgetguard-descheduler-policy"), filepath.Join(dir, "descheduler-policy"))
	setClientKubeconfig(t, filepath.Join(dir, "scheduler-config", "scheduler-config.yaml"), schedKubeconfig)
	scheduler := startComponent(t, "scheduler", filepath.Join(dir, "bin", "scheduler"),
		find(t, objs, "Deployment", "budgetguard-scheduler"), filepath.Join(dir, "scheduler-config"), schedKubeconfig,
		"--authentication-kubeconfig="+schedKubeconfig, "--authorization-kubeconfig="+schedKubeconfig)
	descheduler := startComponent(t, "descheduler", filepath.Join(dir, "bin", "descheduler"),
		find(t, objs, "Deployment", "budgetguard-descheduler"), filepath.Join(dir, "descheduler-policy"), deschedKubeconfig)
	scheduler.waitHealthy(t)
	descheduler.waitHealthy(t)
	for _, lease := range []string{schedulerSA, deschedulerSA} {
		testenv.WaitFor(t, time.Minute, "lease "+lease+" held", func(ctx context.Context) (bool, error) {
			l, err := cp.Client.CoordinationV1().Leases(releaseNS).Get(ctx, lease, metav1.GetOptions{})
			return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "", err
		})
	}

	showcasePreemption(t, env)
	deschedulingCase(t, env, descheduler)
	apiRefusalCase(t, env, scheduler, cp.Config.BearerToken)

	// Metrics, with budgetguard's among them. The scheduler authorizes
	// /metrics by SubjectAccessReview: ask as the admin. The cases above
	// gave the counter vectors the chart's alerts and dashboard query
	// their first series; checkMonitoringQueries checks those queries
	// against these scrapes.
	scrapes := map[string]string{}
	for _, c := range []struct {
		comp    *component
		token   string
		metrics []string
	}{
		{scheduler, cp.Config.BearerToken, []string{"budgetguard_build_info", "budgetguard_preemption_blocked_total", "budgetguard_cache_budgets", "scheduler_schedule_attempts_total"}},
		{descheduler, "", []string{"budgetguard_build_info", "budgetguard_evictor_evictions_refused_total", "budgetguard_cache_budgets"}},
	} {
		code, body, err := c.comp.get(ctx, "/metrics", c.token)
		if err != nil || code != http.StatusOK {
			t.Errorf("%s /metrics: %d %v", c.comp.name, code, err)
			continue
		}
		scrapes[c.comp.name] = body
		for _, m := range c.metrics {
			if _, ok := metricValue(body, m); !ok {
				t.Errorf("%s /metrics has no %s", c.comp.name, m)
			}
		}
	}
	if len(scrapes) == 2 {
		checkMonitoringQueries(t, cp, scrapes)
	}

	// Least privilege: what they must not do is forbidden, and the audit log
	// shows that nothing they did themselves was.
	pods, err := env.ListPods(ctx, preemptNS, map[string]string{"app": "web"})
	if err != nil || len(pods) == 0 {
		t.Fatalf("list web pods: %v", err)
	}
	probes := forbiddenProbes(preemptNS, releaseNS, pods[0].Name, "web")
	runProbes(t, ctx, map[string]kubernetes.Interface{
		"scheduler":   clientAs(t, schedCfg, probeUserAgent),
		"descheduler": clientAs(t, deschedCfg, probeUserAgent),
	}, probes)
	checkAudit(t, readAudit(t, auditLog), map[string]string{
		"system:serviceaccount:" + releaseNS + ":" + schedulerSA:   "scheduler",
		"system:serviceaccount:" + releaseNS + ":" + deschedulerSA: "descheduler",
	}, len(probes))
	t.Logf("end-to-end run took %s", time.Since(began).Round(time.Second))
}

// showcasePreemption: one 4-CPU node holds 4 Ready 1-CPU pods of a
// ReplicaSet under a PDB with maxUnavailable 1, and a higher-priority pod
// asks for 2 CPU. Upstream preemption deletes 2 of them; budgetguard keeps
// the budget and says which budget refused.
func showcasePreemption(t *testing.T, env *testenv.Env) {
	t.Helper()
	ensureNamespace(t, env.Client, preemptNS)
	env.DumpOnFailure(t, preemptNS)
	node := env.ReadyNode(t, preemptNS, "4")
	labels := map[string]string{"app": "web"}
	template := testobj.MakePod().Labels(labels).SchedulerName(schedulerName).Container("web", "1").OnNodes(node).Obj()
	env.CreateReplicaSet(t, preemptNS, testobj.MakeReplicaSet().Name("web").Replicas(4).Template(corev1.PodTemplateSpec{
		ObjectMeta: template.ObjectMeta, Spec: template.Spec,
	}))
	env.CreatePDB(t, preemptNS, testobj.MakePDB().Name("web").MatchLabels("app", "web").MaxUnavailable(1))
	before := env.WaitForReadyPods(t, preemptNS, labels, 4)
	testenv.WaitFor(t, time.Minute, "PDB web allows 1 disruption", func(ctx context.Context) (bool, error) {
		pdb, err := env.Client.PolicyV1().PodDisruptionBudgets(preemptNS).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && pdb.Status.ObservedGeneration == pdb.Generation && pdb.Status.DisruptionsAllowed == 1, err
	})

	high := env.PriorityClass(t, preemptNS, 1000)
	// The Priority admission plugin reads PriorityClasses from an informer:
	// a new one may not be there yet.
	var preemptor *corev1.Pod
	testenv.WaitFor(t, testenv.DefaultWait, "the preemptor created", func(ctx context.Context) (bool, error) {
		var err error
		preemptor, err = env.Client.CoreV1().Pods(preemptNS).Create(ctx, testobj.MakePod().Name("urgent").SchedulerName(schedulerName).
			PriorityClass(high).Container("urgent", "2").OnNodes(node).Obj(), metav1.CreateOptions{})
		return err == nil, err
	})
	want := fmt.Sprintf("pdb %s/web", preemptNS)
	testenv.WaitFor(t, time.Minute, "a PreemptionBlockedByBudget event on the preemptor naming "+want, func(ctx context.Context) (bool, error) {
		evs, err := env.Client.EventsV1().Events(preemptNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, ev := range evs.Items {
			if ev.Regarding.UID == preemptor.UID && ev.Reason == "PreemptionBlockedByBudget" && strings.Contains(ev.Note, want) {
				t.Logf("event %s: %s", ev.Reason, ev.Note)
				return true, nil
			}
		}
		return false, fmt.Errorf("%d events, none matches", len(evs.Items))
	})
	after := env.WaitForReadyPods(t, preemptNS, labels, 4)
	if !slices.Equal(podNames(before), podNames(after)) {
		t.Errorf("web pods changed: %v, then %v; budgetguard must disrupt none here", podNames(before), podNames(after))
	}
	p, err := env.Client.CoreV1().Pods(preemptNS).Get(testenv.Context(t), "urgent", metav1.GetOptions{})
	if err != nil || p.Spec.NodeName != "" {
		t.Errorf("the preemptor is bound to %q (%v); it must stay pending", p.Spec.NodeName, err)
	}
}

// deschedulingCase: two pods of a ReplicaSet on one node, another node
// free, so RemoveDuplicates wants one moved. While the PDB allows no
// disruption the descheduler's BudgetAwareEvictor refuses; once it allows
// one, the descheduler evicts one.
func deschedulingCase(t *testing.T, env *testenv.Env, descheduler *component) {
	t.Helper()
	ensureNamespace(t, env.Client, deschedNS)
	env.DumpOnFailure(t, deschedNS)
	crowded := env.ReadyNode(t, deschedNS, "4")
	_ = env.ReadyNode(t, deschedNS, "4")
	labels := map[string]string{"app": "dup"}
	template := testobj.MakePod().Labels(labels).Container("dup", "100m").Node(crowded).Obj()
	env.CreateReplicaSet(t, deschedNS, testobj.MakeReplicaSet().Name("dup").Replicas(2).Template(corev1.PodTemplateSpec{
		ObjectMeta: template.ObjectMeta, Spec: template.Spec,
	}))
	env.CreatePDB(t, deschedNS, testobj.MakePDB().Name("dup").MatchLabels("app", "dup").MinAvailable(2))
	before := env.WaitForReadyPods(t, deschedNS, labels, 2)
	ctx := testenv.Context(t)

	testenv.WaitFor(t, time.Minute, "the descheduler's BudgetAwareEvictor to refuse an eviction", func(ctx context.Context) (bool, error) {
		_, body, err := descheduler.get(ctx, "/metrics", "")
		if err != nil {
			return false, err
		}
		v, _ := metricValue(body, "budgetguard_evictor_evictions_refused_total")
		return v > 0, fmt.Errorf("budgetguard_evictor_evictions_refused_total %v", v)
	})
	if now := env.WaitForReadyPods(t, deschedNS, labels, 2); !slices.Equal(podNames(before), podNames(now)) {
		t.Errorf("dup pods changed while the PDB allowed no disruption: %v, then %v", podNames(before), podNames(now))
	}

	patch := []byte(`{"spec":{"minAvailable":1}}`)
	if _, err := env.Client.PolicyV1().PodDisruptionBudgets(deschedNS).Patch(ctx, "dup", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, time.Minute, "the descheduler to evict one dup pod once the PDB allows it", func(ctx context.Context) (bool, error) {
		pods, err := env.ListPods(ctx, deschedNS, labels)
		if err != nil {
			return false, err
		}
		for _, p := range pods {
			if !slices.Contains(podNames(before), p.Name) {
				return true, nil
			}
		}
		return false, fmt.Errorf("pods %v", podNames(pods))
	})
}
