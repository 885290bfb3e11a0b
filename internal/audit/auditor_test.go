package audit

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestAttributionAndRefusals(t *testing.T) {
	h := newHarness(t, testOptions())
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		h.createPod(webPod(n).Obj())
	}
	tEvict := h.log(logged{ua: uaDescheduler, action: ActionEvict, pod: "a", code: 201})
	tDelete := h.log(logged{ua: uaScheduler, action: ActionDelete, pod: "b", code: 200})
	tOther := h.log(logged{ua: uaReplicaSet, action: ActionDelete, pod: "c", code: 200})
	h.log(logged{ua: uaRunner, action: ActionDelete, pod: "d", code: 200})
	h.log(logged{ua: uaDescheduler, action: ActionEvict, pod: "e", code: 201, dryRun: true})
	h.log(logged{ua: uaDescheduler, action: ActionDelete, pod: "e", code: 200, dryRun: true})
	const pdbMessage = "Cannot evict pod as it would violate the pod's disruption budget."
	tRefused := h.log(logged{ua: uaDescheduler, action: ActionEvict, pod: "e", code: 429, message: pdbMessage})
	tMissing := h.log(logged{ua: uaScheduler, action: ActionDelete, pod: "gone", code: 404, message: `pods "gone" not found`})
	h.log(logged{ua: uaKubelet, action: ActionDelete, pod: "gone", code: 404})
	res := h.finish()

	wantDisruptions := []Disruption{
		{Time: tEvict, Component: ComponentDescheduler, UserAgent: uaDescheduler, Action: ActionEvict, Namespace: testNS, Pod: "a", Budgets: []BudgetRef{}, WasHealthy: true},
		{Time: tDelete, Component: ComponentScheduler, UserAgent: uaScheduler, Action: ActionDelete, Namespace: testNS, Pod: "b", Budgets: []BudgetRef{}, WasHealthy: true},
		{Time: tOther, Component: ComponentOther, UserAgent: uaReplicaSet, Action: ActionDelete, Namespace: testNS, Pod: "c", Budgets: []BudgetRef{}, WasHealthy: true},
	}
	if diff := cmp.Diff(wantDisruptions, res.Disruptions); diff != "" {
		t.Errorf("disruptions (-want,+got):\n%s", diff)
	}
	wantRefusals := []Refusal{
		{Time: tRefused, Component: ComponentDescheduler, UserAgent: uaDescheduler, Action: ActionEvict, Namespace: testNS, Pod: "e", Code: 429, Message: pdbMessage},
		{Time: tMissing, Component: ComponentScheduler, UserAgent: uaScheduler, Action: ActionDelete, Namespace: testNS, Pod: "gone", Code: 404, Message: `pods "gone" not found`},
	}
	if diff := cmp.Diff(wantRefusals, res.Refusals); diff != "" {
		t.Errorf("refusals (-want,+got):\n%s", diff)
	}
	if len(res.Violations) != 0 || len(res.Budgets) != 0 {
		t.Errorf("no budgets exist, got violations %v and budgets %v", res.Violations, res.Budgets)
	}
}

func TestRequestsOnTerminatingPodsAreNotDisruptions(t *testing.T) {
	h := newHarness(t, testOptions())
	a, b := webPod("a"), webPod("b")
	h.createPod(a.Obj())
	h.createPod(b.Obj())
	h.createPDB(pdb("web", 1).Obj())

	// a is terminating (deleted by the runner, which is ignored); the
	// kubelet finishes it, and a component deletes it again.
	h.log(logged{ua: uaRunner, action: ActionDelete, pod: "a", code: 200})
	h.updatePod(terminating(a))
	h.log(logged{ua: uaKubelet, action: ActionDelete, pod: "a", code: 200})
	h.log(logged{ua: uaScheduler, action: ActionDelete, pod: "a", code: 200})
	h.deletePod(a.Obj())

	// b is evicted, and deleted again before the informer shows it
	// terminating: one disruption.
	tEvict := h.log(logged{ua: uaDescheduler, action: ActionEvict, pod: "b", code: 201})
	h.log(logged{ua: uaReplicaSet, action: ActionDelete, pod: "b", code: 200})
	h.updatePod(terminating(b))
	res := h.finish()

	want := []Disruption{{
		Time: tEvict, Component: ComponentDescheduler, UserAgent: uaDescheduler, Action: ActionEvict,
		Namespace: testNS, Pod: "b", Budgets: []BudgetRef{ref(KindPDB, "web")}, WasHealthy: true,
	}}
	if diff := cmp.Diff(want, res.Disruptions); diff != "" {
		t.Errorf("disruptions (-want,+got):\n%s", diff)
	}
	// b was the last healthy pod of a budget that needs 1.
	if len(res.Violations) != 1 || res.Violations[0].Disruption.Pod != "b" {
		t.Errorf("want one violation by the eviction of b, got %+v", res.Violations)
	}
}

