package audit

import (
	"cmp"
	"context"
	"slices"
	"time"

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
	pub    *pubObject
	// ReplicaSets, Deployments, StatefulSets.
	workloadKey workloadKey
	workload    *workload
}

func (o *observation) isPod() bool      { return o.podKey.name != "" }
func (o *observation) isBudget() bool   { return o.budget.Name != "" }
func (o *observation) isWorkload() bool { return o.workloadKey.name != "" }

type podKey struct{ namespace, name string }

// budgetState is a budget during the replay, for its summary.
type budgetState struct {
	ref         BudgetRef
	cov         coverage
	live        bool
	desired     int32
	statusKnown bool
	// out: the pods its status counts as disrupted (PDB disruptedPods; PUB
	// disruptedPods and unavailablePods).
	out map[string]bool
	pub bool

	met           bool
	lowest        int32
	lowestDesired int32
	disruptions   int
}

// step is an observation or a request in the merged timeline.
type step struct {
	at  time.Time
	obs *observation
	req *request
}

// replayer rebuilds the cluster's history from the informers' observations
// and the audit log's requests, merged by time: it finds the disruptions
// and refusals, and keeps each budget's lowest healthy count. The judge
// (judge.go) then decides on each disruption from the histories.
type replayer struct {
	opts *Options
	hist *histories

	pods     map[podKey]*corev1.Pod
	podsByNS map[string]map[string]*corev1.Pod
	// requested holds the pods a disruption was requested of (by the
	// audit log), from the request on: a second request adds nothing.
	// disrupted holds them once the disruption took effect: from then on
	// they are not healthy in the budgets' summaries.
	requested map[podKey]types.UID
	disrupted map[podKey]types.UID
	budgets   map[BudgetRef]*budgetState
	byNS      map[string]map[BudgetRef]*budgetState
	workloads map[workloadKey]workload

	// effects are the disruptions requested whose effect the replay has
	// not reached yet, by time.
	effects []*disruptionEffect

	// future holds, per pod, its observations not replayed yet, in order.
	future map[podKey][]*observation
	// accepted holds, per pod, when each request of it that the API
	// server accepted (2xx) was received, whoever sent it; collections,
	// per namespace, when each accepted deletecollection of pods was.
	accepted    map[podKey][]time.Time
	collections map[string][]time.Time

	cases  []*judgeCase
	result Result

	// series keeps each budget's count as track sees it, for
	// Auditor.HealthySeries only (series.go); nothing here reads it.
	series seriesRecorder
}

// disruptionEffect is a disruption the API server carried out, from the
// time the replay reached its request until it took effect: when the
// informers show its pod terminating, gone or replaced, or when the API
// server answered, whichever is first.
type disruptionEffect struct {
	at  time.Time
	key podKey
	uid types.UID
}

// replay merges observations and requests by time (observations first on
// a tie, then in the order they were recorded or logged) and returns what
// the auditor concludes, and each budget's healthy count over the run as
// the replay counted it (read-only; see series.go).
func replay(ctx context.Context, opts *Options, observations []observation, requests []request) (Result, []BudgetSeries) {
	steps := make([]step, 0, len(observations)+len(requests))
	for i := range observations {
		steps = append(steps, step{at: observations[i].at, obs: &observations[i]})
	}
	var writes []request
	for i := range requests {
		switch requests[i].kind {
		case pubStatusWrite:
			writes = append(writes, requests[i])
			continue
		}
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
		opts:        opts,
		hist:        newHistories(observations),
		pods:        map[podKey]*corev1.Pod{},
		podsByNS:    map[string]map[string]*corev1.Pod{},
		requested:   map[podKey]types.UID{},
		disrupted:   map[podKey]types.UID{},
		budgets:     map[BudgetRef]*budgetState{},
		byNS:        map[string]map[BudgetRef]*budgetState{},
		workloads:   map[workloadKey]workload{},
		future:      map[podKey][]*observation{},
		accepted:    map[podKey][]time.Time{},
		collections: map[string][]time.Time{},
		result: Result{
			Budgets:       []BudgetSummary{},
			Disruptions:   []Disruption{},
			Refusals:      []Refusal{},
			Violations:    []Violation{},
			Races:         []Race{},
			Disagreements: []Disagreement{},
		},
	}
	for _, s := range steps {
		if s.obs != nil && s.obs.isPod() {
			r.future[s.obs.podKey] = append(r.future[s.obs.podKey], s.obs)
		}
		if q := s.req; q != nil && !q.dryRun && q.code >= 200 && q.code <= 299 {
			if q.kind == podCollection {
				r.collections[q.namespace] = append(r.collections[q.namespace], q.received)
				continue
			}
			k := podKey{q.namespace, q.pod}
			r.accepted[k] = append(r.accepted[k], q.received)
		}
	}
	logger := klog.FromContext(ctx)
	for _, s := range steps {
		r.takeEffect(s.at)
		r.series.now = s.at
		switch {
		case s.req != nil:
			if s.req.kind == podDisruption {
				r.request(logger, s.req)
			}
		case s.obs.isPod():
			r.future[s.obs.podKey] = r.future[s.obs.podKey][1:]
			r.podObserved(s.obs)
		case s.obs.isBudget():
			r.budgetObserved(s.obs)
		case s.obs.isWorkload():
			r.workloadObserved(s.obs)
		}
	}
	r.takeEffect(time.Time{})
	r.summarize()
	j := &judge{opts: opts, hist: r.hist, cases: r.cases, writes: writes, requests: requests, result: &r.result}
	j.run(logger)
	return r.result, r.series.series()
}

