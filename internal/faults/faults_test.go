package faults

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
)

// stubTransport answers every request 200 with a small body, without a
// network, and counts the requests it sees.
type stubTransport struct {
	mu   sync.Mutex
	sent int
}

func (s *stubTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	s.sent++
	s.mu.Unlock()
	return &http.Response{
		StatusCode: http.StatusOK,
		Header:     http.Header{"Content-Type": []string{"application/json"}},
		Body:       io.NopCloser(strings.NewReader(podJSON)),
		Request:    req,
	}, nil
}

// mixedRequests returns n requests of every class, in a fixed order.
func mixedRequests(n int) []*http.Request {
	targets := []struct{ method, path string }{
		{"GET", "/apis"},
		{"GET", "/api/v1/pods?watch=1"},
		{"POST", "/api/v1/namespaces/ns/pods/p/eviction"},
		{"GET", "/api/v1/namespaces/ns/pods/p"},
		{"DELETE", "/api/v1/namespaces/ns/pods/p"},
	}
	reqs := make([]*http.Request, n)
	for k := range reqs {
		tg := targets[k%len(targets)]
		reqs[k] = httptest.NewRequest(tg.method, "http://example.test"+tg.path, http.NoBody)
	}
	return reqs
}

// faultSequence sends reqs through an injector seeded with seed and returns
// the fault each got ("" for none), read from the change in the counts.
func faultSequence(t *testing.T, seed int64, reqs []*http.Request) ([]Kind, map[Kind]int) {
	t.Helper()
	inj := newInjector(t, Config{Seed: seed, Rates: AllKinds(0.3), MaxDelay: time.Microsecond, MaxWatchLife: time.Microsecond})
	rt := inj.RoundTripper(&stubTransport{})
	seq := make([]Kind, len(reqs))
	before := inj.Counts()
	for n, req := range reqs {
		resp, err := rt.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		after := inj.Counts()
		for _, k := range Kinds() {
			if after[k] != before[k] {
				seq[n] = k
			}
		}
		before = after
	}
	return seq, before
}

func TestSameSeedSameFaults(t *testing.T) {
	const n = 200
	seqA, countsA := faultSequence(t, 42, mixedRequests(n))
	seqB, countsB := faultSequence(t, 42, mixedRequests(n))
	seqC, _ := faultSequence(t, 43, mixedRequests(n))
	if fmt.Sprint(seqA) != fmt.Sprint(seqB) {
		t.Errorf("same seed, different faults:\n%v\n%v", seqA, seqB)
	}
	if fmt.Sprint(countsA) != fmt.Sprint(countsB) {
		t.Errorf("same seed, different counts: %v, %v", countsA, countsB)
	}
	if fmt.Sprint(seqA) == fmt.Sprint(seqC) {
		t.Errorf("seeds 42 and 43 gave the same faults: %v", seqA)
	}
	for _, k := range Kinds() {
		if countsA[k] == 0 {
			t.Errorf("no %s in %d requests at rate 0.3: %v", k, n, countsA)
		}
	}
}

// TestEligibility checks that every request gets at most one fault, of a
// kind eligible for it: at rate 1 the first eligible kind in draw order.
func TestEligibility(t *testing.T) {
	noSlow := AllKinds(1)
	delete(noSlow, Slow)
	tests := []struct {
		method, path string
		rates        map[Kind]float64
		want         Kind // "" for none
	}{
		{"GET", "/apis", AllKinds(1), DiscoveryError},
		{"GET", "/api/v1/pods?watch=1", AllKinds(1), WatchDisconnect},
		{"GET", "/api/v1/pods?watch=1", map[Kind]float64{WatchExpired: 1, ServerError: 1}, WatchExpired},
		{"POST", "/api/v1/namespaces/ns/pods/p/eviction", AllKinds(1), ServerError},
		{"DELETE", "/api/v1/namespaces/ns/pods/p", map[Kind]float64{TooManyRequests: 1, Slow: 1}, TooManyRequests},
		{"GET", "/api/v1/namespaces/ns/pods/p", AllKinds(1), Slow},
		{"GET", "/api/v1/namespaces/ns/pods/p", noSlow, ""},
		{"PUT", "/api/v1/namespaces/ns/pods/p/status", noSlow, ""},
		{"GET", "/apis", map[Kind]float64{ServerError: 1, WatchExpired: 1}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			inj := newInjector(t, Config{Rates: tt.rates, MaxDelay: time.Microsecond, MaxWatchLife: time.Hour})
			stub := &stubTransport{}
			resp, err := inj.RoundTripper(stub).RoundTrip(
				httptest.NewRequest(tt.method, "http://example.test"+tt.path, http.NoBody))
			if err == nil {
				resp.Body.Close()
			}
			total := 0
			for k, n := range inj.Counts() {
				total += n
				if n > 0 && k != tt.want {
					t.Errorf("got %s, want %q", k, tt.want)
				}
			}
			if want := min(len(tt.want), 1); total != want {
				t.Errorf("%d faults, want %d", total, want)
			}
		})
	}

	// At any rate, reads never get a fault of writes.
	inj := newInjector(t, Config{Seed: 9, Rates: AllKinds(0.5), MaxDelay: time.Microsecond})
	rt := inj.RoundTripper(&stubTransport{})
	for range 200 {
		resp, err := rt.RoundTrip(httptest.NewRequest("GET", "http://example.test/api/v1/namespaces/ns/pods/p", http.NoBody))
		if err != nil {
			t.Fatalf("GET: %v", err)
		}
		resp.Body.Close()
	}
	if c := inj.Counts(); c[ServerError]+c[TimeoutBefore]+c[TimeoutAfter]+c[TooManyRequests] != 0 || c[Slow] == 0 {
		t.Errorf("200 GETs of a pod: %s", inj)
	}
}

