package faults

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
)

func TestClassify(t *testing.T) {
	const (
		pod = "/api/v1/namespaces/ns/pods/p"
		pub = "/apis/policy.kruise.io/v1alpha1/namespaces/ns/podunavailablebudgets/b"
	)
	tests := []struct {
		method, target string
		want           class
	}{
		// Discovery.
		{"GET", "/api", class{discovery: true}},
		{"GET", "/api/", class{discovery: true}},
		{"GET", "/api/v1", class{discovery: true}},
		{"GET", "/apis", class{discovery: true}},
		{"GET", "/apis/policy.kruise.io", class{discovery: true}},
		{"GET", "/apis/policy.kruise.io/v1alpha1", class{discovery: true}},
		{"GET", "/prefix/cluster/apis/apps/v1", class{discovery: true}},
		{"POST", "/apis", class{}},
		{"GET", "/version", class{}},
		{"GET", "/openapi/v2", class{}},
		{"GET", "/api/v1/pods", class{}},
		{"GET", "/api/v1/namespaces", class{}},
		{"GET", "/api/v1/namespaces/ns/status", class{}},
		// Watches.
		{"GET", "/api/v1/namespaces/ns/pods?watch=true", class{watch: true}},
		{"GET", "/api/v1/pods?watch=1&resourceVersion=5", class{watch: true}},
		{"GET", "/apis/policy.kruise.io/v1alpha1/podunavailablebudgets?watch=true", class{watch: true}},
		{"GET", "/api/v1/watch/namespaces/ns/pods", class{watch: true}},
		{"GET", "/api/v1/pods?watch=false", class{}},
		{"GET", "/api/v1?watch=true", class{discovery: true}},
		{"POST", "/api/v1/namespaces/ns/pods?watch=true", class{}},
		// Writes.
		{"POST", pod + "/eviction", class{write: true}},
		{"DELETE", pod, class{write: true}},
		{"PATCH", pod + "/status", class{write: true}},
		{"PUT", pub + "/status", class{write: true}},
		{"PATCH", pub + "/status", class{write: true}},
		{"POST", "/prefix" + pod + "/eviction", class{write: true}},
		// Not writes.
		{"GET", pod, class{}},
		{"GET", pod + "/eviction", class{}},
		{"PUT", pod + "/status", class{}},
		{"PATCH", pod, class{}},
		{"DELETE", "/api/v1/namespaces/ns/pods", class{}},
		{"DELETE", "/api/v1/namespaces/ns/pods/p/eviction", class{}},
		{"DELETE", pub, class{}},
		{"PUT", pub, class{}},
		{"POST", pub + "/status", class{}},
		{"PUT", "/apis/other.io/v1alpha1/namespaces/ns/podunavailablebudgets/b/status", class{}},
		{"POST", "/apis/apps/v1/namespaces/ns/deployments/d/eviction", class{}},
		{"PATCH", "/api/v1/nodes/n/status", class{}},
		{"DELETE", "/api/v1/namespaces/ns/pods/p/status/extra", class{}},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.target, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, "https://example.test"+tt.target, http.NoBody)
			if got := classify(req); got != tt.want {
				t.Errorf("classify = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestEligible(t *testing.T) {
	tests := []struct {
		c    class
		want []Kind
	}{
		{class{}, []Kind{Slow}},
		{class{discovery: true}, []Kind{DiscoveryError, Slow}},
		{class{watch: true}, []Kind{WatchDisconnect, WatchExpired, Slow}},
		{class{write: true}, []Kind{ServerError, TimeoutBefore, TimeoutAfter, TooManyRequests, Slow}},
	}
	for _, tt := range tests {
		var got []Kind
		for _, k := range Kinds() {
			if tt.c.eligible(k) {
				got = append(got, k)
			}
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%+v eligible for %v, want %v", tt.c, got, tt.want)
		}
	}
}
