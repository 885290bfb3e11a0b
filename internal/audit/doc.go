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
//   - A disruption is a pod delete or an eviction that the API server
//     answered 2xx, not in dry-run, from a user agent that is not ignored,
//     of a pod that was not already terminating and not already disrupted
//     according to the log. A second request on the same pod adds nothing.
//     A request answered with a server error (500, 503, 504: a timeout, a
//     client that went away) whose pod is seen terminating or gone while it
//     was under way, or within 2 s of the answer, with no accepted request
//     of the pod received in between, was carried out all the same: it is a
//     disruption too, taking effect when the pod was seen going.
//   - A refusal is such a request answered otherwise; 429 is a PDB refusal,
//     403 a PUB's (OpenKruise's webhook, or the sandbox's stand-in for it,
//     denied the request), 500 several PDBs, 404 a pod that was gone.
//   - A pod is healthy when its Ready condition is True, it has no
//     deletionTimestamp, and no disruption of it has taken effect (below).
//   - Budgets covering a pod, matched by the auditor itself (not by
//     plugins/budget): a PDB whose selector matches the pod in the PDB's
//     namespace (nil or invalid selector: none, {}: all); a PUB whose
//     spec.targetRef names the pod's controller, or its ReplicaSet's
//     controller (group, kind and name compared; a ReplicaSet, Deployment or
//     StatefulSet must exist with the referenced UID), or, without
//     targetRef, whose spec.selector matches. The kruise.io/related-pub
//     annotation is not followed: the PUB controller counts pods by
//     selector and targetRef.
//   - Desired is the live budget status that the disruption controller (PDB
//     status.desiredHealthy) or the sandbox's PUB status simulation (PUB
//     status.desiredAvailable) computed; the auditor computes none.
//   - WasHealthy is the pod's health just before the request: its last state
//     seen before the API server received the request, or a later state that
//     the informers delivered before the pod showed terminating (the
//     informers lag the API server a little, and the disruption's own write
//     is the one that makes the pod terminating).
//   - A disruption takes effect when the informers show its pod terminating,
//     gone or replaced, or when the API server answered the request,
//     whichever is first. From then on its pod is not healthy. Requests
//     overlap, and the API server does not carry them out in the order it
//     received them: an eviction that loses a conflict on the PDB's status
//     to a concurrent one reads the status again 500 ms later
//     (EvictionsRetry) and decides on that. The pod's own write orders
//     disruptions as etcd did, on the clock of every other change.
//   - A violation is a disruption of a pod that WasHealthy after which a
//     covering budget counts fewer healthy pods than it desires at every
//     moment of the request, from the time the API server received it
//     until it answered: the API server (or, for a delete, the client just
//     before) decides somewhere in between, so a pod of the budget that
//     was still Ready when the request arrived, or turned Ready before the
//     answer, or a desired count that fell, counted for it. At each moment
//     the count leaves out this pod and the pods of the disruptions that
//     took effect before this one did (not those received before it).
//     A disruption of a pod that a PUB's status records as disrupted
//     (status.disruptedPods) is judged from the moment that record
//     appeared, when it is at most 5 s older than the request: the
//     record, written before the request by the one who disrupts (or by
//     OpenKruise's webhook at admission, while the request is under way),
//     is the decision.
//     A pod that changed less than 10 ms before the request was received
//     counts, at that moment, as it was before the change: no component
//     could have seen the change when it decided (informers deliver a write
//     later, and the Eviction API decides on a status written after its
//     controller's informer saw it).
//     Deletes by controllers (a ReplicaSet
//     scaling down) are disruptions of ComponentOther and are judged the same
//     way.
//   - A budget is met once its status is known (desired > 0 or
//     observedGeneration > 0) and its healthy count reaches desired; from
//     then on every pod or budget event and every disruption updates the
//     lowest healthy count.
//
// # How it works
//
// While running, the auditor only records: each informer event with the
// time it arrived, and each log line. Finish merges both by time (the API
// server runs in the same process, so the clocks agree) and replays them,
// which makes the result deterministic for a given history.
package audit