func TestPDBViolation(t *testing.T) {
	h := newHarness(t, testOptions())
	h.createPDB(pdb("web", 3).Obj())
	for _, n := range []string{"a", "b", "c", "d"} {
		h.createPod(webPod(n).Obj())
	}
	h.createPod(runningPod("x").Label("app", "other").Obj())

	h.log(logged{ua: uaDescheduler, action: ActionEvict, pod: "a", code: 201}) // 3 left: allowed
	tSecond := h.log(logged{ua: uaScheduler, action: ActionDelete, pod: "b", code: 200})
	h.log(logged{ua: uaScheduler, action: ActionDelete, pod: "x", code: 200}) // not covered
	res := h.finish()

	checkViolations(t, []Violation{webDeleteViolation(tSecond, "b", 2, 3)}, res.Violations)
	wantBudgets := []BudgetSummary{{Budget: ref(KindPDB, "web"), Desired: 3, Met: true, LowestHealthy: 2, Disruptions: 2, Short: true}}
	if diff := cmp.Diff(wantBudgets, res.Budgets); diff != "" {
		t.Errorf("budgets (-want,+got):\n%s", diff)
	}
	if got := len(res.Disruptions); got != 3 {
		t.Errorf("want 3 disruptions, got %d: %+v", got, res.Disruptions)
	}
}

func TestPUBViolationByTargetRefAndSelector(t *testing.T) {
	d, rs, byTarget := webWorkload(2)
	h := newHarness(t, testOptions(), d, rs, byTarget)
	h.createPUB(pub("db", 1).MatchLabels("app", "db").Obj()) // one PUB listed at Start, one seen by the watch

	h.createPod(webPod("web-a").OwnedBy("apps/v1", "ReplicaSet", rs.Name, rs.UID).Obj())
	h.createPod(webPod("web-b").OwnedBy("apps/v1", "ReplicaSet", rs.Name, rs.UID).Obj())
	h.createPod(webPod("stray").Obj()) // web's labels but no owner
	h.createPod(runningPod("db-0").Label("app", "db").Obj())

	h.log(logged{ua: uaScheduler, action: ActionDelete, pod: "stray", code: 200})
	tWeb := h.log(logged{ua: uaDescheduler, action: ActionEvict, pod: "web-a", code: 201})
	tDB := h.log(logged{ua: uaScheduler, action: ActionDelete, pod: "db-0", code: 200})
	res := h.finish()

	want := []Violation{
		{
			Budget: ref(KindPUB, "web"),
			Disruption: Disruption{Time: tWeb, Component: ComponentDescheduler, UserAgent: uaDescheduler, Action: ActionEvict,
				Namespace: testNS, Pod: "web-a", Budgets: []BudgetRef{ref(KindPUB, "web")}, WasHealthy: true},
			Healthy: 1, Desired: 2,
		},
		{
			Budget: ref(KindPUB, "db"),
			Disruption: Disruption{Time: tDB, Component: ComponentScheduler, UserAgent: uaScheduler, Action: ActionDelete,
				Namespace: testNS, Pod: "db-0", Budgets: []BudgetRef{ref(KindPUB, "db")}, WasHealthy: true},
			Healthy: 0, Desired: 1,
		},
	}
	if diff := cmp.Diff(want, res.Violations); diff != "" {
		t.Errorf("violations (-want,+got):\n%s", diff)
	}
	wantBudgets := []BudgetSummary{
		{Budget: ref(KindPUB, "db"), Desired: 1, Met: true, LowestHealthy: 0, Disruptions: 1, Short: true},
		{Budget: ref(KindPUB, "web"), Desired: 2, Met: true, LowestHealthy: 1, Disruptions: 1, Short: true},
	}
	if diff := cmp.Diff(wantBudgets, res.Budgets); diff != "" {
		t.Errorf("budgets (-want,+got):\n%s", diff)
	}
}

