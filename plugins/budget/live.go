package budget

import (
	"slices"
	"strconv"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The live count of a budget's healthy pods.
//
// A budget's status is written by its controller (the disruption
// controller, Kruise's PUB controller) some milliseconds after a covered pod
// changes; the Eviction API decides on that status, and so do rules 3-5. A
// pod that turns not Ready just before a decision is not in the status yet,
// and a disruption the status allows can then leave the application below
// its budget. So, besides the status, budgetguard counts each budget's
// healthy pods from its own pod informer, the way the budget's controller
// counts them, and a disruption that spends a budget must be allowed by
// both: the status, less what is in flight, and the live count, less the
// pods already being disrupted. The live count only ever refuses more.
//
// The count is kept per budget as pods change: each pod remembers the
// budgets it was counted against and whether it was healthy, so that an
// update takes its old contribution away and adds the new one. A budget
// whose coverage changes (added, deleted, a new selector or targetRef) has
// its namespace counted again from the pod lister; so does every namespace
// once a minute (Cache.Run), for coverage that follows workloads (a PUB's
// targetRef).

// liveIndex holds the live counts. Its lock is taken after Cache.mu is
// released and never while holding it (coverage takes Cache.mu inside).
type liveIndex struct {
	mu   sync.RWMutex
	pods map[podKey]*livePod
	// bySrc holds the same livePods by the informer's object they were
	// counted from (livePod.src), for decisions: hashing a pointer reads
	// nothing, where hashing a name or a UID reads the pod's strings, which
	// a decision finds cold. A pod that is not the informer's object (a
	// copy) is found by name (selfOf).
	bySrc  map[*v1.Pod]*livePod
	counts map[budgetKey]*liveCount
	// coverage holds each namespace's coverage generation (see livePod).
	coverage map[string]*coverageGen
}

// coverageGen counts the changes in which pods a namespace's budgets cover:
// a budget added, deleted or with a new selector or targetRef, a workload
// a targetRef resolves through. It also holds the namespace's counted pods:
// a namespace's entry lasts while it has any (a pod's memo points to it),
// and goes with its last pod, so the index holds no entry for a namespace
// it has no pod of. Guarded by liveIndex.mu.
type coverageGen struct {
	n    uint64
	pods map[*livePod]struct{}
}

// liveCount is one budget's count of healthy pods, guarded by liveIndex.mu.
// A budget keeps its liveCount from when it is first seen until it is
// deleted, and a PDB's entry in the selector index points to it, so that a
// decision reads the count without a map lookup.
type liveCount struct{ n int32 }

// liveRef is one budget a pod was counted against: a PDB's entry, or nil
// for a PUB.
type liveRef struct {
	key budgetKey
	lc  *liveCount
	pdb *pdbEntry
}

// livePod is what a pod contributes to the counts: the budgets that covered
// it when it was last seen, and whether it was healthy for each kind.
//
// It is also a memo of the pod's coverage: while src is the object a
// decision is asked about (informer objects are never modified, so its
// labels, annotations and owners are the same) and its namespace's
// coverage generation is still gen, budgets are the PDBs that cover it, in
// coveringInto's order, and a decision need not search the selector index.
// Only a pod under PDBs alone is decided from the memo: a PUB's entry is
// replaced on every status update.
type livePod struct {
	// What a decision reads first, together.
	src     *v1.Pod
	ns      *coverageGen
	gen     uint64
	budgets []liveRef
	// inline holds the first budget without another allocation.
	inline     [1]liveRef
	uid        types.UID
	pdbHealthy bool
	pubHealthy bool
	// related is set when the pod's related-pub annotation names a PUB
	// that does not count it: that PUB is not among budgets, so a
	// decision cannot be made from the memo.
	related bool
	// rv is the resourceVersion of src (0 when it is not a number): an
	// older object of the same pod never replaces it (see podChangedLocked).
	rv uint64
}

func newLiveIndex() *liveIndex {
	return &liveIndex{pods: map[podKey]*livePod{}, bySrc: map[*v1.Pod]*livePod{}, counts: map[budgetKey]*liveCount{}, coverage: map[string]*coverageGen{}}
}

// coverageOf returns namespace's coverage generation, made when namespace
// has none. Caller holds x.mu for writing.
func (x *liveIndex) coverageOf(namespace string) *coverageGen {
	g := x.coverage[namespace]
	if g == nil {
		g = &coverageGen{pods: map[*livePod]struct{}{}}
		x.coverage[namespace] = g
	}
	return g
}

// getOrMake returns m[k], made (zero) when absent.
func getOrMake[K comparable, V any](m map[K]*V, k K) *V {
	v := m[k]
	if v == nil {
		v = new(V)
		m[k] = v
	}
	return v
}

// coverageChanged ends every memo of namespace's pods. Callers change the
// index first, then call it, then count the namespace again. A namespace
// with no counted pod has no memo to end.
func (x *liveIndex) coverageChanged(namespace string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if g := x.coverage[namespace]; g != nil {
		g.n++
	}
}

// selfOf returns pod's livePod, nil when the pod is not counted: by the
// object when pod is the informer's, else by name when the UID is the
// same. Caller holds x.mu (a read lock is enough).
func (x *liveIndex) selfOf(pod *v1.Pod) *livePod {
	if p := x.bySrc[pod]; p != nil {
		return p
	}
	if p := x.pods[podKey{pod.Namespace, pod.Name}]; p != nil && p.uid == pod.UID {
		return p
	}
	return nil
}

// memo appends to out the PDBs that cover pod, from p, and reports whether
// p could answer: see livePod. Caller holds x.mu (a read lock is enough).
func (p *livePod) memo(pod *v1.Pod, out []*pdbEntry) ([]*pdbEntry, bool) {
	if p == nil || p.src != pod || p.gen != p.ns.n || p.related {
		return out, false
	}
	start := len(out)
	for _, b := range p.budgets {
		if b.pdb == nil {
			return out[:start], false
		}
		out = append(out, b.pdb)
	}
	return out, true
}

// counter returns budget k's count, made when k is first seen.
func (x *liveIndex) counter(k budgetKey) *liveCount {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.counterLocked(k)
}

func (x *liveIndex) counterLocked(k budgetKey) *liveCount { return getOrMake(x.counts, k) }

// forget drops deleted budget k's count, once its namespace has been
// counted again without it.
func (x *liveIndex) forget(k budgetKey) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.counts, k)
}

