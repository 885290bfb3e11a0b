package audit

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/budgetguard/budgetguard/internal/sandboxtest"
	"github.com/budgetguard/budgetguard/internal/testenv"
	"github.com/budgetguard/budgetguard/internal/testobj"
	"github.com/budgetguard/budgetguard/sandbox"
)

// TestAuditorOnTheSandboxControlPlane runs the auditor against the real
// kube-apiserver of package sandbox, started with APIServerFlags: an
// eviction by the descheduler's user agent and a delete by the scheduler's
// are attributed to them, the delete that takes a PDB below its desired
// count is a violation, an eviction that a PDB forbids is a 429 refusal, and
// the simulated kubelet's deletes of the terminating pods are ignored. It
// calls Finish right after the last request returned, with no wait.
func TestAuditorOnTheSandboxControlPlane(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	flags, logPath, err := APIServerFlags(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	opts := sandbox.DefaultOptions()
	opts.APIServerFlags = flags
	// Its cleanup runs after testenv's, which use the control plane.
	cp := sandboxtest.Start(ctx, t, opts)

	auditOpts := testOptions()
	auditOpts.Config, auditOpts.LogPath = cp.Config, logPath
	a, err := New(auditOpts)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(ctx); err != nil {
		t.Fatalf("start the auditor: %v", err)
	}

	runner := clientWithUserAgent(t, cp.Config, "sandbox-runner")
	scheduler := clientWithUserAgent(t, cp.Config, "sandbox-scheduler")
	descheduler := clientWithUserAgent(t, cp.Config, "sandbox-descheduler")

	env := testenv.New(runner)
	const ns = "audit"
	testenv.Create(t, runner.CoreV1().Namespaces(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	node := env.ReadyNode(t, ns, "4")
	for _, p := range []struct{ name, app string }{{"web-a", "web"}, {"web-b", "web"}, {"web-c", "web"}, {"locked-0", "locked"}} {
		env.CreatePod(t, ns, testobj.MakePod().Name(p.name).Label("app", p.app).Node(node).GracePeriod(30).Container("app", ""))
	}
	env.WaitForReadyPods(t, ns, nil, 4)
	// web: 3 healthy, 2 desired, 1 allowed; locked: 1 healthy, 1 desired, none allowed.
	for _, b := range []struct {
		app                       string
		healthy, desired, allowed int32
	}{{"web", 3, 2, 1}, {"locked", 1, 1, 0}} {
		env.CreatePDB(t, ns, testobj.MakePDB().Name(b.app).MinAvailable(b.desired).MatchLabels("app", b.app))
		testenv.WaitFor(t, testenv.DefaultWait, "PDB "+b.app+"'s status", env.PDBStatusIs(ns, b.app, policyv1.PodDisruptionBudgetStatus{
			CurrentHealthy: b.healthy, DesiredHealthy: b.desired, DisruptionsAllowed: b.allowed, ExpectedPods: b.healthy,
		}))
	}

	if code, err := evict(ctx, descheduler, ns, "web-a"); code != 201 {
		t.Fatalf("evict web-a: code %d, %v", code, err)
	}
	// The scheduler deletes web-b once it could know of the eviction: the
	// auditor has seen the PDB's status record web-a and web-a terminating,
	// and a while more, well past the informers' lag of this quiet run.
	// Right after the eviction, a delete by another component is a race
	// (docs/audit.md), not the violation this test wants.
	testenv.WaitFor(t, testenv.DefaultWait, "the auditor to see web-a's eviction", func(context.Context) (bool, error) {
		a.mu.Lock()
		defer a.mu.Unlock()
		recorded, going := false, false
		for _, o := range a.observations {
			recorded = recorded || (o.pdb != nil && o.pdb.Name == "web" && o.pdb.Status.DisruptedPods["web-a"] != (metav1.Time{}))
			going = going || (o.podKey == podKey{ns, "web-a"} && (o.pod == nil || o.pod.DeletionTimestamp != nil))
		}
		return recorded && going, nil
	})
	time.Sleep(250 * time.Millisecond)
	if err := scheduler.CoreV1().Pods(ns).Delete(ctx, "web-b", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete web-b: %v", err)
	}
	if code, _ := evict(ctx, descheduler, ns, "locked-0"); code != 429 {
		t.Fatalf("evict locked-0: code %d, want 429", code)
	}
	// In blocking mode the line is in the file once the client has the answer.
	if !logHasRequest(t, logPath, "locked-0", 429) {
		t.Errorf("the refused eviction of locked-0 is not in the audit log right after its response")
	}
	// The simulated kubelet finishes web-a and web-b; its deletes are ignored.
	testenv.WaitFor(t, testenv.DefaultWait, "web-a and web-b gone", func(ctx context.Context) (bool, error) {
		pods, err := env.ListPods(ctx, ns, nil)
		return err == nil && len(pods) == 2, err
	})
	// The runner's delete is ignored, but web-c is no longer healthy once the
	// auditor's informer shows it terminating.
	if err := runner.CoreV1().Pods(ns).Delete(ctx, "web-c", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete web-c as the runner: %v", err)
	}
	testenv.WaitFor(t, testenv.DefaultWait, "the auditor to see web-c terminating", func(context.Context) (bool, error) {
		a.mu.Lock()
		defer a.mu.Unlock()
		return slices.ContainsFunc(a.observations, func(o observation) bool {
			return o.podKey == podKey{ns, "web-c"} && (o.pod == nil || o.pod.DeletionTimestamp != nil)
		}), nil
	})

	res, err := a.Finish(ctx)
	if err != nil {
		t.Fatalf("Finish: %v", err)
	}

	web, locked := BudgetRef{KindPDB, ns, "web"}, BudgetRef{KindPDB, ns, "locked"}
	wantDisruptions := []Disruption{
		{Component: ComponentDescheduler, Action: ActionEvict, Namespace: ns, Pod: "web-a", Budgets: []BudgetRef{web}, WasHealthy: true},
		{Component: ComponentScheduler, Action: ActionDelete, Namespace: ns, Pod: "web-b", Budgets: []BudgetRef{web}, WasHealthy: true},
	}
	ignoreTimeAndUA := cmpopts.IgnoreFields(Disruption{}, "Time", "UserAgent")
	if diff := cmp.Diff(wantDisruptions, res.Disruptions, ignoreTimeAndUA); diff != "" {
		t.Errorf("disruptions (-want,+got):\n%s", diff)
	}
	if len(res.Disruptions) == 2 && (res.Disruptions[0].Time.IsZero() || res.Disruptions[1].Time.Before(res.Disruptions[0].Time)) {
		t.Errorf("disruption times are not the API server's receive times in order: %v, %v", res.Disruptions[0].Time, res.Disruptions[1].Time)
	}
	if len(res.Refusals) != 1 {
		t.Fatalf("want one refusal, got %+v", res.Refusals)
	}
	if r := res.Refusals[0]; r.Component != ComponentDescheduler || r.Action != ActionEvict || r.Pod != "locked-0" || r.Code != 429 || r.Message == "" {
		t.Errorf("refusal: got %+v, want the descheduler's eviction of locked-0 refused with 429 and a message", r)
	}
	wantViolations := []Violation{{Budget: web, Disruption: wantDisruptions[1], Healthy: 1, Desired: 2}}
	if diff := cmp.Diff(wantViolations, res.Violations, ignoreTimeAndUA); diff != "" {
		t.Errorf("violations (-want,+got):\n%s\nraces %+v, informer lag %s", diff, res.Races, res.Windows.InformerLag.Duration)
	}
	wantBudgets := []BudgetSummary{
		{Budget: locked, Desired: 1, Met: true, LowestHealthy: 1},
		{Budget: web, Desired: 2, Met: true, LowestHealthy: 0, Disruptions: 2, Short: true},
	}
	if diff := cmp.Diff(wantBudgets, res.Budgets); diff != "" {
		t.Errorf("budgets (-want,+got):\n%s", diff)
	}

	// Every component reaches kube-apiserver as the same loopback user: the
	// user agent is the only thing that tells them apart.
	users, agents := logUsers(t, logPath)
	t.Logf("audited users %q, user agents %q", users, agents)
	if len(users) != 1 {
		t.Errorf("want every audited request from one user, got %v", users)
	}
	for _, want := range []string{"sandbox-runner", "sandbox-scheduler", "sandbox-descheduler", "sandbox-kubelet"} {
		if !slices.ContainsFunc(agents, func(ua string) bool { c := Options{Ignore: []string{want}}; _, ig := c.classify(ua); return ig }) {
			t.Errorf("no audited request from %s; user agents: %v", want, agents)
		}
	}
}

func clientWithUserAgent(t *testing.T, cfg *rest.Config, ua string) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(rest.AddUserAgent(rest.CopyConfig(cfg), ua))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// evict posts an eviction once: client-go's typed Evict retries 429s.
func evict(ctx context.Context, c kubernetes.Interface, ns, pod string) (int, error) {
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: ns}}
	var code int
	err := c.PolicyV1().RESTClient().Post().AbsPath("/api/v1").Namespace(ns).Resource("pods").Name(pod).
		SubResource("eviction").MaxRetries(0).Body(ev).Do(ctx).StatusCode(&code).Error()
	return code, err
}

// logHasRequest reports whether the audit log holds a final line for a
// request on pod answered with code.
func logHasRequest(t *testing.T, path, pod string, code int32) bool {
	t.Helper()
	found := false
	readLog(t, path, func(ev *auditv1.Event) {
		if ev.ObjectRef != nil && ev.ObjectRef.Name == pod && ev.ResponseStatus != nil && ev.ResponseStatus.Code == code {
			found = true
		}
	})
	return found
}

// logUsers returns the distinct users and user agents in the audit log.
func logUsers(t *testing.T, path string) (users, agents []string) {
	t.Helper()
	readLog(t, path, func(ev *auditv1.Event) {
		if !slices.Contains(users, ev.User.Username) {
			users = append(users, ev.User.Username)
		}
		if !slices.Contains(agents, ev.UserAgent) {
			agents = append(agents, ev.UserAgent)
		}
	})
	return users, agents
}

func readLog(t *testing.T, path string, each func(*auditv1.Event)) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev auditv1.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("audit log line: %v", err)
		}
		each(&ev)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}
