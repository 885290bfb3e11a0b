package audit

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// judgeCase is a disruption for the judge: the request, the pod as it was
// just before, when the pod was first seen going, and each budget that
// covered it.
type judgeCase struct {
	d       Disruption
	key     podKey
	pre     *corev1.Pod
	req     request
	seq     int
	going   time.Time // zero: never seen going
	budgets []*caseBudget
}

// caseBudget is how the judge decides a disruption for one budget (see
// docs/audit.md):
//   - decided is the decision: it orders the budget's disruptions;
//   - counted is when the budget is counted for it;
//   - known is the component's knowledge time, for the race rule.
type caseBudget struct {
	ref                     BudgetRef
	decided, counted, known time.Time
	exempt                  bool
	rank                    int
}

// pubRecord is a disruption record in a PUB's status that a component
// wrote (from the audit log), and that the PUB did not hold before.
type pubRecord struct {
	component Component
	budget    BudgetRef
	pod       string
	at        time.Time // the write was answered
	// expires is when the PUB's controller stops honouring the record:
	// pubRecordLife after the time its entry carries (after at, if that
	// does not parse or is later).
	expires time.Time
	// takenBack is when a later status write without the pod was received
	// (zero: never): from then on the record decides nothing.
	takenBack time.Time
	// first is the line of the component's first request of the pod
	// after the record (0: none), delay how long after the record it was
	// received.
	first int
	delay time.Duration
}

type judge struct {
	opts     *Options
	hist     *histories
	cases    []*judgeCase
	writes   []request
	requests []request
	result   *Result

	lag, maxLag time.Duration
	records     []*pubRecord
	delays      map[Component][]time.Duration
}

func (j *judge) run(logger klog.Logger) {
	j.measureLag()
	j.findRecords()
	byBudget := map[BudgetRef][]*judgedPair{}
	for _, c := range j.cases {
		for _, cb := range c.budgets {
			j.decide(c, cb)
			byBudget[cb.ref] = append(byBudget[cb.ref], &judgedPair{c: c, cb: cb})
		}
	}
	for _, pairs := range byBudget {
		slices.SortStableFunc(pairs, func(a, b *judgedPair) int {
			if c := a.cb.decided.Compare(b.cb.decided); c != 0 {
				return c
			}
			return a.c.seq - b.c.seq
		})
		for i, p := range pairs {
			p.cb.rank = i
		}
		for i, p := range pairs {
			j.judgeOne(logger, pairs[:i], p)
		}
	}
	byTime := func(a, b Disruption) int {
		if c := a.Time.Compare(b.Time); c != 0 {
			return c
		}
		return compareRefs(BudgetRef{Namespace: a.Namespace, Name: a.Pod}, BudgetRef{Namespace: b.Namespace, Name: b.Pod})
	}
	slices.SortStableFunc(j.result.Violations, func(a, b Violation) int {
		return byTime(a.Disruption, b.Disruption)*4 + compareRefs(a.Budget, b.Budget)
	})
	slices.SortStableFunc(j.result.Races, func(a, b Race) int { return byTime(a.Disruption, b.Disruption) })
	slices.SortStableFunc(j.result.Disagreements, func(a, b Disagreement) int { return byTime(a.Disruption, b.Disruption) })
}

type judgedPair struct {
	c  *judgeCase
	cb *caseBudget
}

// quantile99 is the nearest-rank 99th percentile of sorted samples.
func quantile99(sorted []time.Duration) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*99 + 99) / 100
	return sorted[min(max(i-1, 0), len(sorted)-1)]
}

