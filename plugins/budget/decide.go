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
	ref     BudgetRef
	mark    metav1.Time
	hasMark bool
}

// decide is the single implementation of rules 1-6. extra holds spends of
// earlier victims of the same plan that are not in the ledger yet (may be
// nil). The caller holds c.ledger.mu (a read lock is enough).
func (c *Cache) decide(pod *v1.Pod, op Operation, extra map[budgetKey]int32, now time.Time) (Decision, []spend) {
	// Rule 1.
	if ignoresBudgets(pod) {
		return Decision{Allowed: true}, nil
	}
	pdbs, pubs := c.covering(pod)

	// Rule 2.
	if len(pdbs) > 1 {
		refs := make([]BudgetRef, 0, len(pdbs))
		names := make([]string, 0, len(pdbs))
		for _, p := range pdbs {
			refs = append(refs, pdbRef(p))
			names = append(names, p.Name)
		}
		return Decision{Denials: []Denial{{
			Budgets: refs,
			Reason:  ReasonMultiplePDBs,
			Message: fmt.Sprintf("pod %s/%s is covered by %d PodDisruptionBudgets (%s); the Eviction API refuses a pod with more than one",
				pod.Namespace, pod.Name, len(pdbs), strings.Join(names, ", ")),
		}}}, nil
	}

	d := Decision{Allowed: true}
	var spends []spend
	pk := podKey{pod.Namespace, pod.Name}
	consider := func(ref BudgetRef, eval func(pending) verdict, recorded map[string]metav1.Time) {
		k := keyOf(ref)
		if c.ledger.holds(k, pk, pod.UID, now) {
			return // this pod's disruption is already counted against k
		}
		v := eval(pending{inflight: c.ledger.inflight(k, now), planned: extra[k]})
		switch {
		case v.denial != nil:
			d.Allowed = false
			d.Denials = append(d.Denials, *v.denial)
		case v.spends:
			s := spend{ref: ref}
			s.mark, s.hasMark = recorded[pod.Name]
			spends = append(spends, s)
		}
	}
	// Rules 3 and 4.
	for _, pdb := range pdbs {
		consider(pdbRef(pdb), func(n pending) verdict { return evaluatePDB(pod, pdb, op, n) }, pdb.Status.DisruptedPods)
	}
	// Rule 5.
	for _, pub := range pubs {
		consider(pubRef(pub), func(n pending) verdict { return evaluatePUB(pod, pub, op, n) }, pub.Status.DisruptedPods)
	}
	// Rule 6.
	if !d.Allowed {
		return d, nil
	}
	for _, s := range spends {
		d.Spends = append(d.Spends, s.ref)
	}
	return d, spends
}

// Decide answers whether pod may be disrupted by op now, counting the
// disruptions already in flight. It reserves nothing.
func (c *Cache) Decide(pod *v1.Pod, op Operation) Decision {
	c.ledger.mu.RLock()
	defer c.ledger.mu.RUnlock()
	d, _ := c.decide(pod, op, nil, c.clock.Now())
	return d
}

// Reserve decides for one pod and, when allowed, records the spend in the
// ledger in the same critical section, so concurrent callers never spend a
// budget twice. The reservation is nil when the decision spends nothing.
func (c *Cache) Reserve(pod *v1.Pod, op Operation) (Decision, *Reservation) {
	c.ledger.mu.Lock()
	defer c.ledger.mu.Unlock()
	now := c.clock.Now()
	d, spends := c.decide(pod, op, nil, now)
	if !d.Allowed || len(spends) == 0 {
		return d, nil
	}
	r := &Reservation{l: c.ledger}
	c.recordLocked(r, pod, spends, now)
	return d, r
}

func (c *Cache) recordLocked(r *Reservation, pod *v1.Pod, spends []spend, now time.Time) {
	for _, s := range spends {
		e := &entry{
			budget:  keyOf(s.ref),
			pod:     podKey{pod.Namespace, pod.Name},
			podUID:  pod.UID,
			created: now,
			mark:    s.mark,
			hasMark: s.hasMark,
		}
		c.ledger.add(e)
		r.entries = append(r.entries, e)
	}
}

// Plan accumulates the victims of one disruption (for example every pod
// preemption would remove from one node) so that they spend budgets
// cumulatively. A Plan reserves nothing until Reserve; it is not safe for
// concurrent use, but many Plans may be used concurrently.
type Plan struct {
	c     *Cache
	op    Operation
	spent map[budgetKey]int32
	pods  []*v1.Pod
}

// NewPlan starts an empty plan for operation op.
func (c *Cache) NewPlan(op Operation) *Plan {
	return &Plan{c: c, op: op}
}

// Add decides for pod as if every pod already added were being disrupted
// too. When allowed, pod joins the plan.
func (p *Plan) Add(pod *v1.Pod) Decision {
	p.c.ledger.mu.RLock()
	d, spends := p.c.decide(pod, p.op, p.spent, p.c.clock.Now())
	p.c.ledger.mu.RUnlock()
	if !d.Allowed {
		return d
	}
	for _, s := range spends {
		if p.spent == nil {
			p.spent = map[budgetKey]int32{}
		}
		p.spent[keyOf(s.ref)]++
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
	var r *Reservation
	spent := map[budgetKey]int32{}
	var all [][]spend
	for _, pod := range p.pods {
		d, spends := c.decide(pod, p.op, spent, now)
		if !d.Allowed {
			return nil, &DeniedError{Pod: pod, Decision: d}
		}
		for _, s := range spends {
			spent[keyOf(s.ref)]++
		}
		all = append(all, spends)
	}
	for i, pod := range p.pods {
		if len(all[i]) == 0 {
			continue
		}
		if r == nil {
			r = &Reservation{l: c.ledger}
		}
		c.recordLocked(r, pod, all[i], now)
	}
	return r, nil
}
