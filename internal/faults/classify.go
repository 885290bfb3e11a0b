package faults

import (
	"net/http"
	"net/url"
	"strings"
)

// class says which kinds of fault a request is eligible for.
type class struct {
	discovery bool // a GET of a discovery path
	watch     bool // a GET with watch=true or watch=1 (or under .../watch/...)
	write     bool // one of the writes the faults of writes apply to
}

// eligible reports whether a request of class c may get a fault of kind k.
func (c class) eligible(k Kind) bool {
	switch k {
	case DiscoveryError:
		return c.discovery
	case WatchDisconnect, WatchExpired:
		return c.watch
	case ServerError, TimeoutBefore, TimeoutAfter, TooManyRequests:
		return c.write
	case Slow:
		return true
	}
	return false
}

// apiPath is a resource path of the API server, split into its parts.
// Discovery paths have a group and maybe a version but no resource.
type apiPath struct {
	core        bool // under /api rather than /apis
	group       string
	version     string
	watch       bool // the legacy /watch/ prefix before the resource
	namespace   string
	resource    string
	name        string
	subresource string
}

// parsePath splits the path of u into an apiPath. Anything before the first
// "api" or "apis" segment (a proxy's prefix) is skipped. It returns false for
// a path outside the API, such as /version or /openapi/v2.
func parsePath(u *url.URL) (apiPath, bool) {
	segs := strings.FieldsFunc(u.Path, func(r rune) bool { return r == '/' })
	start := -1
	for n, s := range segs {
		if s == "api" || s == "apis" {
			start = n
			break
		}
	}
	if start < 0 {
		return apiPath{}, false
	}
	var p apiPath
	rest := segs[start+1:]
	if segs[start] == "api" {
		p.core = true
	} else if len(rest) > 0 {
		p.group, rest = rest[0], rest[1:]
	}
	if len(rest) > 0 {
		p.version, rest = rest[0], rest[1:]
	}
	if len(rest) > 0 && rest[0] == "watch" {
		p.watch, rest = true, rest[1:]
	}
	// namespaces/NS/RESOURCE... is namespaced; namespaces[/NS[/status]]
	// (or /finalize) is the namespace resource itself.
	if len(rest) >= 3 && rest[0] == "namespaces" && (len(rest) != 3 || (rest[2] != "status" && rest[2] != "finalize")) {
		p.namespace, rest = rest[1], rest[2:]
	}
	for _, field := range []*string{&p.resource, &p.name, &p.subresource} {
		if len(rest) == 0 {
			break
		}
		*field, rest = rest[0], rest[1:]
	}
	if len(rest) > 0 { // deeper than a subresource: not one we know
		return apiPath{}, false
	}
	return p, true
}

// isDiscovery reports whether p is a discovery path: /api, /api/<version>,
// /apis, /apis/<group> or /apis/<group>/<version>.
func (p apiPath) isDiscovery() bool {
	return p.resource == "" && p.namespace == "" && !p.watch
}

// classify returns the class of req.
func classify(req *http.Request) class {
	if req.URL == nil {
		return class{}
	}
	p, ok := parsePath(req.URL)
	if !ok {
		return class{}
	}
	var c class
	if req.Method == http.MethodGet {
		c.discovery = p.isDiscovery()
		switch req.URL.Query().Get("watch") {
		case "true", "1":
			c.watch = p.resource != ""
		}
		c.watch = c.watch || (p.watch && p.resource != "")
	}
	c.write = isWrite(req.Method, p)
	return c
}

// isWrite reports whether a request of method to p is one of the writes:
// POST of pods/eviction, DELETE of a pod, PATCH of pods/status, and PUT or
// PATCH of policy.kruise.io podunavailablebudgets/status.
func isWrite(method string, p apiPath) bool {
	if p.name == "" {
		return false
	}
	corePods := p.core && p.version == "v1" && p.namespace != "" && p.resource == "pods"
	switch {
	case corePods && p.subresource == "eviction":
		return method == http.MethodPost
	case corePods && p.subresource == "":
		return method == http.MethodDelete
	case corePods && p.subresource == "status":
		return method == http.MethodPatch
	case p.group == "policy.kruise.io" && p.resource == "podunavailablebudgets" && p.subresource == "status":
		return method == http.MethodPut || method == http.MethodPatch
	}
	return false
}
