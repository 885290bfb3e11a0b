package budgetpreemption

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"

	"github.com/budgetguard/budgetguard/plugins/budget"
)

type testCandidate struct {
	name    string
	victims []*v1.Pod
}

func (c *testCandidate) Victims() *extenderv1.Victims { return &extenderv1.Victims{Pods: c.victims} }
func (c *testCandidate) Name() string                 { return c.name }
func (c *testCandidate) NumPodGroupDisruptions() int  { return 0 }

// testPreemptor is a single-pod preemptor, as the Executor passes it.
type testPreemptor struct{ *v1.Pod }

func (p testPreemptor) UID() types.UID           { return p.Pod.UID }
func (p testPreemptor) SchedulerName() string    { return p.Spec.SchedulerName }
func (p testPreemptor) Obj() runtime.Object      { return p.Pod }
func (p testPreemptor) Pods() map[string]*v1.Pod { return map[string]*v1.Pod{p.Name: p.Pod} }
func (p testPreemptor) Priority() int32          { return *p.Spec.Priority }
func (p testPreemptor) Type() string             { return "pod" }
func (p testPreemptor) GetName() string          { return p.Name }
func (p testPreemptor) GetNamespace() string     { return p.Namespace }

var _ preemption.ExecutorPreemptor = testPreemptor{}

// evictionsAsDeletes sends the plugin's evictions to its deletePod, which
// the test replaces: with Delete actuation a victim that spends a PDB is
// evicted (actuation.go, deletes), and the tests count both.
func evictionsAsDeletes(e *env) {
	e.pl.evictPod = func(ctx context.Context, c preemption.Candidate, p preemption.ExecutorPreemptor, victim *v1.Pod) error {
		return e.pl.deletePod(ctx, c, p, victim, Name)
	}
}

// TestActuationReservesAcrossCycles: the victims of one preemption are
// reserved in the ledger before they are actuated, so the next cycle's
// candidate cannot spend the same budget; a failed actuation gives the
// budget back.
func TestActuationReservesAcrossCycles(t *testing.T) {
	pods := replicas("web", "n1", "web", true, 3, 2, 1, 0)
	args := DefaultArgs()
	args.Actuation = ActuationDelete
	e := newEnv(t, args, []*v1.Node{node("n1")}, pods, []*policyv1.PodDisruptionBudget{appPDB("web", 4, 3, 1).Obj()})
	var deleted []string
	fail := false
	evictionsAsDeletes(e)
	e.pl.deletePod = func(_ context.Context, _ preemption.Candidate, _ preemption.ExecutorPreemptor, victim *v1.Pod, _ string) error {
		if fail {
			return apierrors.NewTooManyRequests("simulated", 10)
		}
		deleted = append(deleted, victim.Name)
		return nil
	}
	first := testPreemptor{preemptor("1", 100)}
	second := testPreemptor{preemptor("1", 100)}
	second.Name, second.Pod.UID = "second", "second"

	// Cycle 1: web-3 within the budget of 1.
	if err := e.pl.preemptPod(e.ctx, &testCandidate{"n1", pods[3:4]}, first, pods[3], Name); err != nil {
		t.Fatalf("first preemption: %v", err)
	}
	if got := e.budgets.InFlight(); got != 1 {
		t.Errorf("ledger holds %d reservations after the first preemption, want 1", got)
	}
	// Cycle 2, before any status update: web-2 would spend the same budget.
	err := e.pl.preemptPod(e.ctx, &testCandidate{"n1", pods[2:3]}, second, pods[2], Name)
	var denied *budget.DeniedError
	if !errors.As(err, &denied) || denied.Decision.Reason() != budget.ReasonInsufficientBudget {
		t.Fatalf("second preemption: error %v, want a DeniedError for InsufficientBudget", err)
	}
	if want := []string{"web-3"}; len(deleted) != 1 || deleted[0] != want[0] {
		t.Errorf("deleted %v, want %v", deleted, want)
	}
}

// TestActuationFailureCancelsReservation: when the API server refuses a
// victim, its reservation is cancelled at once.
func TestActuationFailureCancelsReservation(t *testing.T) {
	pods := replicas("web", "n1", "web", true, 0, 0)
	args := DefaultArgs()
	args.Actuation = ActuationDelete
	e := newEnv(t, args, []*v1.Node{node("n1")}, pods, []*policyv1.PodDisruptionBudget{appPDB("web", 2, 1, 1).Obj()})
	evictionsAsDeletes(e)
	e.pl.deletePod = func(context.Context, preemption.Candidate, preemption.ExecutorPreemptor, *v1.Pod, string) error {
		return apierrors.NewTooManyRequests("simulated", 10)
	}
	p := testPreemptor{preemptor("1", 100)}
	err := e.pl.preemptPod(e.ctx, &testCandidate{"n1", pods[:1]}, p, pods[0], Name)
	if !apierrors.IsTooManyRequests(err) {
		t.Fatalf("error %v, want the 429", err)
	}
	if got := e.budgets.InFlight(); got != 0 {
		t.Errorf("ledger holds %d reservations after the failure, want 0", got)
	}
	if d := e.budgets.Decide(pods[1], budget.OperationDelete); !d.Allowed {
		t.Errorf("budget not given back: %s", d.Message())
	}
}

// evictionServer is an API server that serves only the Eviction
// subresource: it refuses the victims in deny with a 429, as the Eviction
// API does for a pod its budget protects (or with refusal when set), and
// accepts the others. It counts the eviction calls per victim.
type evictionServer struct {
	mu      sync.Mutex
	deny    map[string]bool
	calls   map[string]int
	refusal *metav1.Status
}

