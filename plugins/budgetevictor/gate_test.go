package budgetevictor

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
	frameworkfake "sigs.k8s.io/descheduler/pkg/framework/fake"

	"github.com/budgetguard/budgetguard/internal/testobj"

	"github.com/budgetguard/budgetguard/plugins/budget"
)

func evict(ctx context.Context, c kubernetes.Interface, name string) error {
	return c.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
}

// acceptEvictions makes the fake answer an eviction as an accepting API
// server does: the pod is deleted.
func acceptEvictions(c *fake.Clientset) {
	c.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		ev := a.(clienttesting.CreateAction).GetObject().(*policyv1.Eviction)
		return true, nil, c.Tracker().Delete(v1.SchemeGroupVersion.WithResource("pods"), ev.Namespace, ev.Name)
	})
}

func objects(pdb *policyv1.PodDisruptionBudget, pods ...string) []runtime.Object {
	objs := []runtime.Object{pdb}
	for _, n := range pods {
		objs = append(objs, webPod(n).Obj())
	}
	return objs
}

// The RemoveDuplicates pattern: PreEvictionFilter is asked about every
// candidate while the strategy lists them, the strategy keeps one, and
// evicts the others. Listing must spend nothing; the evictions spend the
// budget one by one, and the one too many is refused before the API server.
func TestListingSpendsNothingAndTheEvictionRequestReserves(t *testing.T) {
	// The fake gets its accepting reactor before the plugin is built, as
	// the dry run's fake cluster does, so the gate's reactor runs first.
	client := fake.NewClientset(objects(webPDB("web", 1).Obj(), "a", "b", "c")...)
	acceptEvictions(client)
	p := pluginOn(t, nil, Options{Ledger: budget.LedgerOptions{ReservationTTL: time.Hour}}, client, client)
	if !p.sh.gated {
		t.Fatal("the eviction gate was not installed on a fake clientset")
	}
	for _, n := range []string{"a", "b", "c"} {
		if !p.PreEvictionFilter(webPod(n).Obj()) {
			t.Fatalf("PreEvictionFilter(%s) = false while listing, want true: listing must not spend the budget", n)
		}
	}
	if n := cacheOf(t, p).InFlight(); n != 0 {
		t.Fatalf("ledger holds %d reservations after listing, want 0", n)
	}
	ctx := context.Background()
	before := counter(t, extensionEvictionRequest, string(budget.ReasonInsufficientBudget))
	if err := evict(ctx, client, "b"); err != nil {
		t.Fatalf("eviction of b: %v, want accepted", err)
	}
	if n := cacheOf(t, p).InFlight(); n != 1 {
		t.Fatalf("ledger holds %d reservations after one eviction, want 1", n)
	}
	err := evict(ctx, client, "c")
	if !apierrors.IsTooManyRequests(err) {
		t.Fatalf("eviction of c: %v, want 429", err)
	}
	if !strings.Contains(err.Error(), "pdb shop/web") {
		t.Errorf("refusal %q does not name the budget", err)
	}
	if got := counter(t, extensionEvictionRequest, string(budget.ReasonInsufficientBudget)) - before; got != 1 {
		t.Errorf("EvictionRequest refusals grew by %v, want 1", got)
	}
	if _, err := client.CoreV1().Pods(ns).Get(ctx, "c", metav1.GetOptions{}); err != nil {
		t.Errorf("refused pod c is gone from the cluster: %v", err)
	}
	if p.PreEvictionFilter(webPod("c").Obj()) {
		t.Error("PreEvictionFilter(c) = true after b's eviction spent the only disruption")
	}
}

// fakeAPIServer answers evictions per pod name and counts the requests.
type fakeAPIServer struct {
	mu   sync.Mutex
	hits map[string]int
	// bodies holds the last request body per method and path.
	bodies map[string][]byte
}