func TestSlowHonoursContext(t *testing.T) {
	inj := newInjector(t, Config{Seed: 3, Rates: map[Kind]float64{Slow: 1}, MaxDelay: time.Hour})
	stub := &stubTransport{}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	req := httptest.NewRequestWithContext(ctx, "GET", "http://example.test/api/v1/pods", http.NoBody)
	if _, err := inj.RoundTripper(stub).RoundTrip(req); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("RoundTrip = %v, want context.DeadlineExceeded", err)
	}
	if stub.sent != 0 {
		t.Errorf("%d requests sent, want 0", stub.sent)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string // "" for valid
	}{
		{"zero", Config{}, ""},
		{"all kinds", Config{Rates: AllKinds(1), StartupDiscoveryErrors: time.Second}, ""},
		{"unknown kind", Config{Rates: map[Kind]float64{"slow": 0.1, "bogus": 0.1}}, `Rates: unknown fault kind "bogus"`},
		{"rate below 0", Config{Rates: map[Kind]float64{ServerError: -0.1}}, "Rates[server-error]: rate -0.1 outside [0, 1]"},
		{"rate above 1", Config{Rates: map[Kind]float64{Slow: 1.5}}, "Rates[slow]: rate 1.5 outside"},
		{"rate NaN", Config{Rates: map[Kind]float64{Slow: math.NaN()}}, "Rates[slow]: rate NaN"},
		{"negative MaxDelay", Config{MaxDelay: -time.Second}, "MaxDelay: negative duration"},
		{"negative MaxWatchLife", Config{MaxWatchLife: -1}, "MaxWatchLife: negative duration"},
		{"negative window", Config{StartupDiscoveryErrors: -time.Minute}, "StartupDiscoveryErrors: negative duration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("New: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("New error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestParseRatesAndString(t *testing.T) {
	rates, err := ParseRates("all=0.5, slow=0, server-error=1")
	if err != nil {
		t.Fatalf("ParseRates: %v", err)
	}
	if rates[Slow] != 0 || rates[ServerError] != 1 || rates[WatchExpired] != 0.5 || len(rates) != len(Kinds()) {
		t.Errorf("ParseRates = %v", rates)
	}
	for _, bad := range []string{"slow", "slow=x"} {
		if _, err := ParseRates(bad); err == nil {
			t.Errorf("ParseRates(%q) succeeded", bad)
		}
	}

	inj := newInjector(t, Config{})
	inj.counts[ServerError.index()].Add(7)
	inj.counts[DiscoveryError.index()].Add(3)
	const want = "discovery-error=3 server-error=7 slow=0 timeout-after=0 timeout-before=0 " +
		"too-many-requests=0 watch-disconnect=0 watch-expired=0"
	if got := inj.String(); got != want {
		t.Errorf("String =\n%s\nwant\n%s", got, want)
	}
}

// The synthesised Status decodes with the client's scheme.
func TestStatusResponseDecodes(t *testing.T) {
	req := httptest.NewRequest("GET", "http://example.test/apis", http.NoBody)
	resp := statusResponse(req, http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, "m", nil)
	body, _ := io.ReadAll(resp.Body)
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
	if err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	st, ok := obj.(*metav1.Status)
	if !ok || st.Code != 503 || st.Reason != metav1.StatusReasonServiceUnavailable || st.Status != metav1.StatusFailure {
		t.Errorf("decoded %#v", obj)
	}
	if resp.Request != req || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("response lacks its request or content type: %+v", resp)
	}
}
