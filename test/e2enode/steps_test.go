//go:build e2enode

package e2enode

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/budgetguard/budgetguard/internal/audit"
	"github.com/budgetguard/budgetguard/internal/realnode"
)

func pdb(ns, name string, minAvailable, maxUnavailable *intstr.IntOrString, policy policyv1.UnhealthyPodEvictionPolicyType) *policyv1.PodDisruptionBudget {
	p := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: policyv1.PodDisruptionBudgetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			MinAvailable:   minAvailable,
			MaxUnavailable: maxUnavailable,
		},
	}
	if policy != "" {
		p.Spec.UnhealthyPodEvictionPolicy = ptr.To(policy)
	}
	return p
}

func intOrStr(n int) *intstr.IntOrString { v := intstr.FromInt32(int32(n)); return &v }

// preemptor is a pod of high priority for the release's scheduler that asks
// for more CPU than the node has free.
func preemptor(ns, name, priorityClass string, milliCPU int64) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			SchedulerName:                 scheduler,
			PriorityClassName:             priorityClass,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			EnableServiceLinks:            ptr.To(false),
			Containers: []corev1.Container{{
				Name:            "app",
				Image:           realnode.WebappImage,
				ImagePullPolicy: corev1.PullNever,
				Resources:       corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(milliCPU, resource.DecimalSI)}},
			}},
		},
	}
}

// testQuickStart is README's quick start with real containers: web's four
// pods (a readiness probe, a 15 s grace period their shutdown uses) under a
// PDB that keeps 3 available; checkout, of higher priority, needs two of
// them gone. The release's scheduler refuses: checkout stays Pending, the
// event and kubectl budgetguard why name pdb shop/web, and web keeps all
// four pods.
func testQuickStart(t *testing.T, e *env) {
	const ns = "shop"
	createNamespace(t, e, ns)
	t.Cleanup(func() { deleteNamespace(t, e, ns) })
	createPriorityClass(t, e, "shop-critical", 1000)
	createApp(t, e, app{ns: ns, name: "web", replicas: 4, cpu: "100m", readyAfter: 3 * time.Second, shutdown: 5 * time.Second, grace: 15})
	createPDB(t, e, pdb(ns, "web", intOrStr(3), nil, ""))
	waitAvailable(t, e, ns, "web")
	waitPDBAllows(t, e, ns, "web", 1)
	before := podsOf(t, e, ns, map[string]string{"app": "web"})
	uids := map[types.UID]bool{}
	for _, p := range before {
		uids[p.UID] = true
	}

	// One web pod frees 100m; checkout needs 150m more than is free: two.
	free := freeCPU(t, e)
	t.Logf("%dm CPU free on the node; checkout asks for %dm", free, free+150)
	if _, err := e.kube.CoreV1().Pods(ns).Create(t.Context(), preemptor(ns, "checkout", "shop-critical", free+150), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var event string
	if err := wait.PollUntilContextTimeout(t.Context(), time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		evs, err := e.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=PreemptionBlockedByBudget,involvedObject.name=checkout"})
		if err != nil || len(evs.Items) == 0 {
			return false, nil
		}
		event = evs.Items[0].Message
		return true, nil
	}); err != nil {
		t.Fatalf("no PreemptionBlockedByBudget event on checkout: %v", err)
	}
	t.Logf("event: %s", event)
	if !strings.Contains(event, "pdb shop/web") {
		t.Errorf("the refusal event does not name pdb shop/web: %q", event)
	}
	p, err := e.kube.CoreV1().Pods(ns).Get(t.Context(), "checkout", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Spec.NodeName != "" {
		t.Errorf("checkout was bound to %s", p.Spec.NodeName)
	}

	bin := filepath.Join(t.TempDir(), "kubectl-budgetguard")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./cmd/kubectl-budgetguard")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build kubectl-budgetguard: %v\n%s", err, out)
	}
	why := command(t, bin, "why", "pod/checkout", "-n", ns)
	t.Logf("kubectl budgetguard why pod/checkout:\n%s", why)
	if !strings.Contains(why, "pdb shop/web") {
		t.Errorf("kubectl budgetguard why does not name pdb shop/web")
	}

	after := podsOf(t, e, ns, map[string]string{"app": "web"})
	for _, p := range after {
		if !uids[p.UID] || p.DeletionTimestamp != nil || !podReady(&p) {
			t.Errorf("web lost a pod: %s (uid %s, terminating %v, ready %v)", p.Name, p.UID, p.DeletionTimestamp != nil, podReady(&p))
		}
	}
	if len(after) != len(before) {
		t.Errorf("web has %d pods, had %d", len(after), len(before))
	}
}

