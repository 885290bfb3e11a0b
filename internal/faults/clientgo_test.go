package faults

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// fakeAPI is a tiny API server: it records the requests that arrive,
// answers discovery and pod requests with small JSON objects, and streams
// two events to a watch, holding it open until the client leaves.
type fakeAPI struct {
	srv  *httptest.Server
	done chan struct{}

	mu   sync.Mutex
	seen []string // "METHOD /path", with " watch" for watches
}

func newFakeAPI(t *testing.T) *fakeAPI {
	t.Helper()
	f := &fakeAPI{done: make(chan struct{})}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(func() {
		close(f.done)
		f.srv.Close()
	})
	return f
}

const podJSON = `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"ns","resourceVersion":"7"}}`

func (f *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	watch := r.URL.Query().Get("watch")
	entry := r.Method + " " + r.URL.Path
	if watch == "true" || watch == "1" {
		entry += " watch"
	}
	f.mu.Lock()
	f.seen = append(f.seen, entry)
	f.mu.Unlock()

	w.Header().Set("Content-Type", "application/json")
	switch {
	case strings.HasSuffix(entry, " watch"):
		w.WriteHeader(http.StatusOK)
		for range 2 {
			fmt.Fprintf(w, "{\"type\":\"ADDED\",\"object\":%s}\n", podJSON)
		}
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-f.done:
		}
	case r.URL.Path == "/api":
		fmt.Fprint(w, `{"kind":"APIVersions","versions":["v1"]}`)
	case r.URL.Path == "/apis":
		fmt.Fprint(w, `{"kind":"APIGroupList","apiVersion":"v1","groups":[]}`)
	case strings.HasSuffix(r.URL.Path, "/eviction"):
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Success","code":201}`)
	default:
		fmt.Fprint(w, podJSON)
	}
}

// arrived reports how many requests arrived whose entry has prefix.
func (f *fakeAPI) arrived(prefix string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, s := range f.seen {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}

// config returns a rest.Config for the fake server without client-side
// rate limiting.
func (f *fakeAPI) config() *rest.Config {
	return &rest.Config{Host: f.srv.URL, QPS: 1000, Burst: 1000}
}

func newInjector(t *testing.T, cfg Config) *Injector {
	t.Helper()
	inj, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return inj
}

func clientset(t *testing.T, inj *Injector, cfg *rest.Config) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(inj.WrapConfig(cfg))
	if err != nil {
		t.Fatalf("NewForConfig: %v", err)
	}
	return cs
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Second)
	t.Cleanup(cancel)
	return ctx
}

const (
	evictionPath = "POST /api/v1/namespaces/ns/pods/p/eviction"
	deletePath   = "DELETE /api/v1/namespaces/ns/pods/p"
	statusPath   = "PATCH /api/v1/namespaces/ns/pods/p/status"
)

func evict(ctx context.Context, cs *kubernetes.Clientset) error {
	return cs.PolicyV1().Evictions("ns").Evict(ctx, &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
	})
}

// evictOnce evicts through the REST client with retries set to retries.
func evictOnce(retries int) func(context.Context, *kubernetes.Clientset) error {
	return func(ctx context.Context, cs *kubernetes.Clientset) error {
		return cs.CoreV1().RESTClient().Post().Namespace("ns").Resource("pods").Name("p").
			SubResource("eviction").MaxRetries(retries).
			Body(&policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}).
			Do(ctx).Error()
	}
}

func deletePod(ctx context.Context, cs *kubernetes.Clientset) error {
	return cs.CoreV1().Pods("ns").Delete(ctx, "p", metav1.DeleteOptions{})
}

func patchStatus(ctx context.Context, cs *kubernetes.Clientset) error {
	_, err := cs.CoreV1().Pods("ns").Patch(ctx, "p", types.MergePatchType,
		[]byte(`{"status":{"phase":"Failed"}}`), metav1.PatchOptions{}, "status")
	return err
}

func isNetTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func isServerError(err error) bool {
	return apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err)
}