func (s *fakeAPIServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.hits[r.Method+" "+r.URL.Path]++
	s.bodies[r.Method+" "+r.URL.Path] = body
	s.mu.Unlock()
	name := ""
	if i := strings.LastIndex(r.URL.Path, "/pods/"); i >= 0 {
		name = strings.TrimSuffix(r.URL.Path[i+len("/pods/"):], "/eviction")
	}
	st := metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}}
	switch {
	case !strings.HasSuffix(r.URL.Path, "/eviction"):
		st.Status, st.Code, st.Reason = metav1.StatusFailure, http.StatusNotFound, metav1.StatusReasonNotFound
	case name == "b":
		w.Header().Set("Retry-After", "1")
		st.Status, st.Code, st.Reason, st.Message = metav1.StatusFailure, http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests, "Cannot evict pod as it would violate the pod's disruption budget."
	case name == "c":
		st.Status, st.Code, st.Reason = metav1.StatusFailure, http.StatusInternalServerError, metav1.StatusReasonInternalError
	default:
		st.Status, st.Code = metav1.StatusSuccess, http.StatusCreated
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(st.Code))
	_ = json.NewEncoder(w).Encode(st)
}

// realClientset serves a fakeAPIServer until the test ends and returns it
// with a real clientset that talks to it.
func realClientset(t *testing.T) (*fakeAPIServer, *kubernetes.Clientset) {
	t.Helper()
	srv := &fakeAPIServer{hits: map[string]int{}, bodies: map[string][]byte{}}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	real, err := kubernetes.NewForConfig(&rest.Config{Host: ts.URL})
	if err != nil {
		t.Fatal(err)
	}
	return srv, real
}

func (s *fakeAPIServer) evictions(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits["POST /api/v1/namespaces/"+ns+"/pods/"+name+"/eviction"]
}

// On a real clientset the gate is a RoundTripper on the policy/v1 client:
// accepted evictions keep their reservation, failed ones give it back at
// once, a 429 is not retried, and a refused one never reaches the server.
func TestGateOnARealClientset(t *testing.T) {
	srv, real := realClientset(t)
	p := pluginOn(t, nil, Options{Ledger: budget.LedgerOptions{ReservationTTL: time.Hour}},
		fake.NewClientset(objects(webPDB("web", 2).Obj(), "a", "b", "c", "d", "e", "f")...), real)
	if !p.sh.gated {
		t.Fatal("the eviction gate was not installed on a real clientset")
	}
	ctx := context.Background()

	if err := evict(ctx, real, "a"); err != nil {
		t.Fatalf("eviction of a: %v", err)
	}
	if n := cacheOf(t, p).InFlight(); n != 1 {
		t.Fatalf("after a was accepted the ledger holds %d reservations, want 1", n)
	}
	apiBefore := counter(t, extensionAPIServer, "TooManyRequests")
	if err := evict(ctx, real, "b"); !apierrors.IsTooManyRequests(err) {
		t.Fatalf("eviction of b: %v, want the server's 429", err)
	}
	if n := srv.evictions("b"); n != 1 {
		t.Errorf("the server saw %d evictions of b, want 1 (a 429 must not be retried)", n)
	}
	if got := counter(t, extensionAPIServer, "TooManyRequests") - apiBefore; got != 1 {
		t.Errorf("APIServer TooManyRequests grew by %v, want 1", got)
	}
	if err := evict(ctx, real, "c"); err == nil || !apierrors.IsInternalError(err) {
		t.Fatalf("eviction of c: %v, want the server's 500", err)
	}
	if n := cacheOf(t, p).InFlight(); n != 1 {
		t.Fatalf("after b and c failed the ledger holds %d reservations, want 1 (theirs must be cancelled)", n)
	}
	if err := evict(ctx, real, "d"); err != nil {
		t.Fatalf("eviction of d: %v", err)
	}
	err := evict(ctx, real, "e")
	if !apierrors.IsTooManyRequests(err) || !strings.Contains(err.Error(), "pdb shop/web") {
		t.Fatalf("eviction of e: %v, want a 429 naming pdb shop/web", err)
	}
	if n := srv.evictions("e"); n != 0 {
		t.Errorf("the server saw %d evictions of e, want 0: the gate refuses before the request is sent", n)
	}
	if p.PreEvictionFilter(webPod("f").Obj()) {
		t.Error("PreEvictionFilter(f) = true while a and d hold the budget of 2")
	}
	// Other policy/v1 requests pass through untouched.
	_, err = real.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "web", metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("GET of a PDB through the gated client: %v, want the server's 404", err)
	}
}

