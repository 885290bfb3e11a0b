package audit

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	kruisepolicy "github.com/openkruise/kruise-api/policy/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

var web = map[string]string{"app": "web"}

func TestAttributionAndRefusals(t *testing.T) {
	h := newHarness(t, testOptions())
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		h.createPod(readyPod(n, web, true))
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
	a, b := readyPod("a", web, true), readyPod("b", web, true)
	h.createPod(a)
	h.createPod(b)
	h.createPDB(pdb("web", appSelector("web"), 1))

	// a is terminating (deleted by the runner, which is ignored); the
	// kubelet finishes it, and a component deletes it again.
	h.log(logged{ua: uaRunner, action: ActionDelete, pod: "a", code: 200})
	h.updatePod(terminating(a))
	h.log(logged{ua: uaKubelet, action: ActionDelete, pod: "a", code: 200})
	h.log(logged{ua: uaScheduler, action: ActionDelete, pod: "a", code: 200})
	h.deletePod(a)

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
	h.createPDB(pdb("web", appSelector("web"), 3))
	for _, n := range []string{"a", "b", "c", "d"} {
		h.createPod(readyPod(n, web, true))
	}
	h.createPod(readyPod("x", map[string]string{"app": "other"}, true))

	h.log(logged{ua: uaDescheduler, action: ActionEvict, pod: "a", code: 201}) // 3 left: allowed
	tSecond := h.log(logged{ua: uaScheduler, action: ActionDelete, pod: "b", code: 200})
	h.log(logged{ua: uaScheduler, action: ActionDelete, pod: "x", code: 200}) // not covered
	res := h.finish()

	wantViolations := []Violation{{
		Budget: ref(KindPDB, "web"),
		Disruption: Disruption{
			Time: tSecond, Component: ComponentScheduler, UserAgent: uaScheduler, Action: ActionDelete,
			Namespace: testNS, Pod: "b", Budgets: []BudgetRef{ref(KindPDB, "web")}, WasHealthy: true,
		},
		Healthy: 2, Desired: 3,
	}}
	if diff := cmp.Diff(wantViolations, res.Violations); diff != "" {
		t.Errorf("violations (-want,+got):\n%s", diff)
	}
	wantBudgets := []BudgetSummary{{Budget: ref(KindPDB, "web"), Desired: 3, Met: true, LowestHealthy: 2, Disruptions: 2}}
	if diff := cmp.Diff(wantBudgets, res.Budgets); diff != "" {
		t.Errorf("budgets (-want,+got):\n%s", diff)
	}
	if got := len(res.Disruptions); got != 3 {
		t.Errorf("want 3 disruptions, got %d: %+v", got, res.Disruptions)
	}
}

func TestPUBViolationByTargetRefAndSelector(t *testing.T) {
	d := deployment("web")
	rs := replicaSet("web-1", d)
	byTarget := pub("web", 2)
	byTarget.Spec.TargetReference = &kruisepolicy.TargetReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}
	bySelector := pub("db", 1)
	bySelector.Spec.Selector = appSelector("db")
	h := newHarness(t, testOptions(), d, rs, byTarget)
	h.createPUB(bySelector) // one PUB listed at Start, one seen by the watch

	owned := func(name string) *corev1.Pod {
		p := readyPod(name, web, true)
		p.OwnerReferences = []metav1.OwnerReference{controllerRef("apps/v1", "ReplicaSet", rs.Name, rs.UID)}
		return p
	}
	h.createPod(owned("web-a"))
	h.createPod(owned("web-b"))
	h.createPod(readyPod("stray", web, true)) // web's labels but no owner
	h.createPod(readyPod("db-0", map[string]string{"app": "db"}, true))

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
		{Budget: ref(KindPUB, "db"), Desired: 1, Met: true, LowestHealthy: 0, Disruptions: 1},
		{Budget: ref(KindPUB, "web"), Desired: 2, Met: true, LowestHealthy: 1, Disruptions: 1},
	}
	if diff := cmp.Diff(wantBudgets, res.Budgets); diff != "" {
		t.Errorf("budgets (-want,+got):\n%s", diff)
	}
}

func TestNoViolationWhenVictimWasUnready(t *testing.T) {
	h := newHarness(t, testOptions())
	h.createPDB(pdb("web", appSelector("web"), 2))
	a := readyPod("a", web, true)
	for _, p := range []*corev1.Pod{a, readyPod("b", web, true), readyPod("c", web, true)} {
		h.createPod(p)
	}
	h.updatePod(withReady(a, false))
	tEvict := h.log(logged{ua: uaDescheduler, action: ActionEvict, pod: "a", code: 201})
	h.updatePod(terminating(withReady(a, false)))
	res := h.finish()

	want := []Disruption{{Time: tEvict, Component: ComponentDescheduler, UserAgent: uaDescheduler, Action: ActionEvict,
		Namespace: testNS, Pod: "a", Budgets: []BudgetRef{ref(KindPDB, "web")}, WasHealthy: false}}
	if diff := cmp.Diff(want, res.Disruptions); diff != "" {
		t.Errorf("disruptions (-want,+got):\n%s", diff)
	}
	if len(res.Violations) != 0 {
		t.Errorf("want no violation, got %+v", res.Violations)
	}
	wantBudgets := []BudgetSummary{{Budget: ref(KindPDB, "web"), Desired: 2, Met: true, LowestHealthy: 2, Disruptions: 1}}
	if diff := cmp.Diff(wantBudgets, res.Budgets); diff != "" {
		t.Errorf("budgets (-want,+got):\n%s", diff)
	}
}

