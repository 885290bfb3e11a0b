package budget

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
)

// Counting the live count again: a namespace whose budgets' coverage
// changed, every namespace once a minute, and every namespace once all the
// informers have delivered their initial lists (live.go).

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
//
// What the recount changed goes to the ledger, as a pod event's does
// (Cache.liveChanged), when it holds anything.
func (c *Cache) recount(namespace string) {
	if c.podLister == nil {
		return
	}
	c.recounts.Add(1)
	track := c.ledger.n.Load() > 0
	if changes := c.recountLocked(namespace, track); track {
		c.liveChanged(podKey{}, "", false, changes)
	}
}

// recountLocked is recount's count, under the live index's lock; when
// track is set, it returns the budgets whose count changed.
func (c *Cache) recountLocked(namespace string, track bool) []liveChange {
	x := c.live
	x.mu.Lock()
	defer x.mu.Unlock()
	var changes []liveChange
	var pods []*v1.Pod
	var err error
	if namespace == "" {
		pods, err = c.podLister.List(labels.Everything())
	} else {
		pods, err = c.podLister.Pods(namespace).List(labels.Everything())
	}
	if err != nil {
		c.logger.Error(err, "Cannot list pods to count budgets' healthy pods", "namespace", namespace)
		return nil
	}
	for _, pod := range pods {
		changes = c.podChangedLocked(pod, false, track, changes)
	}
	// Prune what the list lacks. A pod counted now is in the list, so
	// only pods counted before are looked up.
	listed := make(map[podKey]types.UID, len(pods))
	for _, pod := range pods {
		listed[podKey{pod.Namespace, pod.Name}] = pod.UID
	}
	prune := func(k podKey, p *livePod) {
		if uid, ok := listed[k]; !ok || uid != p.uid {
			changes = p.lostAll(k, track, changes)
			x.remove(k, p)
		}
	}
	if namespace != "" {
		if g := x.coverage[namespace]; g != nil {
			for p := range g.pods {
				prune(podKey{namespace, p.src.Name}, p)
			}
		}
		return changes
	}
	for k, p := range x.pods {
		prune(k, p)
	}
	return changes
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
		c.settleLiveAll()
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