func (s *evictionServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	// api/v1/namespaces/<ns>/pods/<name>/eviction
	if r.Method != http.MethodPost || len(parts) != 7 || parts[6] != "eviction" {
		http.NotFound(w, r)
		return
	}
	name := parts[5]
	s.mu.Lock()
	s.calls[name]++
	deny, refusal := s.deny[name], s.refusal
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if deny {
		if refusal == nil {
			refusal = &metav1.Status{Status: metav1.StatusFailure, Reason: metav1.StatusReasonTooManyRequests, Code: http.StatusTooManyRequests,
				Message: "Cannot evict pod as it would violate the pod's disruption budget."}
		}
		refusal.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
		w.WriteHeader(int(refusal.Code))
		_ = json.NewEncoder(w).Encode(refusal)
		return
	}
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(&metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess})
}

func (s *evictionServer) count(names ...string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, name := range names {
		n += s.calls[name]
	}
	return n
}

// evictionHandle answers ClientSet with a client of an evictionServer.
type evictionHandle struct {
	fwk.Handle
	cs kubernetes.Interface
}

func (h *evictionHandle) ClientSet() kubernetes.Interface { return h.cs }

// refusedEnv is BestEffort mode with Evict actuation on node n1: web-0,
// which pdb shop/web (0 disruptions allowed) protects, and three pods under
// no budget, free-0..2. The 4-CPU preemptor needs all four; the API server
// refuses web-0. The preemptor is nominated to n1 by an earlier cycle.
func refusedEnv(t *testing.T) (*env, *evictionServer, *v1.Pod) {
	t.Helper()
	p := preemptor("4", 100)
	p.Status.NominatedNodeName = "n1"
	pods := append(replicas("web", "n1", "web", true, 0), replicas("free", "n1", "", true, 0, 0, 0)...)
	args := DefaultArgs()
	args.Mode = ModeBestEffort
	args.Actuation = ActuationEvict
	e := newEnv(t, args, []*v1.Node{node("n1")}, append(pods, p), []*policyv1.PodDisruptionBudget{appPDB("web", 1, 1, 0).Obj()})
	srv, cs := serveEvictions(t, "web-0")
	e.pl.fh = &evictionHandle{Handle: e.fw, cs: cs}
	return e, srv, p
}

// serveEvictions serves an evictionServer that refuses the victims in deny
// until the test ends, and returns it with a client of it.
func serveEvictions(t *testing.T, deny ...string) (*evictionServer, kubernetes.Interface) {
	t.Helper()
	srv := &evictionServer{deny: map[string]bool{}, calls: map[string]int{}}
	for _, name := range deny {
		srv.deny[name] = true
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: ts.URL})
	if err != nil {
		t.Fatal(err)
	}
	return srv, cs
}

func (e *env) postFilterN1(t *testing.T, p *v1.Pod) (*fwk.PostFilterResult, *fwk.Status) {
	t.Helper()
	state, _ := e.preFilter(t, p)
	m := framework.NewDefaultNodeToStatus()
	m.Set("n1", fwk.NewStatus(fwk.Unschedulable, "Insufficient cpu"))
	return e.pl.PostFilter(e.ctx, state, p, m)
}

// TestRefusalClearsNominationThroughScheduler: when the API server refuses
// a victim, PostFilter answers what makes the scheduler's own failure
// handler (handleSchedulingFailure) clear the preemptor's nomination and
// mark it Unschedulable: an Unschedulable status naming the budget (an
// Error status loses the result in RunPostFilterPlugins) with a result
// that overrides the nomination with "". The plugin does not patch the
// nomination itself, which would race that handler. Every later cycle answers
// the same while the budget denies the victim.
func TestRefusalClearsNominationThroughScheduler(t *testing.T) {
	e, _, p := refusedEnv(t)
	for i := range 3 {
		result, status := e.postFilterN1(t, p)
		if status.Code() != fwk.Unschedulable {
			t.Fatalf("cycle %d: PostFilter status %v, want Unschedulable", i, status)
		}
		if !strings.Contains(status.Message(), "pdb shop/web") {
			t.Errorf("cycle %d: status %q does not name pdb shop/web", i, status.Message())
		}
		if result == nil || result.Mode() != fwk.ModeOverride || result.NominatedNodeName != "" {
			t.Errorf("cycle %d: PostFilter result %+v, want one that overrides the nomination with \"\"", i, result)
		}
	}
}

// TestRefusedCandidateDisruptionsBounded: a victim the API server refuses
// is evicted before its co-victims, alone, so the refusal leaves them
// alone; and a candidate that failed on a budget is not a candidate again
// while the budget denies the victim, so 20 retries do not evict the
// co-victims (or post the refused eviction) over and over.
func TestRefusedCandidateDisruptionsBounded(t *testing.T) {
	e, srv, p := refusedEnv(t)
	for range 20 {
		if _, status := e.postFilterN1(t, p); status.IsSuccess() {
			t.Fatalf("PostFilter succeeded; the API server refuses web-0")
		}
	}
	coVictims := []string{"free-0", "free-1", "free-2"}
	if got := srv.count(coVictims...); got != 0 {
		t.Errorf("the co-victims of the refused victim were evicted %d times over 20 retries, want 0", got)
	}
	if got := srv.count(append(coVictims, "web-0")...); got > 1+len(coVictims) {
		t.Errorf("%d eviction calls over 20 retries, want at most %d", got, 1+len(coVictims))
	}
	if got := srv.count("web-0"); got != 1 {
		t.Errorf("the refused victim was posted %d times, want once", got)
	}
}
