// Package faults injects API-server faults into a component's Kubernetes
// client: an Injector wraps an http.RoundTripper (or a rest.Config) and, per
// request, answers discovery, watch and write requests with the errors a real
// control plane produces under stress (503, 410 Gone, 500, 429, 504, timeouts,
// cut watch streams, slow responses) at configured rates.
// Each request gets at most one fault, only of a kind eligible for it (a GET is
// never answered 500), draws come from one seeded source so the same seed and
// request sequence give the same faults, and nothing is injected while paused.
package faults
