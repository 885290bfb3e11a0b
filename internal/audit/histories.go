package audit

import (
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
)

// histories hold every observation of the run by object, in the order
// the informers delivered them, so that the judge can ask what the
// auditor had seen of an object at any time.
type histories struct {
	pods      map[podKey][]podObs
	podNames  map[string][]string // per namespace, every pod name seen
	budgets   map[BudgetRef][]budgetObs
	workloads map[workloadKey][]workloadObs
}

type podObs struct {
	at  time.Time
	pod *corev1.Pod // nil: deleted
}

type budgetObs struct {
	at time.Time
	v  *budgetView // nil: deleted
}

type workloadObs struct {
	at time.Time
	w  *workload
}

// budgetView is a budget as one observation shows it.
type budgetView struct {
	cov         coverage
	pub         bool
	desired     int32
	current     int32
	statusKnown bool
	// out: the pods its status counts as disrupted (PDB disruptedPods; PUB
	// disruptedPods and unavailablePods): not healthy for its controller.
	out    map[string]bool
	exempt pubExemption
	// alwaysAllow: a PDB whose unhealthyPodEvictionPolicy is AlwaysAllow;
	// any other value (unset, IfHealthyBudget, one the API server does not
	// know) protects its running, not-Ready pods while it is short, as the
	// Eviction API reads it.
	alwaysAllow bool
}

func viewOf(o *observation) *budgetView {
	switch {
	case o.pdb != nil:
		v := &budgetView{cov: pdbCoverage(o.pdb), desired: o.pdb.Status.DesiredHealthy, current: o.pdb.Status.CurrentHealthy}
		v.alwaysAllow = o.pdb.Spec.UnhealthyPodEvictionPolicy != nil && *o.pdb.Spec.UnhealthyPodEvictionPolicy == policyv1.AlwaysAllow
		v.statusKnown = o.pdb.Status.ObservedGeneration > 0 || v.desired > 0
		v.out = map[string]bool{}
		for name := range o.pdb.Status.DisruptedPods {
			v.out[name] = true
		}
		return v
	case o.pub != nil:
		p := o.pub
		v := &budgetView{cov: pubCoverage(p), pub: true, desired: p.Status.DesiredAvailable, current: p.Status.CurrentAvailable, exempt: pubExemptionOf(p)}
		v.statusKnown = p.Status.ObservedGeneration > 0 || v.desired > 0
		v.out = map[string]bool{}
		for name := range p.Status.DisruptedPods {
			v.out[name] = true
		}
		for name := range p.Status.UnavailablePods {
			v.out[name] = true
		}
		return v
	}
	return nil
}

func newHistories(observations []observation) *histories {
	h := &histories{
		pods:      map[podKey][]podObs{},
		podNames:  map[string][]string{},
		budgets:   map[BudgetRef][]budgetObs{},
		workloads: map[workloadKey][]workloadObs{},
	}
	sorted := make([]*observation, len(observations))
	for i := range observations {
		sorted[i] = &observations[i]
	}
	slices.SortStableFunc(sorted, func(a, b *observation) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.seq - b.seq
	})
	for _, o := range sorted {
		switch {
		case o.isPod():
			if _, ok := h.pods[o.podKey]; !ok {
				h.podNames[o.podKey.namespace] = append(h.podNames[o.podKey.namespace], o.podKey.name)
			}
			h.pods[o.podKey] = append(h.pods[o.podKey], podObs{at: o.at, pod: o.pod})
		case o.isBudget():
			h.budgets[o.budget] = append(h.budgets[o.budget], budgetObs{at: o.at, v: viewOf(o)})
		case o.isWorkload():
			h.workloads[o.workloadKey] = append(h.workloads[o.workloadKey], workloadObs{at: o.at, w: o.workload})
		}
	}
	return h
}

// lastAt returns the index of the last of n entries whose time (at(i)) is
// at or before t, or -1.
func lastAt(n int, at func(int) time.Time, t time.Time) int {
	return sort.Search(n, func(i int) bool { return at(i).After(t) }) - 1
}

// podAt is the pod as the auditor had last seen it at t (nil: not there).
func (h *histories) podAt(k podKey, t time.Time) *corev1.Pod {
	obs := h.pods[k]
	if i := lastAt(len(obs), func(i int) time.Time { return obs[i].at }, t); i >= 0 {
		return obs[i].pod
	}
	return nil
}

// budgetAt is the budget as the auditor had last seen it at t (nil: not
// there).
func (h *histories) budgetAt(ref BudgetRef, t time.Time) *budgetView {
	obs := h.budgets[ref]
	if i := lastAt(len(obs), func(i int) time.Time { return obs[i].at }, t); i >= 0 {
		return obs[i].v
	}
	return nil
}

// workloadsAt resolves workloads as the auditor had last seen them at t.
func (h *histories) workloadsAt(t time.Time) workloadLookup {
	return func(k workloadKey) (workload, bool) {
		obs := h.workloads[k]
		if i := lastAt(len(obs), func(i int) time.Time { return obs[i].at }, t); i >= 0 && obs[i].w != nil {
			return *obs[i].w, true
		}
		return workload{}, false
	}
}

// countsFor reports whether pod (named name) counts as healthy for a
// budget whose status holds out as disrupted: for a PDB, Ready, not
// terminating and not in disruptedPods (the disruption controller,
// pkg/controller/disruption: countHealthyPods); for a PUB, what OpenKruise
// counts available and not in its disruptedPods or unavailablePods.
func countsFor(pub bool, out map[string]bool, name string, pod *corev1.Pod) bool {
	if pod == nil || out[name] {
		return false
	}
	if pub {
		return pubAvailable(pod)
	}
	return podHealthy(pod)
}
