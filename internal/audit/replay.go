package audit

import (
	"cmp"
	"context"
	"slices"
	"time"

	kruisepolicy "github.com/openkruise/kruise-api/policy/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// observation is one informer event, stamped with the time the auditor saw
// it. Exactly one of the object pointers is set, or none for a deletion of
// the object named by kind and key.
type observation struct {
	at  time.Time
	seq int

	// Pods.
	podKey podKey
	pod    *corev1.Pod
	// PDBs and PUBs.
	budget BudgetRef
	pdb    *policyv1.PodDisruptionBudget
	pub    *kruisepolicy.PodUnavailableBudget
	// ReplicaSets, Deployments, StatefulSets.
	workloadKey workloadKey
	workload    *workload
}

func (o *observation) isPod() bool      { return o.podKey.name != "" }
func (o *observation) isBudget() bool   { return o.budget.Name != "" }
func (o *observation) isWorkload() bool { return o.workloadKey.name != "" }

type podKey struct{ namespace, name string }

// pendingViolation is a disruption that left budget short when the API
// server received it; it is a violation unless the budget is whole again
// before the API server answered.
type pendingViolation struct {
	budget   *budgetState
	answered time.Time
	v        Violation
}

// budgetState is a budget during the replay.
type budgetState struct {
	ref         BudgetRef
	cov         coverage
	live        bool
	desired     int32
	statusKnown bool

	met           bool
	lowest        int32
	lowestDesired int32
	disruptions   int

	// admitted holds, for a PUB, the pods its status records as disrupted
	// (status.disruptedPods) and what the budget looked like when the
	// record first appeared: see admissionWindow.
	admitted map[string]admission
}

// admission is the record of a pod's disruption in a PUB's status, and the
// budget's healthy pods when it appeared.
type admission struct {
	at   time.Time
	uid  types.UID
	snap snapshot
}

// admissionWindow bounds how long before a request a PUB's record of its
// pod's disruption counts as the moment it was decided. No API server checks
// a PUB: the one who disrupts writes the record into the PUB's status first,
// as OpenKruise's webhook does at admission, and that write is the decision;
// the request follows (a round trip later, longer when the API server is
// slow). A disruption of such a pod is judged from the record on, as an
// eviction is judged from the time the API server received it.
const admissionWindow = 5 * time.Second

// step is an observation or a request in the merged timeline.
type step struct {
	at  time.Time
	obs *observation
	req *request
}

// replayer rebuilds the cluster's history from the informers' observations
// and the audit log's requests, merged by time, and judges every request.
type replayer struct {
	opts *Options

	pods     map[podKey]*corev1.Pod
	podsByNS map[string]map[string]*corev1.Pod
	// requested holds the pods a disruption was requested of (by the
	// audit log), from the request on: a second request adds nothing.
	// disrupted holds them once the disruption took effect (see
	// disruptionEffect): from then on they are not healthy.
	requested map[podKey]types.UID
	disrupted map[podKey]types.UID
	// carriedOut holds every pod (by UID) whose disruption took effect.
	// Unlike disrupted, it keeps a pod once the pod is gone: a snapshot
	// taken before that still holds it, and it must not count as healthy
	// when a later disruption is judged on that snapshot.
	carriedOut map[types.UID]bool
	budgets    map[BudgetRef]*budgetState
	byNS       map[string]map[BudgetRef]*budgetState
	workloads  map[workloadKey]workload

	// pending are the disruptions that leave a budget short, until the
	// replay passes the time the API server answered them: a pod of the
	// budget that turns healthy before then (or a lower desired count)
	// counted for the API server's decision, made somewhere in between.
	pending []*pendingViolation

	// effects are the disruptions requested whose effect the replay has
	// not reached yet, by time.
	effects []*disruptionEffect

	// future holds, per pod, its observations not replayed yet, in order;
	// the look-ahead for a disrupted pod's last state reads them.
	future map[podKey][]*observation
	// accepted holds, per pod, when each request of it that the API
	// server accepted (2xx) was received.
	accepted map[podKey][]time.Time
	// changed holds, per namespace and pod name, when the pod last changed
	// and its state before (see asKnown).
	changed map[string]map[string]podChange

	result Result
}

// replay merges observations and requests by time (observations first on
// a tie, then in the order they were recorded or logged) and returns what
// the auditor concludes.
func replay(ctx context.Context, opts *Options, observations []observation, requests []request) Result {
	steps := make([]step, 0, len(observations)+len(requests))
	for i := range observations {
		steps = append(steps, step{at: observations[i].at, obs: &observations[i]})
	}
	for i := range requests {
		steps = append(steps, step{at: requests[i].received, req: &requests[i]})
	}
	slices.SortStableFunc(steps, func(a, b step) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		switch {
		case a.obs != nil && b.obs != nil:
			return cmp.Compare(a.obs.seq, b.obs.seq)
		case a.req != nil && b.req != nil:
			return cmp.Compare(a.req.line, b.req.line)
		case a.obs != nil:
			return -1
		default:
			return 1
		}
	})

	r := &replayer{
		opts:       opts,
		pods:       map[podKey]*corev1.Pod{},
		podsByNS:   map[string]map[string]*corev1.Pod{},
		requested:  map[podKey]types.UID{},
		disrupted:  map[podKey]types.UID{},
		carriedOut: map[types.UID]bool{},
		budgets:    map[BudgetRef]*budgetState{},
		byNS:       map[string]map[BudgetRef]*budgetState{},
		workloads:  map[workloadKey]workload{},
		future:     map[podKey][]*observation{},
		accepted:   map[podKey][]time.Time{},
		changed:    map[string]map[string]podChange{},
		result: Result{
			Budgets:     []BudgetSummary{},
			Disruptions: []Disruption{},
			Refusals:    []Refusal{},
			Violations:  []Violation{},
		},
	}
	for _, s := range steps {
		if s.obs != nil && s.obs.isPod() {
			r.future[s.obs.podKey] = append(r.future[s.obs.podKey], s.obs)
		}
		if q := s.req; q != nil && !q.dryRun && q.code >= 200 && q.code <= 299 {
			k := podKey{q.namespace, q.pod}
			r.accepted[k] = append(r.accepted[k], q.received)
		}
	}
	logger := klog.FromContext(ctx)
	for _, s := range steps {
		r.takeEffect(s.at)
		r.settle(s.at)
		switch {
		case s.req != nil:
			r.request(logger, s.req)
		case s.obs.isPod():
			r.future[s.obs.podKey] = r.future[s.obs.podKey][1:]
			r.podObserved(s.obs)
		case s.obs.isBudget():
			r.budgetObserved(s.obs)
		case s.obs.isWorkload():
			r.workloadObserved(s.obs)
		}
		r.recheck()
		for _, e := range r.effects {
			r.snapshot(e)
		}
	}
	r.takeEffect(time.Time{})
	r.settle(time.Time{})
	slices.SortStableFunc(r.result.Violations, func(a, b Violation) int { return a.Disruption.Time.Compare(b.Disruption.Time) })
	r.summarize()
	return r.result
}