// testDeschedulingLoop: the release's descheduler (PodLifeTime: every pod
// older than 20 s in namespace loop, a loop every 10 s) against api's four
// pods under a PDB with maxUnavailable 1. An evicted pod stays Terminating
// for its 4 s shutdown, and its replacement turns Ready 4 s after it
// starts, so every loop finds one disruption allowed at most, and
// BudgetAwareEvictor refuses the rest before the API server has to. The
// auditor sees the descheduler evict within the budget, under its own
// ServiceAccount, and never break it.
func testDeschedulingLoop(t *testing.T, e *env) {
	const ns = "loop"
	a := startAuditor(t, e)
	createNamespace(t, e, ns)
	t.Cleanup(func() { deleteNamespace(t, e, ns) })
	createApp(t, e, app{ns: ns, name: "api", replicas: 4, cpu: "50m", readyAfter: 4 * time.Second, shutdown: 4 * time.Second, grace: 10})
	createPDB(t, e, pdb(ns, "api", nil, intOrStr(1), ""))
	waitAvailable(t, e, ns, "api")

	refusedBefore := deschedulerRefusals(t, e)
	// Until the descheduler has evicted three pods (kube-apiserver's audit
	// log has its requests), or 90 s.
	_ = wait.PollUntilContextTimeout(t.Context(), 2*time.Second, 90*time.Second, false, func(context.Context) (bool, error) {
		n := 0
		for _, c := range auditUsers(t, "descheduler/") {
			n += c
		}
		return n >= 3, nil
	})
	r := judge(t, a, nil)
	n := 0
	for _, d := range r.Disruptions {
		if d.Component == audit.ComponentDescheduler {
			n++
			if d.Action != audit.ActionEvict {
				t.Errorf("the descheduler %s pod %s/%s: want evictions only", d.Action, d.Namespace, d.Pod)
			}
		}
	}
	if n < 2 {
		t.Errorf("the descheduler evicted %d pods of api in 90 s, want at least 2 (a loop every 10 s)", n)
	}
	users := auditUsers(t, "descheduler/")
	want := "system:serviceaccount:" + releaseNS + ":" + descheduler
	for u := range users {
		if u != want {
			t.Errorf("kube-apiserver's audit log has a descheduler request by %q, want only the chart's ServiceAccount %q", u, want)
		}
	}
	for _, b := range r.Budgets {
		if b.Budget.Name == "api" {
			t.Logf("pdb loop/api: %d disruptions, lowest healthy %d of %d desired", b.Disruptions, b.LowestHealthy, b.Desired)
			if b.Short {
				t.Errorf("pdb loop/api fell below its desired healthy count (%d of %d)", b.LowestHealthy, b.Desired)
			}
		}
	}
	for _, rf := range r.Refusals {
		if rf.Component == audit.ComponentDescheduler {
			t.Errorf("the API server refused a descheduler eviction (%d %s/%s): BudgetAwareEvictor should have refused it first", rf.Code, rf.Namespace, rf.Pod)
		}
	}
	refused := deschedulerRefusals(t, e) - refusedBefore
	t.Logf("the descheduler evicted %d pods; BudgetAwareEvictor refused %.0f evictions (its metric)", n, refused)
	if refused == 0 {
		t.Errorf("BudgetAwareEvictor refused no eviction: with 4 pods over 20 s old and maxUnavailable 1, a loop finds more candidates than the budget allows")
	}
}

// deschedulerRefusals sums BudgetAwareEvictor's refusals over the
// descheduler's pods, from their /metrics.
func deschedulerRefusals(t *testing.T, e *env) float64 {
	t.Helper()
	var sum float64
	for _, p := range podsOf(t, e, releaseNS, map[string]string{"app.kubernetes.io/component": "descheduler"}) {
		if p.Status.PodIP == "" || p.DeletionTimestamp != nil {
			continue
		}
		port := int(p.Spec.Containers[0].Ports[0].ContainerPort)
		for _, line := range strings.Split(scrape(t, p.Status.PodIP, port, "/metrics"), "\n") {
			if strings.HasPrefix(line, "#") || !strings.Contains(line, "evictions_refused_total") {
				continue
			}
			f := strings.Fields(line)
			if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
				sum += v
			}
		}
	}
	return sum
}