// healthyForPDB is the disruption controller's countHealthyPods: not being
// deleted, and Ready (its DisruptedPods are left out at decision time).
func healthyForPDB(pod *v1.Pod) bool {
	return pod.DeletionTimestamp == nil && podReady(pod)
}

// healthyForPUB is a pod rule 5 protects and a PUB's live count counts, as
// OpenKruise's controller counts a pod available (pubcontrol's IsPodReady
// and IsPodStateConsistent): Running and Ready, not being deleted, without
// an unavailable-pod.kruise.io/ label, and with its spec and status
// consistent (PodStateConsistent).
func healthyForPUB(pod *v1.Pod) bool {
	return pod.DeletionTimestamp == nil && pod.Status.Phase == v1.PodRunning && podReady(pod) &&
		!hasUnavailableLabel(pod) && PodStateConsistent(pod)
}

// LabelPrefixUnavailablePod starts the labels with which OpenKruise marks a
// pod unavailable (appspub.PubUnavailablePodLabelPrefix): such a pod does
// not count as available to a PUB.
const LabelPrefixUnavailablePod = "unavailable-pod.kruise.io/"

func hasUnavailableLabel(pod *v1.Pod) bool {
	for k := range pod.Labels {
		if strings.HasPrefix(k, LabelPrefixUnavailablePod) {
			return true
		}
	}
	return false
}

func (p *livePod) healthyFor(kind BudgetKind) bool {
	if kind == KindPUB {
		return p.pubHealthy
	}
	return p.pdbHealthy
}

// counts reports whether p is counted healthy against k.
func (p *livePod) counts(k budgetKey) bool {
	if !p.healthyFor(k.kind) {
		return false
	}
	for _, b := range p.budgets {
		if b.key == k {
			return true
		}
	}
	return false
}

// apply adds (sign 1) or takes away (sign -1) p's contribution. Caller
// holds x.mu.
func (x *liveIndex) apply(p *livePod, sign int32) {
	for _, b := range p.budgets {
		if p.healthyFor(b.key.kind) {
			b.lc.n += sign
		}
	}
}

// liveChange is a budget whose live count a pod's event changed: lost when
// the pod (pod, uid) stopped counting healthy against it, else it started.
type liveChange struct {
	key  budgetKey
	pod  podKey
	uid  types.UID
	lost bool
}

// podChanged counts pod as it is now (or forgets it when deleted), as an
// informer event delivered it. When track is set, it appends to changes
// the budgets whose count changed.
func (c *Cache) podChanged(pod *v1.Pod, deleted, track bool, changes []liveChange) []liveChange {
	x := c.live
	x.mu.Lock()
	defer x.mu.Unlock()
	return c.podChangedLocked(pod, deleted, track, changes)
}