// measureLag measures the informers' lag in this run: for each disruption
// the API server accepted (2xx) whose pod the informers showed going, how
// long after the answer they showed it (0 when before: the API server
// writes the pod before it answers). Every component's informers in the
// sandbox watch the same kube-apiserver as the auditor's; the auditor's
// lag stands for theirs.
func (j *judge) measureLag() {
	var samples []time.Duration
	for _, c := range j.cases {
		if c.going.IsZero() || c.req.code < 200 || c.req.code > 299 {
			continue
		}
		samples = append(samples, max(0, c.going.Sub(c.req.answered)))
	}
	slices.Sort(samples)
	j.lag = quantile99(samples)
	if n := len(samples); n > 0 {
		j.maxLag = samples[n-1]
	}
	j.result.Windows.InformerLag, j.result.Windows.MaxInformerLag, j.result.Windows.LagSamples = metav1.Duration{Duration: j.lag}, metav1.Duration{Duration: j.maxLag}, len(samples)
}

// findRecords finds the disruption records components wrote into PUB
// statuses, and each one's first request of the recorded pod by the same
// component.
func (j *judge) findRecords() {
	j.delays = map[Component][]time.Duration{}
	for _, w := range j.writes {
		if w.dryRun || w.code < 200 || w.code > 299 {
			continue
		}
		component, ignored := j.opts.classify(w.userAgent)
		if ignored {
			continue
		}
		ref := BudgetRef{Kind: KindPUB, Namespace: w.namespace, Name: w.pod}
		before := j.hist.budgetAt(ref, w.received)
		for _, pod := range w.recorded {
			if before != nil && before.out[pod] {
				continue // recorded already
			}
			since := w.answered
			if t, ok := w.recordedAt[pod]; ok && t.Before(since) {
				since = t
			}
			j.records = append(j.records, &pubRecord{component: component, budget: ref, pod: pod, at: w.answered, expires: since.Add(pubRecordLife)})
		}
	}
	for _, rec := range j.records {
		rec.takenBack = j.takenBack(rec)
		for i := range j.requests {
			q := &j.requests[i]
			if q.kind != podDisruption || q.dryRun || q.namespace != rec.budget.Namespace || q.pod != rec.pod || q.received.Before(rec.at) {
				continue
			}
			if !rec.takenBack.IsZero() && !q.received.Before(rec.takenBack) {
				continue // the record no longer stood: the request decided anew
			}
			if c, ignored := j.opts.classify(q.userAgent); ignored || c != rec.component {
				continue
			}
			if rec.first == 0 || q.received.Before(j.requestByLine(rec.first).received) {
				rec.first, rec.delay = q.line, q.received.Sub(rec.at)
			}
		}
		if rec.first != 0 {
			j.delays[rec.component] = append(j.delays[rec.component], rec.delay)
		}
	}
	for c, d := range j.delays {
		slices.Sort(d)
		if j.result.Windows.RecordDelays == nil {
			j.result.Windows.RecordDelays = map[Component][]metav1.Duration{}
		}
		for _, x := range d {
			j.result.Windows.RecordDelays[c] = append(j.result.Windows.RecordDelays[c], metav1.Duration{Duration: x})
		}
	}
}

// takenBack returns when the API server received the first status write
// of rec's PUB after rec that left rec's pod out of disruptedPods (a
// component taking its record back, or the PUB's controller removing
// it), or zero when none did. Only a write that replaces the status whole
// says so; by anyone, accepted and not a dry run.
func (j *judge) takenBack(rec *pubRecord) time.Time {
	var first time.Time
	for _, w := range j.writes {
		if !w.wholeStatus || w.dryRun || w.code < 200 || w.code > 299 || w.namespace != rec.budget.Namespace || w.pod != rec.budget.Name || w.received.Before(rec.at) {
			continue
		}
		if !slices.Contains(w.recorded, rec.pod) && (first.IsZero() || w.received.Before(first)) {
			first = w.received
		}
	}
	return first
}

func (j *judge) requestByLine(line int) *request {
	for i := range j.requests {
		if j.requests[i].line == line {
			return &j.requests[i]
		}
	}
	return &request{}
}

// pubRecordLife is how long OpenKruise's PUB controller honours a
// disruptedPods entry whose pod has not gone: it drops the entry once its
// time plus DeletionTimeout (20 s) has passed
// (pkg/controller/podunavailablebudget, DeletionTimeout).
const pubRecordLife = 20 * time.Second