func (r *replayer) podObserved(o *observation) {
	key := o.podKey
	old := r.pods[key]
	// The state before the changes of the last knowledgeLag (see
	// asKnown).
	changed := r.changed[key.namespace]
	if changed == nil {
		changed = map[string]podChange{}
		r.changed[key.namespace] = changed
	}
	if c, ok := changed[key.name]; !ok || !c.at.After(o.at.Add(-knowledgeLag)) {
		changed[key.name] = podChange{at: o.at, before: old}
	}
	if o.pod == nil {
		delete(r.pods, key)
		delete(r.podsByNS[key.namespace], key.name)
	} else {
		r.pods[key] = o.pod
		if r.podsByNS[key.namespace] == nil {
			r.podsByNS[key.namespace] = map[string]*corev1.Pod{}
		}
		r.podsByNS[key.namespace][key.name] = o.pod
	}
	for _, m := range []map[podKey]types.UID{r.requested, r.disrupted} {
		if uid, ok := m[key]; ok && (o.pod == nil || o.pod.UID != uid) {
			delete(m, key)
		}
	}
	affected := map[BudgetRef]*budgetState{}
	for _, p := range []*corev1.Pod{old, o.pod} {
		if p == nil {
			continue
		}
		for _, b := range r.covering(p) {
			affected[b.ref] = b
		}
	}
	for _, b := range affected {
		r.track(b, r.healthy(b))
	}
}

func (r *replayer) budgetObserved(o *observation) {
	ref := o.budget
	b := r.budgets[ref]
	if b == nil {
		b = &budgetState{ref: ref}
		r.budgets[ref] = b
	}
	switch {
	case o.pdb != nil:
		b.live = true
		b.cov = pdbCoverage(o.pdb)
		b.desired = o.pdb.Status.DesiredHealthy
		b.statusKnown = o.pdb.Status.ObservedGeneration > 0 || b.desired > 0
	case o.pub != nil:
		b.live = true
		b.cov = pubCoverage(o.pub)
		b.desired = o.pub.Status.DesiredAvailable
		b.statusKnown = o.pub.Status.ObservedGeneration > 0 || b.desired > 0
		r.admit(b, o)
	default:
		b.live = false
	}
	if r.byNS[ref.Namespace] == nil {
		r.byNS[ref.Namespace] = map[BudgetRef]*budgetState{}
	}
	if b.live {
		r.byNS[ref.Namespace][ref] = b
		r.track(b, r.healthy(b))
	} else {
		delete(r.byNS[ref.Namespace], ref)
	}
}

