package budget

import (
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// spend is one budget a decision consumes, with what the ledger needs to
// recognise the status update that records it.
type spend struct {
	pod *v1.Pod
	key budgetKey
	// refs is the budget alone (length and capacity 1); see pdbEntry.spends.
	refs    []BudgetRef
	mark    metav1.Time
	hasMark bool
	// healthy and inHealthy are the ledger entry's (see entry).
	healthy   int32
	inHealthy bool
}

// plannedSpends counts, per budget, the spends of earlier victims of the
// same plan that are not in the ledger yet. A plan touches few budgets, so
// a list searched in order costs less than a map.
type plannedSpends []plannedSpend

type plannedSpend struct {
	key budgetKey
	n   int32
}

func (p plannedSpends) of(k budgetKey) int32 {
	for i := range p {
		if p[i].key == k {
			return p[i].n
		}
	}
	return 0
}

func (p plannedSpends) add(k budgetKey) plannedSpends {
	for i := range p {
		if p[i].key == k {
			p[i].n++
			return p
		}
	}
	return append(p, plannedSpend{key: k, n: 1})
}

// decide is the single implementation of rules 1-6. planned holds spends of
// earlier victims of the same plan that are not in the ledger yet (may be
// empty). When allowed, it appends what the decision spends to spends;
// when denied, it returns spends as it was. The caller holds c.ledger.mu
// (a read lock is enough).
//
// A pod under one budget costs no allocation when spends has room: the
// covering budgets are collected on the stack, an allowed decision shares
// the budget's precomputed Spends, and refusal messages are built only
// when refusing.
func (c *Cache) decide(pod *v1.Pod, op Operation, planned plannedSpends, now time.Time, spends []spend) (Decision, []spend) {
	// Rule 1.
	if ignoresBudgets(pod) {
		return Decision{Allowed: true}, spends
	}
	x := c.live
	x.mu.RLock()
	defer x.mu.RUnlock()
	var pdbBuf [2]*pdbEntry
	var pubBuf [2]*PUB
	self, pdbs, pubs, countedPUBs := c.coveringLocked(pod, pdbBuf[:0], pubBuf[:0])

	// Rule 2.
	if len(pdbs) > 1 {
		return multiplePDBs(pod, pdbs), spends
	}

	d := Decision{Allowed: true}
	start := len(spends)
	held := c.ledger.heldBy(podKey{pod.Namespace, pod.Name})
	live := c.liveCounted()
	// Rules 3 and 4.
	spendsPDB := false
	for _, e := range pdbs {
		if c.ledger.holdsIn(held, e.key, pod.UID, now) {
			spendsPDB = true
			continue // this pod's disruption is already counted against the PDB
		}
		pdb := e.pdb.Load()
		v := evaluatePDB(pod, pdb, op.forPDB(), pending{inflight: c.ledger.inflight(e.key, now), planned: planned.of(e.key)})
		ask := liveAsk{pod: pod, self: self, key: e.key, count: e.live, countsPod: true, status: pdbStatusCount(&pdb.Status), planned: planned.of(e.key)}
		switch {
		case !live || v.denial != nil:
		case healthyForPDB(pod):
			if !v.spends && !v.recorded {
				break
			}
			if msg, short := c.liveShortfall(ask, now); short {
				v = deny(e.spends[0], ReasonStatusBehindPods, "%s", msg)
			}
		case protectsUnhealthy(pdb):
			// Rule 3 on the live count: a not-Ready pod under
			// IfHealthyBudget goes only while the application is whole.
			if msg, short := c.liveWhole(ask, now); short {
				v = deny(e.spends[0], ReasonStatusBehindPods, "%s", msg)
			}
		}
		switch {
		case v.denial != nil:
			d.Allowed = false
			d.Denials = append(d.Denials, *v.denial)
		case v.spends:
			spendsPDB = true
			s := spend{pod: pod, key: e.key, refs: e.spends, healthy: pdb.Status.CurrentHealthy}
			s.mark, s.hasMark = pdb.Status.DisruptedPods[pod.Name]
			// The disruption controller counts a pod healthy when it is
			// Ready and not recorded as disrupted (rule 1 left out the
			// ones being deleted).
			s.inHealthy = podReady(pod) && !s.hasMark
			spends = append(spends, s)
		}
	}
	// Rule 5, under the operation the pod undergoes.
	pubOp := op.forPUB(spendsPDB)
	for i, pub := range pubs {
		k := budgetKey{KindPUB, pub.Namespace, pub.Name}
		if c.ledger.holdsIn(held, k, pod.UID, now) {
			continue
		}
		v := evaluatePUB(pod, pub, pubOp, pending{inflight: c.ledger.inflight(k, now), planned: planned.of(k)})
		if live && (v.spends || v.recorded) && healthyForPUB(pod) {
			ask := liveAsk{pod: pod, self: self, key: k, countsPod: i < countedPUBs, status: pubStatusCount(pub), planned: planned.of(k)}
			if msg, short := c.liveShortfall(ask, now); short {
				v = deny(pubRef(pub), ReasonStatusBehindPods, "%s", msg)
			}
		}
		switch {
		case v.denial != nil:
			d.Allowed = false
			d.Denials = append(d.Denials, *v.denial)
		case v.spends:
			s := spend{pod: pod, key: k, refs: []BudgetRef{pubRef(pub)}, healthy: pub.Status.CurrentAvailable}
			s.mark, s.hasMark = pub.Status.DisruptedPods[pod.Name]
			// A pod that spends a PUB is available to it and recorded
			// in neither of its maps (rule 5), so counted available.
			s.inHealthy = true
			spends = append(spends, s)
		}
	}
	// Rule 6.
	if !d.Allowed {
		return d, spends[:start]
	}
	switch mine := spends[start:]; len(mine) {
	case 0:
	case 1:
		d.Spends = mine[0].refs
	default:
		d.Spends = make([]BudgetRef, 0, len(mine))
		for _, s := range mine {
			d.Spends = append(d.Spends, s.refs[0])
		}
	}
	return d, spends
}

// coveringLocked returns pod's livePod and appends the budgets that cover
// pod to pdbs and pubs, as decide weighs them: from the pod's memo when it
// answers, else from the indexes (see coveringInto, whose count of the PUBs
// that count pod it returns too). The caller holds c.live.mu (a read lock
// is enough).
func (c *Cache) coveringLocked(pod *v1.Pod, pdbs []*pdbEntry, pubs []*PUB) (*livePod, []*pdbEntry, []*PUB, int) {
	self := c.live.selfOf(pod)
	pdbs, memo := self.memo(pod, pdbs)
	if memo {
		return self, pdbs, pubs, 0
	}
	pdbs, pubs, counted := c.coveringInto(pod, pdbs, pubs)
	return self, pdbs, pubs, counted
}

// Covered reports whether a budget has a say in pod's disruption: whether
// rule 1 leaves pod to the budgets and a PDB or PUB covers it, as decide
// looks them up. When it reports false, Decide and Plan.Add answer for pod
// as for a pod under no budget, under every operation: allowed, spending
// nothing (Decision.Free). A caller may then skip deciding pod, until the
// budgets change. It allocates nothing.
func (c *Cache) Covered(pod *v1.Pod) bool {
	if ignoresBudgets(pod) {
		return false
	}
	x := c.live
	x.mu.RLock()
	defer x.mu.RUnlock()
	var pdbBuf [2]*pdbEntry
	var pubBuf [2]*PUB
	_, pdbs, pubs, _ := c.coveringLocked(pod, pdbBuf[:0], pubBuf[:0])
	return len(pdbs) > 0 || len(pubs) > 0
}

// multiplePDBs is rule 2's refusal.
func multiplePDBs(pod *v1.Pod, pdbs []*pdbEntry) Decision {
	refs := make([]BudgetRef, 0, len(pdbs))
	names := make([]string, 0, len(pdbs))
	for _, e := range pdbs {
		refs = append(refs, e.spends[0])
		names = append(names, e.spends[0].String())
	}
	return Decision{Denials: []Denial{{
		Budgets: refs,
		Reason:  ReasonMultiplePDBs,
		Message: fmt.Sprintf("pod %s/%s is covered by %d PodDisruptionBudgets (%s); the Eviction API refuses a pod with more than one",
			pod.Namespace, pod.Name, len(pdbs), strings.Join(names, ", ")),
	}}}
}

// Decide answers whether pod may be disrupted by op now, counting the
// disruptions already in flight. It reserves nothing.
func (c *Cache) Decide(pod *v1.Pod, op Operation) Decision {
	c.ledger.mu.RLock()
	defer c.ledger.mu.RUnlock()
	var buf [2]spend
	d, _ := c.decide(pod, op, nil, c.clock.Now(), buf[:0])
	return d
}

// Reserve decides for one pod and, when allowed, records the spend in the
// ledger in the same critical section, so concurrent callers never spend a
// budget twice. The reservation is nil when the decision spends nothing.
func (c *Cache) Reserve(pod *v1.Pod, op Operation) (Decision, *Reservation) {
	c.ledger.mu.Lock()
	defer c.ledger.mu.Unlock()
	now := c.clock.Now()
	var buf [2]spend
	d, spends := c.decide(pod, op, nil, now, buf[:0])
	if !d.Allowed || len(spends) == 0 {
		return d, nil
	}
	return d, c.recordLocked(spends, now)
}

// recordLocked adds an entry to the ledger for each spend and returns them
// as one reservation. The caller holds c.ledger.mu for writing.
func (c *Cache) recordLocked(spends []spend, now time.Time) *Reservation {
	entries := make([]entry, len(spends))
	r := &Reservation{l: c.ledger, entries: make([]*entry, len(spends))}
	for i, s := range spends {
		e := &entries[i]
		*e = entry{
			budget:    s.key,
			pod:       podKey{s.pod.Namespace, s.pod.Name},
			podUID:    s.pod.UID,
			created:   now,
			mark:      s.mark,
			hasMark:   s.hasMark,
			healthy:   s.healthy,
			inHealthy: s.inHealthy,
		}
		c.ledger.add(e)
		r.entries[i] = e
	}
	return r
}

// Plan accumulates the victims of one disruption (for example every pod
// preemption would remove from one node) so that they spend budgets
// cumulatively. A Plan reserves nothing until Reserve; it is not safe for
// concurrent use, but many Plans may be used concurrently.
type Plan struct {
	c     *Cache
	op    Operation
	spent plannedSpends
	pods  []*v1.Pod
	// Room for a preemption-sized plan without growing.
	spentBuf [4]plannedSpend
	podsBuf  [4]*v1.Pod
}

// NewPlan starts an empty plan for operation op.
func (c *Cache) NewPlan(op Operation) *Plan {
	p := &Plan{c: c, op: op}
	p.spent, p.pods = p.spentBuf[:0], p.podsBuf[:0]
	return p
}

// Add decides for pod as if every pod already added were being disrupted
// too. When allowed, pod joins the plan.
func (p *Plan) Add(pod *v1.Pod) Decision {
	var buf [2]spend
	p.c.ledger.mu.RLock()
	d, spends := p.c.decide(pod, p.op, p.spent, p.c.clock.Now(), buf[:0])
	p.c.ledger.mu.RUnlock()
	if !d.Allowed {
		return d
	}
	for _, s := range spends {
		p.spent = p.spent.add(s.key)
	}
	p.pods = append(p.pods, pod)
	return d
}

// Pods returns the pods added to the plan, in order.
func (p *Plan) Pods() []*v1.Pod { return p.pods }

// DeniedError is returned by Plan.Reserve when a pod of the plan is no
// longer allowed, because budgets or the ledger changed since Add.
type DeniedError struct {
	Pod      *v1.Pod
	Decision Decision
}

func (e *DeniedError) Error() string {
	return fmt.Sprintf("disruption of pod %s/%s denied: %s", e.Pod.Namespace, e.Pod.Name, e.Decision.Message())
}

// Reserve re-decides every pod of the plan, cumulatively, against the
// current budgets and ledger, and records them all, or none when any is
// denied now. The reservation may be nil when nothing is spent.
func (p *Plan) Reserve() (*Reservation, error) {
	c := p.c
	c.ledger.mu.Lock()
	defer c.ledger.mu.Unlock()
	now := c.clock.Now()
	var spentBuf [4]plannedSpend
	var spendBuf [4]spend
	spent, all := plannedSpends(spentBuf[:0]), spendBuf[:0]
	for _, pod := range p.pods {
		before := len(all)
		var d Decision
		d, all = c.decide(pod, p.op, spent, now, all)
		if !d.Allowed {
			return nil, &DeniedError{Pod: pod, Decision: d}
		}
		for _, s := range all[before:] {
			spent = spent.add(s.key)
		}
	}
	if len(all) == 0 {
		return nil, nil
	}
	return c.recordLocked(all, now), nil
}