// qualifies reports whether rec counts as the decision of its component's
// request on line: that request is the component's first of the pod after
// the record, received while the record stood (not taken back, and within
// its life as the PUB's controller honours it). OpenKruise's webhook lets
// a pod its PUB records as disrupted go without a further check
// (pkg/control/pubcontrol/pub_control_utils.go, isPodRecordedInPub): the
// record is the budget's spending, and what changes after it counts
// against the count at the request, not against the decision.
func (j *judge) qualifies(rec *pubRecord, line int) bool {
	return rec.first == line && !j.requestByLine(line).received.After(rec.expires)
}

// decide sets a disruption's decision, counting and knowledge times for a
// budget, and whether the budget's webhook exempts it.
func (j *judge) decide(c *judgeCase, cb *caseBudget) {
	received := c.req.received
	cb.decided, cb.counted, cb.known = received, received, received
	switch cb.ref.Kind {
	case KindPDB:
		if c.req.action != ActionEvict {
			return // a delete: when the API server received it
		}
		// The Eviction API decides when it writes the pod into the PDB's
		// status.disruptedPods (pkg/registry/core/pod/storage/eviction.go,
		// checkAndDecrement): the first status that holds it, seen no later
		// than the informers' largest lag after the answer.
		obs := j.hist.budgets[cb.ref]
		for i := lastAt(len(obs), func(i int) time.Time { return obs[i].at }, received) + 1; i < len(obs); i++ {
			if obs[i].at.After(c.req.answered.Add(j.maxLag)) {
				break
			}
			if v := obs[i].v; v != nil && v.out[c.key.name] {
				at := obs[i].at
				if at.After(c.req.answered) {
					at = c.req.answered
				}
				cb.decided, cb.counted = at, at
				return
			}
		}
	case KindPUB:
		if v := j.hist.budgetAt(cb.ref, received); v != nil && v.exempt.exempts(c.pre, c.req.action) {
			cb.exempt = true
		}
		var rec *pubRecord
		for _, r := range j.records {
			if r.component == c.d.Component && r.budget == cb.ref && r.pod == c.key.name && !r.at.After(received) && (rec == nil || r.at.After(rec.at)) {
				rec = r
			}
		}
		if rec != nil && j.qualifies(rec, c.req.line) {
			// Decided at the record; counted at the request, with the pods
			// as they are then.
			cb.decided, cb.known = rec.at, rec.at
		}
	}
}

// count is how many pods budget ref counts healthy at t (view v), leaving
// out the pods of excl.
func (j *judge) count(ref BudgetRef, v *budgetView, t time.Time, excl map[types.UID]bool) int32 {
	var n int32
	wl := j.hist.workloadsAt(t)
	for _, name := range j.hist.podNames[ref.Namespace] {
		p := j.hist.podAt(podKey{ref.Namespace, name}, t)
		if p == nil || excl[p.UID] || !countsFor(v.pub, v.out, name, p) || !v.cov.covers(p, wl) {
			continue
		}
		n++
	}
	return n
}

// unhealthyProtected reports whether pod, not healthy, is one a PDB's
// unhealthy-pod eviction policy governs: running (not Pending, Succeeded
// or Failed) and not terminating, so that the Eviction API consults the
// PDB for it (pkg/registry/core/pod/storage/eviction.go, canIgnorePDB).
// Under IfHealthyBudget such a pod may go only while the budget is whole
// without it (KEP-3017): the judge counts it like a healthy pod's
// disruption, whose count it does not lower.
func unhealthyProtected(pod *corev1.Pod) bool {
	if pod == nil || pod.DeletionTimestamp != nil {
		return false
	}
	switch pod.Status.Phase {
	case corev1.PodPending, corev1.PodSucceeded, corev1.PodFailed:
		return false
	}
	return true
}

