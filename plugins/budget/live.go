package budget

import (
	"strconv"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
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

// podChanged counts pod as it is now (or forgets it when deleted), as an
// informer event delivered it.
func (c *Cache) podChanged(pod *v1.Pod, deleted bool) {
	x := c.live
	x.mu.Lock()
	defer x.mu.Unlock()
	c.podChangedLocked(pod, deleted)
}

// podChangedLocked is podChanged; the caller holds c.live.mu. A pod whose
// budgets and health did not change costs no allocation. An object older
// (by resourceVersion) than the one the pod was counted from changes
// nothing: recount may have counted a newer object than an event that the
// informer has yet to deliver.
func (c *Cache) podChangedLocked(pod *v1.Pod, deleted bool) {
	x := c.live
	k := podKey{pod.Namespace, pod.Name}
	old := x.pods[k]
	if deleted {
		if old != nil && old.uid == pod.UID {
			x.remove(k, old)
		}
		return
	}
	rv := resourceVersion(pod)
	if old != nil && old.uid == pod.UID && rv != 0 && rv < old.rv {
		return
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
		return
	}
	if len(pdbs)+len(pubs) == 0 {
		if old != nil {
			x.remove(k, old)
		}
		return
	}
	p := old
	if p != nil {
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

// recount counts every pod of namespace again as the pod lister has it
// (every namespace when namespace is ""), after a budget's coverage changed,
// and forgets the pods the lister no longer has.
//
// It lists under the lock the event handlers take. The informer writes its
// store before it calls the handlers, so an event handled before the lock
// was taken delivered an object the list has too, or an older one; a
// listed pod is never one deleted before it, and a pod the list lacks was
// deleted (its event may be still to come). An event still to come may
// deliver an object older than the listed one: podChangedLocked keeps the
// newer. Listing outside the lock would let an event handled in between be
// overwritten by the older listed object: a pod that has just turned not
// Ready would count healthy again, a pod deleted in between for ever.
func (c *Cache) recount(namespace string) {
	if c.podLister == nil {
		return
	}
	c.recounts.Add(1)
	x := c.live
	x.mu.Lock()
	defer x.mu.Unlock()
	var pods []*v1.Pod
	var err error
	if namespace == "" {
		pods, err = c.podLister.List(labels.Everything())
	} else {
		pods, err = c.podLister.Pods(namespace).List(labels.Everything())
	}
	if err != nil {
		c.logger.Error(err, "Cannot list pods to count budgets' healthy pods", "namespace", namespace)
		return
	}
	for _, pod := range pods {
		c.podChangedLocked(pod, false)
	}
	// Prune what the list lacks. A pod counted now is in the list, so
	// only pods counted before are looked up.
	listed := make(map[podKey]types.UID, len(pods))
	for _, pod := range pods {
		listed[podKey{pod.Namespace, pod.Name}] = pod.UID
	}
	prune := func(k podKey, p *livePod) {
		if uid, ok := listed[k]; !ok || uid != p.uid {
			x.remove(k, p)
		}
	}
	if namespace != "" {
		if g := x.coverage[namespace]; g != nil {
			for p := range g.pods {
				prune(podKey{namespace, p.src.Name}, p)
			}
		}
		return
	}
	for k, p := range x.pods {
		prune(k, p)
	}
}

// onWorkload counts the namespace of a ReplicaSet, Deployment or
// StatefulSet that appeared or went again when a PUB there covers pods by
// targetRef: its pods may have been counted before the workload was known
// (the informers deliver in no common order, and a dry run reads workloads
// from another cluster than its pods).
func (c *Cache) onWorkload(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	ns := m.GetNamespace()
	c.mu.RLock()
	targeted := false
	for t := range c.pubsByTarget {
		if t.namespace == ns {
			targeted = true
			break
		}
	}
	c.mu.RUnlock()
	if targeted {
		c.live.coverageChanged(ns)
		c.recountChanged(ns)
	}
}

// onWorkloadUpdate is onWorkload for a workload whose owners changed (a
// ReplicaSet adopted by another Deployment): a PUB's targetRef resolves
// through them. Other updates (a new status) change no coverage.
func (c *Cache) onWorkloadUpdate(oldObj, obj any) {
	o, err1 := meta.Accessor(oldObj)
	n, err2 := meta.Accessor(obj)
	if err1 != nil || err2 != nil || o.GetUID() != n.GetUID() || !equality.Semantic.DeepEqual(o.GetOwnerReferences(), n.GetOwnerReferences()) {
		c.onWorkload(obj)
	}
}

// liveCounted reports whether the live count is complete: every informer
// has delivered its initial list, and every pod was counted against every
// budget after that (countAllOnce). Before that, decisions use the status
// alone (the plugins refuse everything until the Cache syncs anyway).
func (c *Cache) liveCounted() bool { return c.liveOn.Load() }

// recountChanged is recount for an event that changed which pods a budget
// covers. Until the first full count (countAllOnce) it counts nothing: that
// count comes after every informer's initial list, and covers every event
// of those lists. Counting a namespace again for each budget of an initial
// list would cost a pass over the namespace's pods per budget: at 30,000
// pods and 3,000 PDBs in one namespace the Cache would take longer than two
// minutes to sync, and the descheduler's BudgetAwareEvictor would refuse
// every pod meanwhile.
func (c *Cache) recountChanged(namespace string) {
	if c.recountsOn.Load() {
		c.recount(namespace)
	}
}

// informersSynced reports whether every informer has delivered its initial
// list to the Cache's handlers.
func (c *Cache) informersSynced() bool {
	c.syncMu.Lock()
	synced := c.synced
	c.syncMu.Unlock()
	for _, s := range synced {
		if !s() {
			return false
		}
	}
	return true
}

// countAllOnce reports whether every informer has delivered its initial
// list to the Cache; the first time it has, it turns the event handlers'
// recounts on, counts every namespace once and turns the live count on,
// before it returns (callers that race wait for that count). A handler
// that saw recounts off had filed its budget before it looked, and the
// count comes after they are on, so it sees that budget. It takes the
// live index's lock: a caller must hold none of the Cache's locks. New
// starts a goroutine that calls it once the informers have synced, so the
// count does not wait for a caller of HasSynced.
func (c *Cache) countAllOnce() bool {
	if !c.informersSynced() {
		return false
	}
	c.firstCount.Do(func() {
		c.recountsOn.Store(true)
		c.recount("")
		c.liveOn.Store(true)
	})
	return true
}

// LiveHealthy returns how many pods covered by the budget are healthy now,
// as the Cache's pod informer has them (for diagnostics and tests).
func (c *Cache) LiveHealthy(kind BudgetKind, namespace, name string) int32 {
	x := c.live
	x.mu.RLock()
	defer x.mu.RUnlock()
	if lc := x.counts[budgetKey{kind, namespace, name}]; lc != nil {
		return lc.n
	}
	return 0
}