// podChangedLocked is podChanged; the caller holds c.live.mu. A pod whose
// budgets and health did not change costs no allocation. An object older
// (by resourceVersion) than the one the pod was counted from changes
// nothing: recount may have counted a newer object than an event that the
// informer has yet to deliver.
func (c *Cache) podChangedLocked(pod *v1.Pod, deleted, track bool, changes []liveChange) []liveChange {
	x := c.live
	k := podKey{pod.Namespace, pod.Name}
	old := x.pods[k]
	if deleted {
		if old != nil && old.uid == pod.UID {
			changes = old.lostAll(k, track, changes)
			x.remove(k, old)
		}
		return changes
	}
	rv := resourceVersion(pod)
	if old != nil && old.uid == pod.UID && rv != 0 && rv < old.rv {
		return changes
	}
	var pdbBuf [2]*pdbEntry
	var pubBuf [2]*PUB
	// Counted as the budgets' controllers count: a PUB that only the
	// pod's related-pub annotation names does not count it.
	pdbs, pubs, countedPUBs := c.coveringInto(pod, pdbBuf[:0], pubBuf[:0])
	related := len(pubs) > countedPUBs
	pubs = pubs[:countedPUBs]
	pdbH, pubH := healthyForPDB(pod), healthyForPUB(pod)
	if old != nil && old.uid == pod.UID && old.pdbHealthy == pdbH && old.pubHealthy == pubH && old.related == related && x.sameBudgets(old.budgets, pdbs, pubs) {
		if old.src != pod {
			delete(x.bySrc, old.src)
			x.bySrc[pod] = old
		}
		old.src, old.gen, old.rv = pod, old.ns.n, rv
		return changes
	}
	if len(pdbs)+len(pubs) == 0 {
		if old != nil {
			changes = old.lostAll(k, track, changes)
			x.remove(k, old)
		}
		return changes
	}
	// What the pod counted healthy against before, to tell what changed.
	var wasBuf [4]budgetKey
	var was []budgetKey
	var wasUID types.UID
	p := old
	if p != nil {
		if track {
			was, wasUID = p.healthyKeys(wasBuf[:0]), p.uid
		}
		x.apply(p, -1)
		delete(x.bySrc, p.src)
	} else {
		p = &livePod{ns: x.coverageOf(pod.Namespace)}
		p.budgets = p.inline[:0]
		p.ns.pods[p] = struct{}{}
	}
	// No coverage change can come in between: coverageChanged waits for
	// x.mu.
	p.uid, p.pdbHealthy, p.pubHealthy, p.rv, p.related = pod.UID, pdbH, pubH, rv, related
	p.src, p.gen = pod, p.ns.n
	p.budgets = p.budgets[:0]
	for _, e := range pdbs {
		p.budgets = append(p.budgets, liveRef{key: e.key, lc: e.live, pdb: e})
	}
	for _, pub := range pubs {
		k := budgetKey{KindPUB, pub.Namespace, pub.Name}
		p.budgets = append(p.budgets, liveRef{key: k, lc: x.counterLocked(k)})
	}
	x.apply(p, 1)
	x.pods[k] = p
	x.bySrc[pod] = p
	if track && old != nil {
		// Lost: counted before (by the old UID) and not now.
		for _, b := range was {
			if wasUID != p.uid || !p.counts(b) {
				changes = append(changes, liveChange{key: b, pod: k, uid: wasUID, lost: true})
			}
		}
	}
	return p.gained(was, wasUID, k, track, changes)
}

// healthyKeys appends the budgets p counts healthy against to out.
func (p *livePod) healthyKeys(out []budgetKey) []budgetKey {
	for _, b := range p.budgets {
		if p.healthyFor(b.key.kind) {
			out = append(out, b.key)
		}
	}
	return out
}

// lostAll appends to changes, when track is set, every budget p (pod k)
// counts healthy against, lost: p is being removed.
func (p *livePod) lostAll(k podKey, track bool, changes []liveChange) []liveChange {
	if !track {
		return changes
	}
	for _, b := range p.budgets {
		if p.healthyFor(b.key.kind) {
			changes = append(changes, liveChange{key: b.key, pod: k, uid: p.uid, lost: true})
		}
	}
	return changes
}

// gained appends to changes, when track is set, the budgets p (pod k)
// counts healthy against that it did not before (was, counted by wasUID).
func (p *livePod) gained(was []budgetKey, wasUID types.UID, k podKey, track bool, changes []liveChange) []liveChange {
	if !track {
		return changes
	}
	for _, b := range p.budgets {
		if p.healthyFor(b.key.kind) && (wasUID != p.uid || !slices.Contains(was, b.key)) {
			changes = append(changes, liveChange{key: b.key, pod: k, uid: p.uid})
		}
	}
	return changes
}

// remove forgets p, pod k's entry: its contribution, its filings, and its
// namespace's entry when it was the namespace's last pod. Caller holds
// x.mu.
func (x *liveIndex) remove(k podKey, p *livePod) {
	x.apply(p, -1)
	delete(x.pods, k)
	delete(x.bySrc, p.src)
	delete(p.ns.pods, p)
	if len(p.ns.pods) == 0 && x.coverage[k.namespace] == p.ns {
		delete(x.coverage, k.namespace)
	}
}

// resourceVersion is pod's resourceVersion as a number, 0 when it is not
// one (the API server's are etcd revisions; a fake's may be empty).
func resourceVersion(pod *v1.Pod) uint64 {
	n, err := strconv.ParseUint(pod.ResourceVersion, 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// sameBudgets reports whether refs are the counts of pdbs and pubs, in
// order. Caller holds x.mu.
func (x *liveIndex) sameBudgets(refs []liveRef, pdbs []*pdbEntry, pubs []*PUB) bool {
	if len(refs) != len(pdbs)+len(pubs) {
		return false
	}
	for i, e := range pdbs {
		if refs[i].pdb != e {
			return false
		}
	}
	for i, pub := range pubs {
		if refs[len(pdbs)+i].lc != x.counts[budgetKey{KindPUB, pub.Namespace, pub.Name}] {
			return false
		}
	}
	return true
}