// judgeOne decides p, given the disruptions of its budget decided before
// it: a disruption of a healthy pod, and one of a running, not-Ready pod
// under a PDB whose unhealthy-pod eviction policy is not AlwaysAllow.
func (j *judge) judgeOne(logger klog.Logger, before []*judgedPair, p *judgedPair) {
	c, cb := p.c, p.cb
	if cb.exempt || (cb.ref.Kind == KindPUB && !pubAvailable(c.pre)) {
		return
	}
	v := j.hist.budgetAt(cb.ref, cb.counted)
	if v == nil {
		return // deleted by then
	}
	if judged := c.d.WasHealthy || (cb.ref.Kind == KindPDB && !v.alwaysAllow && unhealthyProtected(c.pre)); !judged {
		return
	}
	excl := map[types.UID]bool{c.pre.UID: true}
	for _, b := range before {
		excl[b.c.pre.UID] = true
	}
	healthy := j.count(cb.ref, v, cb.counted, excl)
	if healthy >= v.desired {
		j.crossCheck(c, cb, healthy, v.desired)
		return
	}
	// Short. What could the component know? Its view at its knowledge
	// time is the cluster as it was at some moment of the informers' lag
	// before it: the budget at each such moment (the window's start, and
	// every change of the budget or of a pod in its namespace inside it),
	// less its own disruptions decided before and the others' decided by
	// then. Whole at any of them: a race.
	k := cb.known.Add(-j.lag)
	var known, knownDesired int32
	var vk *budgetView
	raced := false
	for _, t := range j.windowMoments(cb.ref, k, cb.known) {
		v := j.hist.budgetAt(cb.ref, t)
		if v == nil {
			raced = true
			break
		}
		exclK := map[types.UID]bool{c.pre.UID: true}
		for _, b := range before {
			if b.c.d.Component == c.d.Component || !b.cb.decided.After(t) {
				exclK[b.c.pre.UID] = true
			}
		}
		n := j.count(cb.ref, v, t, exclK)
		if vk == nil || n >= v.desired {
			known, knownDesired, vk = n, v.desired, v
		}
		if n >= v.desired {
			raced = true
			break
		}
	}
	if raced {
		logger.V(2).Info("Disruption raced a change inside the informers' lag", "budget", cb.ref, "pod", klog.KRef(c.key.namespace, c.key.name), "healthy", healthy, "desired", v.desired, "knownHealthy", known, "lag", j.lag)
		j.result.Races = append(j.result.Races, Race{Budget: cb.ref, Disruption: c.d, Healthy: healthy, Desired: v.desired, KnownHealthy: known, KnownDesired: knownDesired})
		return
	}
	if logger.V(2).Enabled() {
		logger.V(2).Info("Disruption left its budget short", "budget", cb.ref, "pod", klog.KRef(c.key.namespace, c.key.name),
			"component", c.d.Component, "action", c.d.Action, "received", c.req.received, "answered", c.req.answered,
			"decided", cb.decided, "counted", cb.counted, "known", cb.known, "lag", j.lag,
			"healthy", healthy, "desired", v.desired, "knownHealthy", known, "knownDesired", knownDesired,
			"atCount", j.explainCount(cb.ref, v, cb.counted, before), "atKnowledge", j.explainCount(cb.ref, vk, k, before))
	}
	j.result.Violations = append(j.result.Violations, Violation{Budget: cb.ref, Disruption: c.d, Healthy: healthy, Desired: v.desired})
}

// windowMoments returns the moments at which the judge counts budget ref
// for a component's view in [from, to]: from, and every observation of
// the budget or of a pod in its namespace after from and no later than
// to, in order.
func (j *judge) windowMoments(ref BudgetRef, from, to time.Time) []time.Time {
	moments := []time.Time{from}
	add := func(at time.Time) {
		if at.After(from) && !at.After(to) {
			moments = append(moments, at)
		}
	}
	for _, o := range j.hist.budgets[ref] {
		add(o.at)
	}
	for _, name := range j.hist.podNames[ref.Namespace] {
		for _, o := range j.hist.pods[podKey{ref.Namespace, name}] {
			add(o.at)
		}
	}
	slices.SortFunc(moments[1:], func(a, b time.Time) int { return a.Compare(b) })
	return slices.Compact(moments)
}