func (r *replayer) workloadObserved(o *observation) {
	if o.workload == nil {
		delete(r.workloads, o.workloadKey)
	} else {
		r.workloads[o.workloadKey] = *o.workload
	}
	for _, b := range r.byNS[o.workloadKey.namespace] {
		if b.cov.target != nil {
			r.track(b, r.healthy(b))
		}
	}
}

// unknownOutcomeSlack bounds how long after a request answered with a
// server error its pod may be seen terminating for the request to count as
// carried out (see carriedOutUnanswered).
const unknownOutcomeSlack = 2 * time.Second

// carriedOutUnanswered reports whether req, answered with a server error
// (500, 503, 504: a timeout, a client that went away), was carried out all
// the same: its pod is seen terminating or gone while it was under way or
// shortly after, and no accepted request of the pod explains it. The API
// server carries a disruption out whatever it answers once it has begun (an
// eviction whose client cancelled is answered 504 and still deletes the
// pod). It returns req, answered when the pod was seen going.
func (r *replayer) carriedOutUnanswered(key podKey, req *request) (request, bool) {
	if req.code < 500 {
		return request{}, false
	}
	cur := r.pods[key]
	if cur == nil || cur.DeletionTimestamp != nil {
		return request{}, false
	}
	for _, o := range r.future[key] {
		if o.at.After(req.answered.Add(unknownOutcomeSlack)) {
			return request{}, false
		}
		if o.pod != nil && o.pod.UID == cur.UID && o.pod.DeletionTimestamp == nil {
			continue
		}
		for _, at := range r.accepted[key] {
			if !at.Before(req.received) && !at.After(o.at) {
				return request{}, false // that request explains it
			}
		}
		done := *req
		done.answered = o.at
		if done.answered.Before(req.answered) {
			done.answered = req.answered
		}
		return done, true
	}
	return request{}, false
}

// request judges one pod delete or eviction from the audit log.
func (r *replayer) request(logger klog.Logger, req *request) {
	if req.dryRun {
		return
	}
	component, ignored := r.opts.classify(req.userAgent)
	if ignored {
		return
	}
	key := podKey{req.namespace, req.pod}
	if req.code < 200 || req.code > 299 {
		if done, ok := r.carriedOutUnanswered(key, req); ok {
			// Answered 5xx, yet carried out: a disruption.
			logger.V(2).Info("Request answered with a server error was carried out", "action", req.action, "pod", klog.KRef(req.namespace, req.pod), "code", req.code, "userAgent", req.userAgent)
			req = &done
		} else {
			r.result.Refusals = append(r.result.Refusals, Refusal{
				Time: req.received, Component: component, UserAgent: req.userAgent, Action: req.action,
				Namespace: req.namespace, Pod: req.pod, Code: req.code, Message: req.message,
			})
			return
		}
	}
	cur := r.pods[key]
	pre := r.lastStateBefore(key, cur)
	uid, requested := r.requested[key]
	if (cur != nil && cur.DeletionTimestamp != nil) || (pre != nil && requested && uid == pre.UID) {
		// Already terminating or already disrupted: nothing new is taken away.
		logger.V(4).Info("Request on a pod that was already going", "action", req.action, "pod", klog.KRef(req.namespace, req.pod), "userAgent", req.userAgent)
		return
	}
	d := Disruption{
		Time: req.received, Component: component, UserAgent: req.userAgent, Action: req.action,
		Namespace: req.namespace, Pod: req.pod, Budgets: []BudgetRef{},
		WasHealthy: podHealthy(pre),
	}
	if pre == nil {
		logger.V(2).Info("Disrupted pod was never observed; no budget is charged", "action", req.action, "pod", klog.KRef(req.namespace, req.pod))
		r.result.Disruptions = append(r.result.Disruptions, d)
		return
	}
	r.requested[key] = pre.UID
	covering := r.covering(pre)
	for _, b := range covering {
		d.Budgets = append(d.Budgets, b.ref)
		b.disruptions++
	}
	r.result.Disruptions = append(r.result.Disruptions, d)
	e := &disruptionEffect{at: r.effectTime(key, pre, req), key: key, uid: pre.UID, answered: req.answered, d: d}
	for _, b := range covering {
		j := &judgement{budget: b}
		if known, ok := r.asKnown(b, req.received); ok {
			j.snaps = append(j.snaps, known)
		}
		if a, ok := b.admitted[req.pod]; ok && a.uid == pre.UID && !a.at.Before(req.received.Add(-admissionWindow)) {
			j.snaps = append(j.snaps, a.snap)
		}
		e.judged = append(e.judged, j)
	}
	i, _ := slices.BinarySearchFunc(r.effects, e.at, func(x *disruptionEffect, at time.Time) int {
		if x.at.After(at) {
			return 1
		}
		return -1 // equal times keep the order of the requests
	})
	r.effects = slices.Insert(r.effects, i, e)
	r.snapshot(e)
}