func TestNoViolationWhenVictimWasUnready(t *testing.T) {
	h := newHarness(t, testOptions())
	pods := h.webPods(2, "a", "b", "c")
	a := pods["a"]
	h.updatePod(a.Ready(false).Obj())
	tEvict := h.log(logged{ua: uaDescheduler, action: ActionEvict, pod: "a", code: 201})
	h.updatePod(terminating(a))
	res := h.finish()

	want := []Disruption{{Time: tEvict, Component: ComponentDescheduler, UserAgent: uaDescheduler, Action: ActionEvict,
		Namespace: testNS, Pod: "a", Budgets: []BudgetRef{ref(KindPDB, "web")}, WasHealthy: false}}
	wantBudgets := []BudgetSummary{{Budget: ref(KindPDB, "web"), Desired: 2, Met: true, LowestHealthy: 2, Disruptions: 1}}
	checkNoViolation(t, res, want, wantBudgets)
}

// A pod not yet running (Pending, its containers starting) is disrupted
// without a budget's consent by the Eviction API itself; the record says
// so, so that a reader can tell it from a running, unready pod, which the
// unhealthy-pod eviction policy governs: b, deleted while only c of the 2
// the PDB requires is healthy, is charged under the default policy
// (IfHealthyBudget); a is not.
func TestDisruptionRecordsPendingVictim(t *testing.T) {
	h := newHarness(t, testOptions())
	pods := h.webPods(2, "a", "b", "c")
	a, b := pods["a"], pods["b"]
	h.updatePod(a.Ready(false).Phase(corev1.PodPending).Obj())
	h.updatePod(b.Ready(false).Obj())
	h.log(logged{ua: uaScheduler, action: ActionDelete, pod: "a", code: 200})
	h.updatePod(terminating(a))
	h.log(logged{ua: uaScheduler, action: ActionDelete, pod: "b", code: 200})
	h.updatePod(terminating(b))
	res := h.finish()

	var got []string
	for _, d := range res.Disruptions {
		got = append(got, fmt.Sprintf("%s healthy=%v pending=%v", d.Pod, d.WasHealthy, d.WasPending))
	}
	if diff := cmp.Diff([]string{"a healthy=false pending=true", "b healthy=false pending=false"}, got); diff != "" {
		t.Errorf("disruptions (-want,+got):\n%s", diff)
	}
	if len(res.Violations) != 1 || res.Violations[0].Disruption.Pod != "b" || res.Violations[0].Healthy != 1 || res.Violations[0].Desired != 2 {
		t.Errorf("want one violation, by b, with 1 of 2 healthy; got %+v", res.Violations)
	}
}