// The informers see a change a little after the API server makes it. A pod
// that became unready just before its eviction may be seen unready only
// after the eviction's log time; it was not healthy when it was evicted.
func TestWasHealthyUsesChangesSeenAfterTheRequest(t *testing.T) {
	h := newHarness(t, testOptions())
	h.createPDB(pdb("web", appSelector("web"), 2))
	a, b := readyPod("a", web, true), readyPod("b", web, true)
	for _, p := range []*corev1.Pod{a, b, readyPod("c", web, true)} {
		h.createPod(p)
	}
	h.log(logged{ua: uaDescheduler, action: ActionEvict, pod: "a", code: 201})
	h.updatePod(withReady(a, false))
	h.updatePod(terminating(withReady(a, false)))
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
	h.createPDB(pdb("web", appSelector("web"), 2))
	h.createPDB(pdb("never", appSelector("never"), 5))
	unknown := pdb("unknown", appSelector("unknown"), 0)
	unknown.Status.ObservedGeneration = 0 // the disruption controller has not computed it
	h.createPDB(unknown)

	a, b := readyPod("a", web, true), readyPod("b", web, false)
	h.createPod(a)
	h.createPod(b) // 1 of 2: not met yet
	h.createPod(readyPod("never-0", map[string]string{"app": "never"}, true))
	h.updatePod(withReady(b, true))  // met at 2
	h.updatePod(withReady(b, false)) // 1
	h.updatePod(withReady(b, true))  // 2 again
	// The disruption controller raises the requirement; the lowest point
	// stays the one counted against the old requirement.
	raised := pdb("web", appSelector("web"), 3)
	h.updatePDB(raised)
	h.createPod(readyPod("c", web, true))
	res := h.finish()

	want := []BudgetSummary{
		{Budget: ref(KindPDB, "never"), Desired: 5, Met: false, LowestHealthy: 0},
		{Budget: ref(KindPDB, "unknown"), Desired: 0, Met: false, LowestHealthy: 0},
		{Budget: ref(KindPDB, "web"), Desired: 2, Met: true, LowestHealthy: 1},
	}
	if diff := cmp.Diff(want, res.Budgets); diff != "" {
		t.Errorf("budgets (-want,+got):\n%s", diff)
	}
}

func TestDisruptionLowersLowestHealthy(t *testing.T) {
	h := newHarness(t, testOptions())
	h.createPDB(pdb("web", appSelector("web"), 1))
	for _, n := range []string{"a", "b", "c"} {
		h.createPod(readyPod(n, web, true))
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
	nilSel := pdb("nil-selector", nil, 1)
	h.createPDB(nilSel)
	h.createPDB(pdb("everything", &metav1.LabelSelector{}, 0))
	h.createPDB(pdb("web", appSelector("web"), 0))
	h.createPod(readyPod("unlabeled", nil, true))
	h.createPod(readyPod("w", web, true))
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
	d := deployment("web")
	rs := replicaSet("web-1", d)
	p := pub("web", 0)
	p.Spec.TargetReference = &kruisepolicy.TargetReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}
	sts := pub("db", 0)
	sts.Spec.TargetReference = &kruisepolicy.TargetReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db"}
	h := newHarness(t, testOptions(), d, rs, p, sts)

	orphan := readyPod("old", web, true) // owned by an earlier ReplicaSet web-1
	orphan.OwnerReferences = []metav1.OwnerReference{controllerRef("apps/v1", "ReplicaSet", "web-1", types.UID("uid-previous"))}
	h.createPod(orphan)
	current := readyPod("new", web, true)
	current.OwnerReferences = []metav1.OwnerReference{controllerRef("apps/v1", "ReplicaSet", "web-1", rs.UID)}
	h.createPod(current)
	db := readyPod("db-0", nil, true) // its StatefulSet is not known to the informers
	db.OwnerReferences = []metav1.OwnerReference{controllerRef("apps/v1", "StatefulSet", "db", "uid-sts-db")}
	h.createPod(db)
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
	p := pdb("web", appSelector("web"), 1)
	h.createPDB(p)
	h.createPod(readyPod("a", web, true))
	h.change("delete PDB", func() error {
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
	h.createPod(readyPod("a", web, true))
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
	h.createPDB(pdb("web", appSelector("web"), 0)) // observed, asks for nothing yet
	h.updatePDB(pdb("web", appSelector("web"), 2))
	for _, n := range []string{"a", "b", "c"} {
		h.createPod(readyPod(n, web, true))
	}
	res := h.finish()
	want := []BudgetSummary{{Budget: ref(KindPDB, "web"), Desired: 2, Met: true, LowestHealthy: 2}}
	if diff := cmp.Diff(want, res.Budgets); diff != "" {
		t.Errorf("budgets (-want,+got):\n%s", diff)
	}
}