// TestWrites sends each write under one kind at rate 1 through a clientset
// and checks the error client-go returns, whether the request reached the
// server, and how many attempts were faulted.
//
// client-go's rest client retries a response only if it is a 429 or a 5xx
// with a Retry-After header, up to MaxRetries times (10 by default), waiting
// the header's seconds before each retry. So the injected 500/503/504 are
// returned at once, but a 429 (Retry-After: 1) is retried: a clientset's
// Evict at rate 1 makes 11 attempts over about 10 s before it returns the
// 429, and at rate r the caller sees one only with probability r^11. Writes
// that fail in the transport (timeout-before) are not retried: client-go
// retries transport errors only for GETs. The 429 cases below therefore set
// MaxRetries on the request.
func TestWrites(t *testing.T) {
	tests := []struct {
		name     string
		kind     Kind
		op       func(context.Context, *kubernetes.Clientset) error
		path     string
		isErr    func(error) bool
		reached  bool
		attempts int
	}{
		{"server-error eviction", ServerError, evict, evictionPath, isServerError, false, 1},
		{"server-error delete", ServerError, deletePod, deletePath, isServerError, false, 1},
		{"server-error status", ServerError, patchStatus, statusPath, isServerError, false, 1},
		{"timeout-before eviction", TimeoutBefore, evict, evictionPath, isNetTimeout, false, 1},
		{"timeout-before delete", TimeoutBefore, deletePod, deletePath, isNetTimeout, false, 1},
		{"timeout-after eviction", TimeoutAfter, evict, evictionPath, apierrors.IsTimeout, true, 1},
		{"timeout-after delete", TimeoutAfter, deletePod, deletePath, apierrors.IsTimeout, true, 1},
		{"too-many-requests no retry", TooManyRequests, evictOnce(0), evictionPath, apierrors.IsTooManyRequests, false, 1},
		// Retry-After: 1 makes client-go wait a second and send again.
		{"too-many-requests one retry", TooManyRequests, evictOnce(1), evictionPath, apierrors.IsTooManyRequests, false, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := newFakeAPI(t)
			inj := newInjector(t, Config{Seed: 1, Rates: map[Kind]float64{tt.kind: 1}})
			cs := clientset(t, inj, api.config())

			err := tt.op(testContext(t), cs)
			if !tt.isErr(err) {
				t.Errorf("error = %v (%T), not the expected kind", err, err)
			}
			if err != nil && !strings.Contains(err.Error(), messagePrefix+string(tt.kind)) {
				t.Errorf("error %q does not name the fault %s", err, tt.kind)
			}
			if got, want := api.arrived(tt.path) > 0, tt.reached; got != want {
				t.Errorf("request reached the server: %v, want %v", got, want)
			}
			if got := inj.Counts()[tt.kind]; got != tt.attempts {
				t.Errorf("%s injected %d times, want %d", tt.kind, got, tt.attempts)
			}
			if tt.kind == TooManyRequests {
				if s, ok := apierrors.SuggestsClientDelay(err); !ok || s != 1 {
					t.Errorf("SuggestsClientDelay = %d, %v; want 1, true", s, ok)
				}
			}
		})
	}
}

func TestDiscoveryStartupWindow(t *testing.T) {
	api := newFakeAPI(t)
	inj := newInjector(t, Config{StartupDiscoveryErrors: time.Minute})
	now := time.Now()
	inj.now = func() time.Time { return now }
	cs := clientset(t, inj, api.config())

	if _, err := cs.Discovery().ServerGroups(); !apierrors.IsServiceUnavailable(err) {
		t.Fatalf("ServerGroups in the window: error %v, want ServiceUnavailable", err)
	}
	if n := api.arrived("GET /api"); n != 0 {
		t.Errorf("%d discovery requests reached the server in the window", n)
	}
	// Pods are not discovery: no fault.
	if _, err := cs.CoreV1().Pods("ns").Get(testContext(t), "p", metav1.GetOptions{}); err != nil {
		t.Errorf("Get pod in the window: %v", err)
	}

	now = now.Add(time.Minute)
	if _, err := cs.Discovery().ServerGroups(); err != nil {
		t.Fatalf("ServerGroups after the window: %v", err)
	}
	inj.Arm()
	if _, err := cs.Discovery().ServerGroups(); !apierrors.IsServiceUnavailable(err) {
		t.Errorf("ServerGroups after Arm: error %v, want ServiceUnavailable", err)
	}
	inj.Pause()
	if _, err := cs.Discovery().ServerGroups(); err != nil {
		t.Errorf("ServerGroups while paused: %v", err)
	}
	if got := inj.Counts()[DiscoveryError]; got != 2 {
		t.Errorf("discovery errors = %d, want 2", got)
	}
}