// recheck drops the pending violations whose budget is whole again: the
// API server, which had not answered yet, may have decided then.
func (r *replayer) recheck() {
	r.pending = slices.DeleteFunc(r.pending, func(p *pendingViolation) bool {
		if !p.budget.live {
			return true
		}
		healthy := r.healthy(p.budget)
		p.v.Healthy = max(p.v.Healthy, healthy)
		return healthy >= p.budget.desired
	})
}

// settle makes violations of the pending disruptions the API server
// answered before now (all of them when now is zero).
func (r *replayer) settle(now time.Time) {
	r.pending = slices.DeleteFunc(r.pending, func(p *pendingViolation) bool {
		if !now.IsZero() && !p.answered.Before(now) {
			return false
		}
		r.result.Violations = append(r.result.Violations, p.v)
		return true
	})
}

// lastStateBefore returns the pod as it was just before a disruption that
// the replay has reached: its current state, or a later observation of the
// same pod that is not yet terminating. The informers see changes a little
// after the API server makes them; every such observation before the
// termination shows a write that the API server made before the
// disruption's own write, because the disruption's write is the one that
// makes the pod terminating (or deletes it).
func (r *replayer) lastStateBefore(key podKey, cur *corev1.Pod) *corev1.Pod {
	pre := cur
	var uid types.UID
	if cur != nil {
		uid = cur.UID
	}
	for _, o := range r.future[key] {
		if o.pod == nil || o.pod.DeletionTimestamp != nil {
			break
		}
		if uid != "" && o.pod.UID != uid {
			break
		}
		uid = o.pod.UID
		pre = o.pod
	}
	return pre
}

// covering returns the live budgets that cover pod, sorted by reference.
func (r *replayer) covering(pod *corev1.Pod) []*budgetState {
	var out []*budgetState
	for _, b := range r.byNS[pod.Namespace] {
		if b.cov.covers(pod, r.workloads) {
			out = append(out, b)
		}
	}
	slices.SortFunc(out, func(a, b *budgetState) int { return compareRefs(a.ref, b.ref) })
	return out
}

// healthy counts the pods b covers that are Ready, not terminating and not
// disrupted according to the audit log.
func (r *replayer) healthy(b *budgetState) int32 {
	var n int32
	for name, p := range r.podsByNS[b.ref.Namespace] {
		if !podHealthy(p) {
			continue
		}
		if uid, ok := r.disrupted[podKey{b.ref.Namespace, name}]; ok && uid == p.UID {
			continue
		}
		if b.cov.covers(p, r.workloads) {
			n++
		}
	}
	return n
}

// track records healthy as b's current healthy count: the budget is met
// once its status asks for at least one healthy pod and healthy reaches
// that, and from then on the lowest healthy count is kept. A status that
// asks for nothing does not count: the disruption controller writes
// desired 0 for a PDB created before its pods, and a budget met at 0/0
// would keep 0 as its lowest count for the whole run.
func (r *replayer) track(b *budgetState, healthy int32) {
	if !b.live {
		return
	}
	if !b.met {
		if b.statusKnown && b.desired > 0 && healthy >= b.desired {
			b.met = true
			b.lowest = healthy
			b.lowestDesired = b.desired
		}
		return
	}
	if healthy < b.lowest {
		b.lowest = healthy
		b.lowestDesired = b.desired
	}
}

func (r *replayer) summarize() {
	for _, b := range r.budgets {
		s := BudgetSummary{Budget: b.ref, Met: b.met, Disruptions: b.disruptions, Desired: b.desired}
		if b.met {
			s.LowestHealthy = b.lowest
			s.Desired = b.lowestDesired
		}
		r.result.Budgets = append(r.result.Budgets, s)
	}
	slices.SortFunc(r.result.Budgets, func(a, b BudgetSummary) int { return compareRefs(a.Budget, b.Budget) })
}

func compareRefs(a, b BudgetRef) int {
	return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}
