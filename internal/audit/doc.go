// Package audit is the sandbox's independent auditor, which reads
// kube-apiserver's audit log and its own informers: the log tells it every
// pod eviction and delete and who asked for it, the informers each budget's
// healthy pods. It shares no code with the plugins it checks.
//
// # Wiring
//
// APIServerFlags writes an audit policy and returns the kube-apiserver flags
// that log every pod delete and pods/eviction create once, when the response
// is complete, to a JSON file, in blocking mode: the line is written before
// the response leaves the server, so a request its client has seen answered
// is in the log. Start the control plane with those flags, then New, Start,
// run the scenario, stop the components, and Finish. All requests in the
// sandbox come from the same loopback user, so the user agent is what tells
// the components apart (Options.Components, Options.Ignore).
//
// # What counts
//
// docs/audit.md is the rule book, with the upstream code each rule
// follows. In short: a disruption is decided when the API server decided
// it (a delete when received; an eviction at the PDB status write that put
// the pod in disruptedPods; a PUB disruption at its component's own record,
// when that qualifies), and disruptions of a budget are ordered by those
// decisions. Health is each budget's controller's (a PDB: Ready, not
// terminating, not in disruptedPods; a PUB: OpenKruise's available), and
// what Kruise's webhook exempts is never charged. A disruption that leaves
// a budget short at its decision is a violation, unless the budget was
// whole at its component's knowledge time less the informers' lag measured
// in the run: then it is a race, counted and shown for every actor. A
// budget whose status is short after a disruption by budgetguard that was
// found clean, with nothing else going, is a disagreement. A request
// answered 5xx is a disruption when the pod's own deletion write followed
// it with no other request to explain it.
//
// # How it works
//
// While running, the auditor only records: each informer event with the
// time it arrived, and each log line. Finish merges both by time (the API
// server runs in the same process, so the clocks agree), replays them to
// find the disruptions and each budget's lowest healthy count, keeps every
// object's history, and judges each disruption on it, which makes the
// result deterministic for a given history. HealthySeries then gives each
// budget's healthy count over the run as the replay kept it, read-only: it
// decides nothing (series.go).
package audit