// The informers see a change a little after the API server makes it. A pod
// that became unready just before its eviction may be seen unready only
// after the eviction's log time; it was not healthy when it was evicted.
func TestWasHealthyUsesChangesSeenAfterTheRequest(t *testing.T) {
	h := newHarness(t, testOptions())
	pods := h.webPods(2, "a", "b", "c")
	a, b := pods["a"], pods["b"]
	h.log(logged{ua: uaDescheduler, action: ActionEvict, pod: "a", code: 201})
	h.updatePod(a.Ready(false).Obj())
	h.updatePod(terminating(a))
	// b was Ready until its termination: healthy, and the budget drops below 2.
	h.log(logged{ua: uaDescheduler, action: ActionEvict, pod: "b", code: 201})
	h.updatePod(terminating(b))
	res := h.finish()

	var got []string
	for _, d := range res.Disruptions {
		got = append(got, d.Pod+map[bool]string{true: " healthy", false: " unhealthy"}[d.WasHealthy])
	}
	if diff := cmp.Diff([]string{"a unhealthy", "b healthy"}, got); diff != "" {
		t.Errorf("disruptions (-want,+got):\n%s", diff)
	}
	if len(res.Violations) != 1 || res.Violations[0].Disruption.Pod != "b" || res.Violations[0].Healthy != 1 {
		t.Errorf("want one violation by b with 1 healthy, got %+v", res.Violations)
	}
}

func TestLowestHealthyAndMet(t *testing.T) {
	h := newHarness(t, testOptions())
	h.createPDB(pdb("web", 2).Obj())
	h.createPDB(pdb("never", 5).Obj())
	h.createPDB(pdb("unknown", 0).ObservedGeneration(0).Obj()) // the disruption controller has not computed it

	b := webPod("b").Ready(false)
	h.createPod(webPod("a").Obj())
	h.createPod(b.Obj()) // 1 of 2: not met yet
	h.createPod(runningPod("never-0").Label("app", "never").Obj())
	h.updatePod(b.Ready(true).Obj())  // met at 2
	h.updatePod(b.Ready(false).Obj()) // 1
	h.updatePod(b.Ready(true).Obj())  // 2 again
	// The disruption controller raises the requirement; the lowest point
	// stays the one counted against the old requirement.
	h.updatePDB(pdb("web", 3).Obj())
	h.createPod(webPod("c").Obj())
	res := h.finish()

	want := []BudgetSummary{
		{Budget: ref(KindPDB, "never"), Desired: 5, Met: false, LowestHealthy: 0},
		{Budget: ref(KindPDB, "unknown"), Desired: 0, Met: false, LowestHealthy: 0},
		{Budget: ref(KindPDB, "web"), Desired: 2, Met: true, LowestHealthy: 1, Short: true},
	}
	if diff := cmp.Diff(want, res.Budgets); diff != "" {
		t.Errorf("budgets (-want,+got):\n%s", diff)
	}
}

func TestDisruptionLowersLowestHealthy(t *testing.T) {
	h := newHarness(t, testOptions())
	h.createPDB(pdb("web", 1).Obj())
	for _, n := range []string{"a", "b", "c"} {
		h.createPod(webPod(n).Obj())
	}
	h.log(logged{ua: uaDescheduler, action: ActionEvict, pod: "a", code: 201})
	h.log(logged{ua: uaDescheduler, action: ActionEvict, pod: "b", code: 201})
	res := h.finish()
	want := []BudgetSummary{{Budget: ref(KindPDB, "web"), Desired: 1, Met: true, LowestHealthy: 1, Disruptions: 2}}
	if diff := cmp.Diff(want, res.Budgets); diff != "" {
		t.Errorf("budgets (-want,+got):\n%s", diff)
	}
	if len(res.Violations) != 0 {
		t.Errorf("1 healthy of 1 desired is no violation, got %+v", res.Violations)
	}
}

func TestPDBSelectorCoverage(t *testing.T) {
	h := newHarness(t, testOptions())
	h.createPDB(pdb("nil-selector", 1).Selector(nil).Obj())
	h.createPDB(pdb("everything", 0).Selector(&metav1.LabelSelector{}).Obj())
	h.createPDB(pdb("web", 0).Obj())
	h.createPod(runningPod("unlabeled").Obj())
	h.createPod(webPod("w").Obj())
	h.log(logged{ua: uaScheduler, action: ActionDelete, pod: "unlabeled", code: 200})
	h.log(logged{ua: uaScheduler, action: ActionDelete, pod: "w", code: 200})
	res := h.finish()

	got := map[string][]BudgetRef{}
	for _, d := range res.Disruptions {
		got[d.Pod] = d.Budgets
	}
	want := map[string][]BudgetRef{
		"unlabeled": {ref(KindPDB, "everything")},
		"w":         {ref(KindPDB, "everything"), ref(KindPDB, "web")},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("budgets per disrupted pod (-want,+got):\n%s", diff)
	}
}