func (r *replayer) podObserved(o *observation) {
	key := o.podKey
	old := r.pods[key]
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
	v := viewOf(o)
	if v == nil {
		b.live = false
	} else {
		b.live, b.cov, b.desired, b.statusKnown, b.out, b.pub = true, v.cov, v.desired, v.statusKnown, v.out, v.pub
	}
	if r.byNS[ref.Namespace] == nil {
		r.byNS[ref.Namespace] = map[BudgetRef]*budgetState{}
	}
	if b.live {
		r.byNS[ref.Namespace][ref] = b
		r.track(b, r.healthy(b))
	} else {
		delete(r.byNS[ref.Namespace], ref)
		r.series.gone(ref)
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

// goingAfter returns the first observation of the pod (UID uid) after the
// replay's current step that shows it terminating, gone or replaced.
func (r *replayer) goingAfter(key podKey, uid types.UID) *observation {
	for _, o := range r.future[key] {
		if o.pod == nil || o.pod.DeletionTimestamp != nil || o.pod.UID != uid {
			return o
		}
	}
	return nil
}

// carriedOutUnanswered reports whether req, answered with a server error
// (500, 503, 504: a timeout, a client that went away), was carried out all
// the same. The API server carries a disruption out whatever it answers
// once it has begun (an eviction whose client cancelled is answered 504 and
// still deletes the pod), so it is attributed by the pod's own deletion
// write: the pod is next seen terminating or gone, and no request the API
// server accepted (of the pod, whoever sent it, or a collection delete in
// its namespace) was received between this one and that write. There is
// no cut-off in time. It returns req, answered no earlier than the pod was
// seen going.
func (r *replayer) carriedOutUnanswered(key podKey, req *request) (request, bool) {
	if req.code < 500 {
		return request{}, false
	}
	cur := r.pods[key]
	if cur == nil || cur.DeletionTimestamp != nil {
		return request{}, false
	}
	o := r.goingAfter(key, cur.UID)
	if o == nil || (o.pod != nil && o.pod.UID != cur.UID) {
		return request{}, false // it stays, or was replaced under the same name: another write
	}
	explained := func(at time.Time) bool { return !at.Before(req.received) && !at.After(o.at) }
	if slices.ContainsFunc(r.accepted[key], explained) || slices.ContainsFunc(r.collections[key.namespace], explained) {
		return request{}, false // that request explains it
	}
	done := *req
	if o.at.After(done.answered) {
		done.answered = o.at
	}
	return done, true
}

// request finds whether one pod delete or eviction from the audit log is a
// disruption, and records it for the judge.
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
		WasPending: pre != nil && pre.Status.Phase == corev1.PodPending,
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
	c := &judgeCase{d: d, key: key, pre: pre, req: *req, seq: len(r.cases)}
	if o := r.goingAfter(key, pre.UID); o != nil {
		c.going = o.at
	}
	for _, b := range covering {
		c.budgets = append(c.budgets, &caseBudget{ref: b.ref})
	}
	r.cases = append(r.cases, c)
	at := req.answered
	if !c.going.IsZero() && c.going.Before(at) {
		at = c.going
	}
	e := &disruptionEffect{at: at, key: key, uid: pre.UID}
	i, _ := slices.BinarySearchFunc(r.effects, e.at, func(x *disruptionEffect, at time.Time) int {
		if x.at.After(at) {
			return 1
		}
		return -1 // equal times keep the order of the requests
	})
	r.effects = slices.Insert(r.effects, i, e)
}

// takeEffect carries out the disruptions whose effect is at or before now
// (all of them when now is zero): their pods stop being healthy for the
// budgets' summaries.
func (r *replayer) takeEffect(now time.Time) {
	for len(r.effects) > 0 && (now.IsZero() || !r.effects[0].at.After(now)) {
		e := r.effects[0]
		r.effects = r.effects[1:]
		r.series.now = e.at
		if uid, ok := r.requested[e.key]; !ok || uid != e.uid {
			continue // the pod is gone (and its replacement is another pod)
		}
		r.disrupted[e.key] = e.uid
		if p := r.pods[e.key]; p != nil {
			for _, b := range r.covering(p) {
				r.track(b, r.healthy(b))
			}
		}
	}
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
		if b.cov.covers(pod, lookupMap(r.workloads)) {
			out = append(out, b)
		}
	}
	slices.SortFunc(out, func(a, b *budgetState) int { return compareRefs(a.ref, b.ref) })
	return out
}

// healthy counts the pods b covers that its controller counts healthy
// (countsFor) and that are not disrupted according to the audit log.
func (r *replayer) healthy(b *budgetState) int32 {
	var n int32
	for name, p := range r.podsByNS[b.ref.Namespace] {
		if !countsFor(b.pub, b.out, name, p) {
			continue
		}
		if uid, ok := r.disrupted[podKey{b.ref.Namespace, name}]; ok && uid == p.UID {
			continue
		}
		if b.cov.covers(p, lookupMap(r.workloads)) {
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
	// Kept for the read-only series once track is done; it decides nothing.
	defer r.series.record(b, healthy)
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
			s.Short = s.LowestHealthy < s.Desired
		}
		r.result.Budgets = append(r.result.Budgets, s)
	}
	slices.SortFunc(r.result.Budgets, func(a, b BudgetSummary) int { return compareRefs(a.Budget, b.Budget) })
}

func compareRefs(a, b BudgetRef) int {
	return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}