// TestGateSendsTheDecidedPodsPreconditions: the descheduler's eviction
// names the pod only. A pod that is not Ready spends none of its budget, so
// the gate's eviction carries the resourceVersion it was decided on (and
// its UID): one that turned Ready before the request landed is refused
// with a conflict rather than taken unaccounted. The descheduler's body
// carries no preconditions, so the gate adds them.
func TestGateSendsTheDecidedPodsPreconditions(t *testing.T) {
	srv, real := realClientset(t)
	notReady := webPod("a").ResourceVersion("7").Ready(false).Obj()
	p := pluginOn(t, nil, Options{Ledger: budget.LedgerOptions{ReservationTTL: time.Hour}},
		fake.NewClientset(webPDB("web", 1).Status(2, 1, 1).Obj(), notReady, webPod("d").ResourceVersion("8").Obj(), webPod("e").Obj()), real)
	ctx := context.Background()
	for _, tc := range []struct {
		pod    string
		wantRV *string
	}{{"a", ptr.To("7")}, {"d", nil}} {
		if err := evict(ctx, real, tc.pod); err != nil {
			t.Fatalf("eviction of %s: %v", tc.pod, err)
		}
		srv.mu.Lock()
		body := srv.bodies["POST /api/v1/namespaces/"+ns+"/pods/"+tc.pod+"/eviction"]
		srv.mu.Unlock()
		var ev policyv1.Eviction
		if err := json.Unmarshal(body, &ev); err != nil {
			t.Fatalf("eviction body of %s: %v (%s)", tc.pod, err, body)
		}
		var got *metav1.Preconditions
		if ev.DeleteOptions != nil {
			got = ev.DeleteOptions.Preconditions
		}
		want := &metav1.Preconditions{UID: ptr.To(testobj.UIDOf(tc.pod)), ResourceVersion: tc.wantRV}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("preconditions of %s's eviction (-want,+got):\n%s", tc.pod, diff)
		}
	}
	if p.sh.gated != true {
		t.Error("the gate is not on the client")
	}
}

// A client the gate cannot wrap: PreEvictionFilter reserves, as it must then,
// and a reservation whose eviction never happens ends after the TTL.
func TestWithoutTheGatePreEvictionFilterReserves(t *testing.T) {
	opaque := struct{ kubernetes.Interface }{fake.NewClientset()}
	p := pluginOn(t, nil, Options{Ledger: budget.LedgerOptions{ReservationTTL: 100 * time.Millisecond}}, fake.NewClientset(objects(webPDB("web", 1).Obj(), "a", "b", "c")...), opaque)
	if p.sh.gated {
		t.Fatal("the gate claims to sit on a client it cannot wrap")
	}
	var got []bool
	for _, n := range []string{"a", "b", "c"} {
		got = append(got, p.PreEvictionFilter(webPod(n).Obj()))
	}
	if got[0] != true || got[1] != false || got[2] != false {
		t.Fatalf("PreEvictionFilter over a, b, c = %v, want [true false false]", got)
	}
	// a is never evicted: its reservation must end and free the budget.
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return cacheOf(t, p).Decide(webPod("b").Obj(), budget.OperationEvict).Allowed, nil
	})
	if err != nil {
		t.Fatalf("reservation of a never-evicted pod still holds the budget: %v", err)
	}
	if !p.PreEvictionFilter(webPod("b").Obj()) {
		t.Fatal("eviction of b refused after a's reservation ended")
	}
}