func TestPUBTargetRefNeedsTheLiveWorkload(t *testing.T) {
	d, rs, p := webWorkload(0)
	sts := pub("db", 0).TargetRef("apps/v1", "StatefulSet", "db").Obj()
	h := newHarness(t, testOptions(), d, rs, p, sts)

	h.createPod(webPod("old").OwnedBy("apps/v1", "ReplicaSet", "web-1", "uid-previous").Obj()) // owned by an earlier ReplicaSet web-1
	h.createPod(webPod("new").OwnedBy("apps/v1", "ReplicaSet", "web-1", rs.UID).Obj())
	h.createPod(runningPod("db-0").OwnedBy("apps/v1", "StatefulSet", "db", "uid-sts-db").Obj()) // its StatefulSet is not known to the informers
	for _, n := range []string{"old", "new", "db-0"} {
		h.log(logged{ua: uaScheduler, action: ActionDelete, pod: n, code: 200})
	}
	res := h.finish()
	got := map[string][]BudgetRef{}
	for _, d := range res.Disruptions {
		got[d.Pod] = d.Budgets
	}
	want := map[string][]BudgetRef{"old": {}, "new": {ref(KindPUB, "web")}, "db-0": {}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("budgets per disrupted pod (-want,+got):\n%s", diff)
	}
}

func TestDeletedBudgetIsNotCharged(t *testing.T) {
	h := newHarness(t, testOptions())
	h.createPDB(pdb("web", 1).Obj())
	h.createPod(webPod("a").Obj())
	h.change("delete PDB", "web", func() error {
		return h.kube.PolicyV1().PodDisruptionBudgets(testNS).Delete(h.ctx, "web", metav1.DeleteOptions{})
	})
	h.log(logged{ua: uaScheduler, action: ActionDelete, pod: "a", code: 200})
	res := h.finish()
	if len(res.Violations) != 0 || len(res.Disruptions) != 1 || len(res.Disruptions[0].Budgets) != 0 {
		t.Errorf("want one disruption charged to no budget, got %+v", res)
	}
	want := []BudgetSummary{{Budget: ref(KindPDB, "web"), Desired: 1, Met: true, LowestHealthy: 1}}
	if diff := cmp.Diff(want, res.Budgets); diff != "" {
		t.Errorf("budgets (-want,+got):\n%s", diff)
	}
}

func TestLinesBeforeStartAreNotAudited(t *testing.T) {
	// The line before Start is not even parsed.
	h := newHarnessWithLog(t, testOptions(), []byte("not json\n"))
	h.createPod(webPod("a").Obj())
	h.log(logged{ua: uaScheduler, action: ActionDelete, pod: "a", code: 200})
	res := h.finish()
	if len(res.Disruptions) != 1 || res.Disruptions[0].Pod != "a" {
		t.Errorf("want the one disruption logged after Start, got %+v", res.Disruptions)
	}
}

