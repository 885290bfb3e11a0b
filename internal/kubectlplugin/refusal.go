package kubectlplugin

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
)

// refusals remembers the first request of the informers' clients (see
// wrap) that the API server refused (401 or 403): openCluster stops waiting
// at once and names what was refused, instead of waiting for informers that
// retry a list they will never be allowed. It also keeps the last other
// failure, for the message when the informers do not sync in time.
type refusals struct {
	once    sync.Once
	refused chan struct{}
	err     error

	mu   sync.Mutex
	last string
}

func newRefusals() *refusals {
	return &refusals{refused: make(chan struct{})}
}

// wrap is a rest.Config's WrapTransport: requests through the transport it
// returns are watched for refusals.
func (r *refusals) wrap(next http.RoundTripper) http.RoundTripper {
	return &refusalTripper{refusals: r, next: next}
}

type refusalTripper struct {
	*refusals
	next http.RoundTripper
}

func (r *refusalTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	switch {
	case err != nil:
		r.setLast(fmt.Sprintf("%s %s: %v", req.Method, req.URL.Path, err))
	case resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusUnauthorized:
		r.once.Do(func() {
			r.err = refusalError(req.Method, req.URL, resp.StatusCode)
			close(r.refused)
		})
	case resp.StatusCode >= 400:
		r.setLast(fmt.Sprintf("%s %s: %s", req.Method, req.URL.Path, resp.Status))
	}
	return resp, err
}

func (r *refusals) setLast(s string) {
	r.mu.Lock()
	r.last = s
	r.mu.Unlock()
}

// lastFailure is the last failed request that was not a refusal, or "".
func (r *refusals) lastFailure() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// refusalError says what the API server refused: the verb, the resource
// (resource.group, as kubectl names it) and where, for a 403; that the
// credentials were not accepted, for a 401.
func refusalError(method string, u *url.URL, status int) error {
	what := fmt.Sprintf("%s %s", method, u.Path)
	if status == http.StatusUnauthorized {
		return fmt.Errorf("the API server did not accept the credentials (401 Unauthorized for %s): check the kubeconfig's user", what)
	}
	verb, resource, namespace, ok := describeRequest(method, u)
	if !ok {
		return fmt.Errorf("no permission: the API server answered 403 Forbidden to %s", what)
	}
	where := "in all namespaces"
	if namespace != "" {
		where = "in namespace " + namespace
	}
	return fmt.Errorf("no permission to %s %s %s (403 Forbidden for %s): the plugin needs list and watch on it, see 'kubectl budgetguard --help'",
		verb, resource, where, what)
}

// describeRequest names a request to a resource of the API as RBAC does:
// the verb (get, list, watch), the resource as resource.group (group
// omitted for the core API) and the namespace ("" for every namespace or a
// cluster-scoped resource). ok is false for a path that names no resource,
// such as discovery.
func describeRequest(method string, u *url.URL) (verb, resource, namespace string, ok bool) {
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	var group string
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		group, parts = parts[1], parts[3:]
	default:
		return "", "", "", false
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		namespace, parts = parts[1], parts[2:]
	}
	if len(parts) == 0 || len(parts) > 2 || method != http.MethodGet {
		return "", "", "", false
	}
	resource = parts[0]
	if group != "" {
		resource += "." + group
	}
	switch w := u.Query().Get("watch"); {
	case w == "true" || w == "1":
		verb = "watch"
	case len(parts) == 2:
		verb = "get"
	default:
		verb = "list"
	}
	return verb, resource, namespace, true
}
