package audit

import (
	"cmp"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// disruptionEffect is a disruption the API server carried out, from the
// time the replay reached its request until the time it took effect
// (effectTime): from then on its pod is not healthy, and its budgets are
// judged.
type disruptionEffect struct {
	at       time.Time
	key      podKey
	uid      types.UID
	answered time.Time
	d        Disruption
	judged   []*judgement
}

// judgement is what a disruption's budget looked like between the request
// and the disruption's effect: the healthy pods it covered and the count it
// desired, after each step of the replay.
type judgement struct {
	budget *budgetState
	snaps  []snapshot
}

type snapshot struct {
	healthy []podUID
	desired int32
}

type podUID struct {
	key podKey
	uid types.UID
}

// effectTime is when the disruption of pod (as pre) that req asked for
// takes effect in the replay: when the informers show the pod terminating,
// gone or replaced, or when the API server answered, whichever is first.
//
// The API server carries a disruption out somewhere between receiving the
// request and answering it, and requests overlap: an eviction that loses a
// conflict on the PDB's status to a concurrent one waits (EvictionsRetry,
// 500 ms), reads the status again and decides on it, so it may take effect
// long after a request received later. The time it was received does not
// order disruptions; the pod's own write does: the informers deliver it in
// the order of etcd's writes, on the same clock as every other pod and
// budget change the replay counts.
func (r *replayer) effectTime(key podKey, pre *corev1.Pod, req *request) time.Time {
	for _, o := range r.future[key] {
		if o.pod == nil || o.pod.DeletionTimestamp != nil || o.pod.UID != pre.UID {
			if o.at.Before(req.answered) {
				return o.at
			}
			break
		}
	}
	return req.answered
}

// snapshot records, for each budget of e that is judged, the covered pods
// that are Ready and not terminating now, whether or not a disruption of
// theirs took effect: which disruptions count is decided when e takes
// effect.
func (r *replayer) snapshot(e *disruptionEffect) {
	if !e.d.WasHealthy {
		return
	}
	for _, j := range e.judged {
		b := j.budget
		if !b.live {
			continue
		}
		s := r.healthyNow(b)
		if n := len(j.snaps); n > 0 && j.snaps[n-1].desired == s.desired && slices.EqualFunc(sortedPods(j.snaps[n-1].healthy), sortedPods(s.healthy), func(a, b podUID) bool { return a == b }) {
			continue
		}
		j.snaps = append(j.snaps, s)
	}
}

// healthyNow is b's covered pods that are Ready and not terminating now,
// and its desired count.
func (r *replayer) healthyNow(b *budgetState) snapshot {
	s := snapshot{desired: b.desired}
	for name, p := range r.podsByNS[b.ref.Namespace] {
		if podHealthy(p) && b.cov.covers(p, r.workloads) {
			s.healthy = append(s.healthy, podUID{podKey{b.ref.Namespace, name}, p.UID})
		}
	}
	return s
}

// knowledgeLag bounds how long after a pod's write any component can have
// it: informers deliver it that much later, and a disruption is decided
// some time before its request reaches the API server (the Eviction API
// itself decides on a budget status its controller wrote after its own
// informer saw the pod). A pod that changed less than this before a
// request is judged as it was before the change: no check, budgetguard's
// or the API server's, could have seen it. Seen in make soak: a pod turned
// not Ready 0 to 3.5 ms before an eviction was received.
const knowledgeLag = 10 * time.Millisecond

// podChange is a pod's last change (when a change follows another within
// knowledgeLag, the first's): when, and the pod before it (nil: it did not
// exist).
type podChange struct {
	at     time.Time
	before *corev1.Pod
}

// asKnown is b's covered healthy pods as the informers had them
// knowledgeLag before at, and reports whether any pod changed since (if
// none did, the snapshot at the request says the same).
func (r *replayer) asKnown(b *budgetState, at time.Time) (snapshot, bool) {
	since := at.Add(-knowledgeLag)
	s := snapshot{desired: b.desired}
	changed := false
	seen := map[string]bool{}
	add := func(name string, p *corev1.Pod) {
		if p != nil && podHealthy(p) && b.cov.covers(p, r.workloads) {
			s.healthy = append(s.healthy, podUID{podKey{b.ref.Namespace, name}, p.UID})
		}
	}
	recent := r.changed[b.ref.Namespace]
	for name, p := range r.podsByNS[b.ref.Namespace] {
		seen[name] = true
		if c, ok := recent[name]; ok && c.at.After(since) {
			changed = true
			p = c.before
		}
		add(name, p)
	}
	for name, c := range recent {
		if !seen[name] && c.at.After(since) {
			changed = true
			add(name, c.before) // gone since
		}
	}
	return s, changed
}

// admit follows the disruption records of a PUB's status (o): a pod newly
// recorded is remembered with the budget as it is now, which is when its
// disruption was decided (see admissionWindow); a record that went is
// forgotten.
func (r *replayer) admit(b *budgetState, o *observation) {
	recorded := o.pub.Status.DisruptedPods
	for name := range b.admitted {
		if _, ok := recorded[name]; !ok {
			delete(b.admitted, name)
		}
	}
	for name := range recorded {
		if _, ok := b.admitted[name]; ok {
			continue
		}
		p := r.pods[podKey{b.ref.Namespace, name}]
		if p == nil {
			continue
		}
		if b.admitted == nil {
			b.admitted = map[string]admission{}
		}
		b.admitted[name] = admission{at: o.at, uid: p.UID, snap: r.healthyNow(b)}
	}
}

func sortedPods(p []podUID) []podUID {
	slices.SortFunc(p, func(a, b podUID) int {
		return cmp.Or(cmp.Compare(a.key.name, b.key.name), cmp.Compare(a.uid, b.uid))
	})
	return p
}

// takeEffect carries out the disruptions whose effect is at or before now
// (all of them when now is zero): their pods stop being healthy, and each
// budget they cover is judged.
//
// A disruption is judged over its whole request, from the time the API
// server received it until it answered: it is a violation only if the
// budget is short at every step in between. Before its effect, a step
// counts the pods that were healthy then, less those whose disruption took
// effect no later than this one's (the order in which the API server
// carried them out, whatever order it received them in); from its effect
// on, the budget as it is (recheck).
func (r *replayer) takeEffect(now time.Time) {
	for len(r.effects) > 0 && (now.IsZero() || !r.effects[0].at.After(now)) {
		e := r.effects[0]
		r.effects = r.effects[1:]
		if uid, ok := r.requested[e.key]; !ok || uid != e.uid {
			continue // the pod is gone (and its replacement is another pod)
		}
		r.disrupted[e.key] = e.uid
		r.carriedOut[e.uid] = true
		for _, j := range e.judged {
			b := j.budget
			if !b.live {
				continue
			}
			healthy := r.healthy(b)
			r.track(b, healthy)
			if !e.d.WasHealthy || healthy >= b.desired {
				continue
			}
			best, whole := healthy, false
			for _, s := range j.snaps {
				var n int32
				for _, p := range s.healthy {
					if !r.carriedOut[p.uid] {
						n++
					}
				}
				best = max(best, n)
				whole = whole || n >= s.desired
			}
			if !whole {
				r.pending = append(r.pending, &pendingViolation{budget: b, answered: e.answered,
					v: Violation{Budget: b.ref, Disruption: e.d, Healthy: best, Desired: b.desired}})
			}
		}
	}
}