// testMultiActor: every actor at once against the same budgets on the real
// node, for 90 s, judged by the auditor. The release's scheduler preempts in
// waves (a preemptor of high priority asks for 120m more than is free, three
// of the apps' 50m pods); the release's descheduler evicts every pod older
// than 20 s every 10 s; the test evicts a random pod every 1.5 s, as kubectl
// drain would; the apps' readiness probes flap (the application turns not
// Ready for 3 s now and then); evicted pods stay Terminating for their
// shutdown (up to 6 s); replacements turn Ready 2 to 5 s after they start.
// Halfway, both components' leading processes are killed with SIGKILL.
// Budgets: minAvailable 2 of 3; maxUnavailable 1 with
// unhealthyPodEvictionPolicy AlwaysAllow; maxUnavailable 0; maxUnavailable
// 50 %; and one app under none. The auditor must count disruptions by every
// actor, and none by budgetguard that broke a budget; and it must charge
// the control, a delete that breaks max0 on purpose, to its actor; and
// after the crashes, new leaders must bind preemptors and evict.
func testMultiActor(t *testing.T, e *env) {
	const ns = "churn"
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	var f failures
	defer f.recap(t)
	a := startAuditor(t, e)
	createNamespace(t, e, ns)
	t.Cleanup(func() { deleteNamespace(t, e, ns) })
	createPriorityClass(t, e, "churn-low", 100)
	createPriorityClass(t, e, "churn-high", 100000)
	apps := []app{
		{ns: ns, name: "min2", replicas: 3, readyAfter: 2 * time.Second, shutdown: 3 * time.Second, grace: 5, flapEvery: 4 * time.Second},
		{ns: ns, name: "max1", replicas: 4, readyAfter: 3 * time.Second, shutdown: 2 * time.Second, grace: 5, flapEvery: 5 * time.Second},
		{ns: ns, name: "max0", replicas: 3, readyAfter: 2 * time.Second, shutdown: 1 * time.Second, grace: 3},
		{ns: ns, name: "half", replicas: 4, readyAfter: 5 * time.Second, shutdown: 6 * time.Second, grace: 8},
		{ns: ns, name: "free", replicas: 4, readyAfter: 2 * time.Second, shutdown: 1 * time.Second, grace: 3},
	}
	for _, ap := range apps {
		ap.cpu, ap.priorityClass = "50m", "churn-low"
		createApp(t, e, ap)
	}
	half := intstr.FromString("50%")
	createPDB(t, e, pdb(ns, "min2", intOrStr(2), nil, ""))
	createPDB(t, e, pdb(ns, "max1", nil, intOrStr(1), policyv1.AlwaysAllow))
	createPDB(t, e, pdb(ns, "max0", nil, intOrStr(0), ""))
	createPDB(t, e, pdb(ns, "half", nil, &half, ""))
	for _, ap := range apps {
		waitAvailable(t, e, ns, ap.name)
	}
	waitPDBAllows(t, e, ns, "max0", 0)
	// The control: a plain delete of a healthy pod under max0, which
	// allows nothing, by an actor that is not budgetguard. The auditor must
	// charge it, or it is blind on this node's record.
	control := podsOf(t, e, ns, map[string]string{"app": "max0"})[0].Name
	if err := e.drain.CoreV1().Pods(ns).Delete(t.Context(), control, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	counts := map[string]int{}
	count := func(k string) { mu.Lock(); counts[k]++; mu.Unlock() }
	var boundAt []time.Time
	// The leaders crash: 30 s in, each component's leading process is
	// killed with SIGKILL on the node (no SIGTERM, so no Lease released);
	// the kubelet restarts the container, and whichever replica takes the
	// Lease once it expires must carry on.
	killed := map[string]string{} // component: the Lease's holder identity when it was killed
	var killedAt time.Time
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-ctx.Done():
			return
		case <-time.After(30 * time.Second):
		}
		mu.Lock()
		defer mu.Unlock()
		killedAt = time.Now()
		for _, name := range []string{scheduler, descheduler} {
			lease, err := e.kube.CoordinationV1().Leases(releaseNS).Get(ctx, name, metav1.GetOptions{})
			if err != nil || lease.Spec.HolderIdentity == nil {
				continue
			}
			podName, _, _ := strings.Cut(*lease.Spec.HolderIdentity, "_")
			pod, err := e.kube.CoreV1().Pods(releaseNS).Get(ctx, podName, metav1.GetOptions{})
			if err != nil {
				continue
			}
			// The binary is the image's entrypoint, /scheduler or /descheduler.
			binary := strings.TrimPrefix(name, "budgetguard-")
			if n := crash(pod.UID, binary); n > 0 {
				killed[name] = *lease.Spec.HolderIdentity
			}
		}
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			time.Sleep(1500 * time.Millisecond)
			pods, err := e.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app"})
			if err != nil || len(pods.Items) == 0 {
				continue
			}
			p := pods.Items[rng.IntN(len(pods.Items))]
			err = e.drain.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: ns}})
			if err == nil {
				count("drain evicted")
			} else {
				count("drain refused")
			}
		}
	}()
	// The preemptors: a wave every 6 s, each held until it is bound or
	// 5 s have passed, then deleted.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			free, err := e.freeCPU(ctx)
			if err != nil {
				continue
			}
			name := fmt.Sprintf("preemptor-%d", i)
			if _, err := e.kube.CoreV1().Pods(ns).Create(ctx, preemptor(ns, name, "churn-high", free+120), metav1.CreateOptions{}); err != nil {
				continue
			}
			count("preemptors")
			_ = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 5*time.Second, true, func(ctx context.Context) (bool, error) {
				p, err := e.kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
				if err == nil && p.Spec.NodeName != "" {
					count("preemptors bound")
					mu.Lock()
					boundAt = append(boundAt, time.Now())
					mu.Unlock()
					return true, nil
				}
				return false, nil
			})
			_ = e.kube.CoreV1().Pods(ns).Delete(context.WithoutCancel(ctx), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	wg.Wait()
	t.Logf("actors: %v", counts)

	r := judge(t, a, &f)
	by := map[audit.Component]int{}
	for _, d := range r.Disruptions {
		by[d.Component]++
	}
	for _, c := range []audit.Component{audit.ComponentScheduler, audit.ComponentDescheduler, audit.ComponentOther} {
		if by[c] == 0 {
			f.errorf(t, "the auditor counted no disruption by %s: the run did not exercise every actor", c)
		}
	}
	// After the leaders died, their successors: each Lease held by a new
	// process, the scheduler binding preemptors and the descheduler evicting.
	t.Logf("killed the leaders %v at %s", killed, killedAt.Format(time.TimeOnly))
	for _, name := range []string{scheduler, descheduler} {
		if killed[name] == "" {
			f.errorf(t, "the leader of %s was not killed", name)
			continue
		}
		lease, err := e.kube.CoordinationV1().Leases(releaseNS).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if h := ptr.Deref(lease.Spec.HolderIdentity, ""); h == killed[name] || h == "" {
			f.errorf(t, "lease %s is still held by %q, the process killed", name, h)
		} else {
			t.Logf("lease %s: %s, then %s", name, killed[name], h)
		}
	}
	after := 0
	for _, at := range boundAt {
		if at.After(killedAt) {
			after++
		}
	}
	deschedAfter := 0
	for _, d := range r.Disruptions {
		if d.Component == audit.ComponentDescheduler && d.Time.After(killedAt) {
			deschedAfter++
		}
	}
	t.Logf("after the leaders died: %d preemptors bound, %d evictions by the descheduler", after, deschedAfter)
	if after == 0 {
		f.errorf(t, "no preemptor was bound after the scheduler's leader died: its successor did not take over")
	}
	if deschedAfter == 0 {
		f.errorf(t, "the descheduler evicted nothing after its leader died: its successor did not take over")
	}

	charged := false
	for _, v := range r.Violations {
		if v.Disruption.Pod == control && v.Budget.Name == "max0" && v.Disruption.Component == audit.ComponentOther {
			charged = true
		}
	}
	if !charged {
		f.errorf(t, "the auditor did not charge the control: the delete of %s/%s under pdb max0, which allowed nothing", ns, control)
	}
	budgets := 0
	for _, b := range r.Budgets {
		budgets++
		t.Logf("%s %s/%s: %d disruptions, lowest healthy %d of %d desired, short %v", b.Budget.Kind, b.Budget.Namespace, b.Budget.Name, b.Disruptions, b.LowestHealthy, b.Desired, b.Short)
	}
	if budgets < 4 {
		f.errorf(t, "the auditor saw %d budgets, want the 4 PDBs", budgets)
	}
	for _, d := range r.Disruptions {
		if !slices.Contains([]audit.Component{audit.ComponentScheduler, audit.ComponentDescheduler}, d.Component) || len(d.Budgets) == 0 || d.Budgets[0].Name != "max0" {
			continue
		}
		// A Pending pod (its containers still starting) is taken without
		// a budget's consent, as the Eviction API takes it: the control's
		// replacement may be one. A running pod under max0 never is.
		if d.WasPending {
			t.Logf("%s took %s/%s under pdb max0 while it was Pending (no budget governs it)", d.Component, d.Namespace, d.Pod)
			continue
		}
		f.errorf(t, "%s took %s/%s under pdb max0, which allows nothing (healthy %v)", d.Component, d.Namespace, d.Pod, d.WasHealthy)
	}
}

// crash sends SIGKILL to the processes of a pod's containers that run
// binary, found through /proc (the test runs as root on the node): the
// process dies as in a crash, with no chance to release its Lease. It
// returns how many it killed.
func crash(pod types.UID, binary string) int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || filepath.Base(strings.SplitN(string(cmdline), "\x00", 2)[0]) != binary {
			continue
		}
		cgroup, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		if err != nil || !strings.Contains(string(cgroup), string(pod)) {
			continue
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}