// explainCount says, pod by pod, how the judge counts budget ref at t
// (view v): which pods it counts, which it leaves out and why. It is
// the judge's reasoning for a violation, logged; it decides nothing.
func (j *judge) explainCount(ref BudgetRef, v *budgetView, t time.Time, before []*judgedPair) []string {
	if v == nil {
		return []string{"budget not seen then"}
	}
	decidedBefore := map[types.UID]*judgedPair{}
	for _, b := range before {
		decidedBefore[b.c.pre.UID] = b
	}
	var out []string
	wl := j.hist.workloadsAt(t)
	for _, name := range j.hist.podNames[ref.Namespace] {
		p := j.hist.podAt(podKey{ref.Namespace, name}, t)
		if p == nil || !v.cov.covers(p, wl) {
			continue
		}
		why := "counted"
		switch b := decidedBefore[p.UID]; {
		case b != nil:
			why = fmt.Sprintf("left out: its %s by %s was decided before, at %s (received %s)", b.c.d.Action, b.c.d.Component,
				b.cb.decided.Format(time.RFC3339Nano), b.c.req.received.Format(time.RFC3339Nano))
		case v.out[name]:
			why = "left out: in the status's disrupted or unavailable pods"
		case !countsFor(v.pub, nil, name, p):
			why = fmt.Sprintf("left out: not available (phase %s, deleting %v, ready %v)", p.Status.Phase, p.DeletionTimestamp != nil, podHealthy(p))
		}
		out = append(out, fmt.Sprintf("%s rv=%s: %s", name, p.ResourceVersion, why))
	}
	return out
}

// crossCheck compares a disruption by budgetguard that the judge found
// clean with the budget's own status: the first status seen after the pod
// went. If that status counts fewer healthy pods than it desires, no more
// than the judge's desired count, and no other pod of the budget stopped
// counting between the decision and that status, the judge and the
// budget's controller disagree.
func (j *judge) crossCheck(c *judgeCase, cb *caseBudget, healthy, desired int32) {
	if c.d.Component != ComponentScheduler && c.d.Component != ComponentDescheduler || c.going.IsZero() {
		return
	}
	obs := j.hist.budgets[cb.ref]
	var s *budgetObs
	for i := lastAt(len(obs), func(i int) time.Time { return obs[i].at }, c.going.Add(-time.Nanosecond)) + 1; i < len(obs); i++ {
		if obs[i].v == nil {
			return
		}
		if obs[i].v.statusKnown {
			s = &obs[i]
			break
		}
	}
	if s == nil || s.v.current >= s.v.desired || s.v.desired > desired {
		return
	}
	vj := j.hist.budgetAt(cb.ref, cb.counted)
	wl := j.hist.workloadsAt(cb.counted)
	for _, name := range j.hist.podNames[cb.ref.Namespace] {
		k := podKey{cb.ref.Namespace, name}
		if k == c.key {
			continue
		}
		p := j.hist.podAt(k, cb.counted)
		if p == nil || !countsFor(vj.pub, vj.out, name, p) || !vj.cov.covers(p, wl) {
			continue
		}
		if s.v.out[name] {
			return // another disruption of the budget, in its status
		}
		for _, o := range j.hist.pods[k] {
			if o.at.After(cb.counted) && !o.at.After(s.at) && (o.pod == nil || o.pod.UID != p.UID || !countsFor(vj.pub, nil, name, o.pod)) {
				return // it stopped counting in between
			}
		}
	}
	j.result.Disagreements = append(j.result.Disagreements, Disagreement{
		Budget: cb.ref, Disruption: c.d, Healthy: healthy, Desired: desired,
		StatusHealthy: s.v.current, StatusDesired: s.v.desired, StatusTime: s.at,
	})
}