func TestProfilesShareOneLedgerAndOneGate(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset(objects(webPDB("web", 1).Obj(), "a", "b", "c")...)
	acceptEvictions(client)
	reactors := len(client.ReactionChain)
	factory := informers.NewSharedInformerFactory(client, 0)
	handle := &frameworkfake.HandleImpl{ClientsetImpl: client, SharedInformerFactoryImpl: factory}
	var pls []*BudgetAwareEvictor
	for range 2 {
		pl, err := NewBuilder(Options{Ledger: budget.LedgerOptions{ReservationTTL: time.Hour}})(ctx, &BudgetAwareEvictorArgs{}, handle)
		if err != nil {
			t.Fatal(err)
		}
		pls = append(pls, pl.(*BudgetAwareEvictor))
	}
	factory.Start(ctx.Done())
	defer func() {
		cancel()
		factory.Shutdown()
	}()
	if cacheOf(t, pls[0]) != cacheOf(t, pls[1]) {
		t.Fatal("two profiles on one informer factory got different budget caches")
	}
	if n := len(client.ReactionChain) - reactors; n != 1 {
		t.Fatalf("building two profiles added %d reactors, want one gate", n)
	}
	if !cacheOf(t, pls[0]).WaitForCacheSync(ctx) {
		t.Fatal("budget cache did not sync")
	}
	if !pls[0].PreEvictionFilter(webPod("a").Obj()) {
		t.Fatal("first profile: eviction of a refused, want allowed")
	}
	if err := evict(ctx, client, "a"); err != nil {
		t.Fatalf("eviction of a: %v", err)
	}
	if pls[1].PreEvictionFilter(webPod("b").Obj()) {
		t.Fatal("second profile: eviction of b allowed, but the first profile's eviction spent the only disruption")
	}
}

func TestEvictionTarget(t *testing.T) {
	tests := []struct {
		method, path string
		ns, name     string
		ok           bool
	}{
		{"POST", "/api/v1/namespaces/shop/pods/web-1/eviction", "shop", "web-1", true},
		{"POST", "/k8s/clusters/c-1/api/v1/namespaces/shop/pods/web-1/eviction", "shop", "web-1", true},
		{"POST", "/api/v1/namespaces/shop/pods/web-1/eviction/", "shop", "web-1", true},
		{"GET", "/api/v1/namespaces/shop/pods/web-1/eviction", "", "", false},
		{"POST", "/api/v1/namespaces/shop/pods/web-1", "", "", false},
		{"POST", "/apis/policy/v1/namespaces/shop/poddisruptionbudgets", "", "", false},
		{"POST", "/api/v1/namespaces//pods/web-1/eviction", "", "", false},
		{"POST", "/api/v1/namespaces/shop/pods//eviction", "", "", false},
		{"POST", "/eviction", "", "", false},
	}
	for _, tt := range tests {
		req := &http.Request{Method: tt.method, URL: &url.URL{Path: tt.path}}
		gotNS, gotName, ok := evictionTarget(req)
		if ok != tt.ok || gotNS != tt.ns || gotName != tt.name {
			t.Errorf("evictionTarget(%s %s) = %q, %q, %v; want %q, %q, %v", tt.method, tt.path, gotNS, gotName, ok, tt.ns, tt.name, tt.ok)
		}
	}
}

// TestGateFollowsTheLatestCache: the descheduler built again on the same
// client with a new informer factory (the sandbox does so for every
// deschedule step) decides on the new cache. Bound to the first cache it
// met, which has stopped, the gate would pass pods created since unchecked
// and judge known pods on frozen numbers.
func TestGateFollowsTheLatestCache(t *testing.T) {
	srv, real := realClientset(t)
	// The first build saw a budget with room for 2; by the second the
	// budget allows nothing.
	pluginOn(t, nil, Options{}, fake.NewClientset(objects(webPDB("web", 2).Obj(), "a")...), real)
	second := pluginOn(t, nil, Options{}, fake.NewClientset(objects(webPDB("web", 0).Obj(), "a")...), real)
	if !second.sh.gated {
		t.Fatal("the second build has no gate")
	}
	err := evict(context.Background(), real, "a")
	if !apierrors.IsTooManyRequests(err) || !strings.Contains(err.Error(), "pdb shop/web") {
		t.Fatalf("eviction of a after the second build: %v, want a 429 from the gate naming pdb shop/web", err)
	}
	if n := srv.evictions("a"); n != 0 {
		t.Errorf("the server saw %d evictions of a, want 0: the current cache denies it", n)
	}
}