func TestWatchExpired(t *testing.T) {
	api := newFakeAPI(t)
	inj := newInjector(t, Config{Rates: map[Kind]float64{WatchExpired: 1}})
	cs := clientset(t, inj, api.config())

	w, err := cs.CoreV1().Pods("ns").Watch(testContext(t), metav1.ListOptions{ResourceVersion: "5"})
	if err == nil {
		w.Stop()
		t.Fatal("Watch succeeded, want 410")
	}
	if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
		t.Errorf("Watch error = %v, want Expired or Gone", err)
	}
	if !strings.Contains(err.Error(), "too old resource version: 5") {
		t.Errorf("Watch error %q lacks the resource version", err)
	}
	if n := api.arrived("GET"); n != 0 {
		t.Errorf("%d requests reached the server", n)
	}
}

func TestWatchDisconnect(t *testing.T) {
	api := newFakeAPI(t)
	inj := newInjector(t, Config{Rates: map[Kind]float64{WatchDisconnect: 1}, MaxWatchLife: 50 * time.Millisecond})
	cs := clientset(t, inj, api.config())

	w, err := cs.CoreV1().Pods("ns").Watch(testContext(t), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	defer w.Stop()
	timeout := time.After(3 * time.Second)
	for ended := false; !ended; {
		select {
		case _, ok := <-w.ResultChan():
			ended = !ok
		case <-timeout:
			t.Fatal("the watch stream was not cut")
		}
	}
	if n := api.arrived("GET /api/v1/namespaces/ns/pods watch"); n != 1 {
		t.Errorf("%d watches reached the server, want 1", n)
	}

	// Through the bare round tripper, reads end with io.ErrUnexpectedEOF.
	client := &http.Client{Transport: inj.RoundTripper(nil)}
	resp, err := client.Get(api.srv.URL + "/api/v1/pods?watch=1")
	if err != nil {
		t.Fatalf("GET watch: %v", err)
	}
	defer resp.Body.Close()
	if _, err := io.ReadAll(resp.Body); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("reading the cut stream: %v, want io.ErrUnexpectedEOF", err)
	}
	if got := inj.Counts()[WatchDisconnect]; got != 2 {
		t.Errorf("watch disconnects = %d, want 2", got)
	}
}

func TestPause(t *testing.T) {
	api := newFakeAPI(t)
	inj := newInjector(t, Config{Rates: AllKinds(1), MaxDelay: time.Millisecond})
	cs := clientset(t, inj, api.config())
	ctx := testContext(t)

	inj.Pause()
	if err := evict(ctx, cs); err != nil {
		t.Fatalf("evict while paused: %v", err)
	}
	if got := inj.String(); strings.Contains(got, "=1") {
		t.Errorf("faults while paused: %s", got)
	}
	inj.Resume()
	if err := evict(ctx, cs); !isServerError(err) {
		t.Errorf("evict after Resume: %v, want a server error", err)
	}
	if n := api.arrived(evictionPath); n != 1 {
		t.Errorf("%d evictions reached the server, want 1", n)
	}
}

func TestWrapConfigChains(t *testing.T) {
	api := newFakeAPI(t)
	inj := newInjector(t, Config{Rates: map[Kind]float64{ServerError: 1}})
	var mu sync.Mutex
	innerSaw := 0
	cfg := api.config()
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			mu.Lock()
			innerSaw++
			mu.Unlock()
			return rt.RoundTrip(req)
		})
	}
	cs := clientset(t, inj, cfg)
	ctx := testContext(t)
	if err := evict(ctx, cs); !isServerError(err) {
		t.Errorf("evict: %v, want a server error", err)
	}
	if _, err := cs.CoreV1().Pods("ns").Get(ctx, "p", metav1.GetOptions{}); err != nil {
		t.Errorf("get: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if innerSaw != 1 {
		t.Errorf("the config's own wrapper saw %d requests, want 1 (the injector outermost)", innerSaw)
	}
	// The original config is left as it was.
	if rt := cfg.WrapTransport(&stubTransport{}); fmt.Sprintf("%T", rt) != "faults.roundTripFunc" {
		t.Errorf("the original WrapTransport was changed: it returns %T", rt)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
