package kubectlplugin

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDescribeRequest: the informers' requests are named as RBAC names
// them: verb, resource.group and namespace.
func TestDescribeRequest(t *testing.T) {
	type desc struct {
		Verb, Resource, Namespace string
		OK                        bool
	}
	cases := []struct {
		method, url string
		want        desc
	}{
		{"GET", "/api/v1/namespaces/shop/pods?limit=500&resourceVersion=0", desc{"list", "pods", "shop", true}},
		{"GET", "/api/v1/pods?watch=true", desc{"watch", "pods", "", true}},
		{"GET", "/api/v1/nodes/n1", desc{"get", "nodes", "", true}},
		{"GET", "/apis/policy.kruise.io/v1alpha1/namespaces/shop/podunavailablebudgets", desc{"list", "podunavailablebudgets.policy.kruise.io", "shop", true}},
		{"GET", "/apis/apps/v1/replicasets?allowWatchBookmarks=true&watch=1", desc{"watch", "replicasets.apps", "", true}},
		{"GET", "/apis/policy.kruise.io/v1alpha1", desc{}},
		{"GET", "/api/v1/namespaces/shop", desc{"get", "namespaces", "", true}},
		{"GET", "/version", desc{}},
		{"POST", "/api/v1/namespaces/shop/pods", desc{}},
	}
	for _, tc := range cases {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		var got desc
		got.Verb, got.Resource, got.Namespace, got.OK = describeRequest(tc.method, u)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s %s (-want,+got):\n%s", tc.method, tc.url, diff)
		}
	}
}

// TestRefusals: the first 403 is kept and signalled, later ones do not
// replace it, and other failures are kept as the last failure.
func TestRefusals(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.Contains(r.URL.Path, "podunavailablebudgets"), strings.Contains(r.URL.Path, "statefulsets"):
			w.WriteHeader(http.StatusForbidden)
		case strings.Contains(r.URL.Path, "deployments"):
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	r := newRefusals()
	client := &http.Client{Transport: r.wrap(http.DefaultTransport)}
	for _, path := range []string{
		"/api/v1/namespaces/shop/pods",
		"/apis/apps/v1/namespaces/shop/deployments",
		"/apis/policy.kruise.io/v1alpha1/namespaces/shop/podunavailablebudgets",
		"/apis/apps/v1/namespaces/shop/statefulsets",
	} {
		resp, err := client.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	select {
	case <-r.refused:
	default:
		t.Fatal("a 403 was not signalled")
	}
	want := "no permission to list podunavailablebudgets.policy.kruise.io in namespace shop (403 Forbidden for GET /apis/policy.kruise.io/v1alpha1/namespaces/shop/podunavailablebudgets)"
	if r.err == nil || !strings.HasPrefix(r.err.Error(), want) {
		t.Errorf("refusal %v, want it to start with %q", r.err, want)
	}
	if got, want := r.lastFailure(), "GET /apis/apps/v1/namespaces/shop/deployments: 503 Service Unavailable"; got != want {
		t.Errorf("last failure %q, want %q", got, want)
	}
}