func TestMalformedLogLineIsAnError(t *testing.T) {
	opts := testOptions()
	opts.PUBs = false
	h := newHarness(t, opts)
	h.log(logged{ua: uaScheduler, action: ActionDelete, pod: "a", code: 200})
	if _, err := h.logFile.WriteString("{\"stage\": 7}\n"); err != nil {
		t.Fatal(err)
	}
	_, err := h.a.Finish(h.ctx)
	if err == nil {
		t.Fatal("Finish accepted a line that is not an audit event")
	}
	for _, want := range []string{h.a.opts.LogPath, "line 2", "not a JSON audit.k8s.io/v1 Event"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestLifecycleErrors(t *testing.T) {
	opts := testOptions()
	opts.PUBs = false
	h := newHarness(t, opts)
	if err := h.a.Start(h.ctx); err == nil || !strings.Contains(err.Error(), "Start called twice") {
		t.Errorf("second Start: got %v", err)
	}
	h.finish()
	if _, err := h.a.Finish(h.ctx); err == nil || !strings.Contains(err.Error(), "Finish called twice") {
		t.Errorf("second Finish: got %v", err)
	}
	fresh, err := newAuditor(opts.withLog(h.a.opts.LogPath), h.kube, nil, nil, h.clock.now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fresh.Finish(h.ctx); err == nil || !strings.Contains(err.Error(), "before Start") {
		t.Errorf("Finish before Start: got %v", err)
	}
}

func TestFinishAfterFailedStart(t *testing.T) {
	opts := testOptions()
	opts.PUBs = false
	opts.LogPath = filepath.Join(t.TempDir(), "missing.log")
	a, err := newAuditor(opts, fake.NewClientset(), nil, nil, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(t.Context()); err == nil || !strings.Contains(err.Error(), "open audit log") {
		t.Fatalf("Start with a missing log: got %v", err)
	}
	if _, err := a.Finish(t.Context()); err == nil || !strings.Contains(err.Error(), "after Start failed") {
		t.Errorf("Finish after a failed Start: got %v", err)
	}
}

func (o Options) withLog(path string) Options {
	o.LogPath = path
	return o
}

func TestOptionsAreChecked(t *testing.T) {
	for name, tc := range map[string]struct {
		opts Options
		want string
	}{
		"no config":        {Options{LogPath: "x"}, "Options.Config is nil"},
		"empty prefix":     {Options{LogPath: "x", Components: []ComponentMatch{{Component: ComponentScheduler}}}, "Options.Components[0].UserAgentPrefix is empty"},
		"empty component":  {Options{LogPath: "x", Components: []ComponentMatch{{UserAgentPrefix: "s"}}}, "Options.Components[0].Component is empty"},
		"empty ignore":     {Options{LogPath: "x", Ignore: []string{"a", ""}}, "Options.Ignore[1] is empty"},
		"pubs, no client":  {Options{LogPath: "x", PUBs: true}, "no kruise client"},
		"log path missing": {Options{}, "Options.LogPath is empty"},
	} {
		t.Run(name, func(t *testing.T) {
			var err error
			if tc.opts.Config == nil && strings.Contains(tc.want, "Config") {
				_, err = New(tc.opts)
			} else {
				_, err = newAuditor(tc.opts, nil, nil, nil, nil)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// The disruption controller writes desired 0 for a PDB created before its
// pods. That first status must not make the budget met at 0/0, which would
// keep 0 as its lowest count for the whole run.
func TestBudgetCreatedBeforeItsPodsIsMetOnlyOnceItAsksForPods(t *testing.T) {
	h := newHarness(t, testOptions())
	h.createPDB(pdb("web", 0).Obj()) // observed, asks for nothing yet
	h.updatePDB(pdb("web", 2).Obj())
	for _, n := range []string{"a", "b", "c"} {
		h.createPod(webPod(n).Obj())
	}
	res := h.finish()
	want := []BudgetSummary{{Budget: ref(KindPDB, "web"), Desired: 2, Met: true, LowestHealthy: 2}}
	if diff := cmp.Diff(want, res.Budgets); diff != "" {
		t.Errorf("budgets (-want,+got):\n%s", diff)
	}
}

// checkNoViolation checks a result's disruptions and budget summaries, and
// that it holds no violation.
func checkNoViolation(t *testing.T, res Result, disruptions []Disruption, budgets []BudgetSummary) {
	t.Helper()
	if diff := cmp.Diff(disruptions, res.Disruptions); diff != "" {
		t.Errorf("disruptions (-want,+got):\n%s", diff)
	}
	if len(res.Violations) != 0 {
		t.Errorf("want no violation, got %+v", res.Violations)
	}
	if diff := cmp.Diff(budgets, res.Budgets); diff != "" {
		t.Errorf("budgets (-want,+got):\n%s", diff)
	}
}
