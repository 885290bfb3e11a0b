package budgetpreemption

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/budgetguard/budgetguard/plugins/budget"
)

// Requeueing a preemptor that budgets blocked.
//
// A preemptor that PostFilter could not help fails its cycle as
// Unschedulable and waits in the scheduling queue's unschedulable pool until
// a cluster event that a plugin which rejected it registered moves it, or
// for podMaxInUnschedulablePodsDuration (5 minutes). Queueing hints do not
// help a PostFilter plugin: the queue asks only the hints of the plugins in
// the pod's UnschedulablePlugins, which the scheduler fills from the Filter
// (and PreFilter) statuses, never with the PostFilter plugin
// (pkg/scheduler/schedule_one.go, handleSchedulingFailure;
// backend/queue/scheduling_queue.go, isPodWorthRequeuing). PDBs are not
// among the framework's event resources either, and a GVK resource such as
// "poddisruptionbudgets.v1.policy" would only add a second, dynamic
// informer, which the scheduler never starts when it has no dynamic
// informer factory.
//
// So the plugin does what DefaultPreemption does when its asynchronous
// preemption ends: it calls Handle.Activate, which moves the pod from the
// unschedulable pool or the backoff queue to the active queue, or, when the
// pod is in its scheduling cycle, requeues it when the cycle ends. It
// remembers the preemptors that budgets blocked, watches the PDB and PUB
// informers the budget cache already uses, and activates those preemptors
// when a budget changes in a way that may let a disruption through
// (budgetMayFree).

// blockedTTL bounds how long a blocked preemptor is remembered without being
// blocked again. It is longer than podMaxInUnschedulablePodsDuration, after
// which the queue retries the pod anyway, and PostFilter remembers it again.
const blockedTTL = 10 * time.Minute

// cacheCatchUp bounds how long an activation waits for the budget cache to
// handle the budget change that triggered it, so that the retried preemptor
// decides on the new numbers.
const cacheCatchUp = 2 * time.Second

// blockedPreemptors is the set of preemptors that budgets blocked. It is safe
// for concurrent use.
type blockedPreemptors struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	pods  map[types.UID]blockedPreemptor
	// groups maps a PodGroup's UID, under which a gang's refusals are
	// remembered, to the UIDs of its pods that budgets blocked.
	groups map[types.UID][]types.UID
}

type blockedPreemptor struct {
	pod   *v1.Pod
	since time.Time
}

func newBlockedPreemptors() *blockedPreemptors {
	return &blockedPreemptors{clock: clock.RealClock{}, pods: map[types.UID]blockedPreemptor{}, groups: map[types.UID][]types.UID{}}
}

// addGroup remembers the pods of the PodGroup with uid, blocked together.
func (b *blockedPreemptors) addGroup(uid types.UID, pods []*v1.Pod) {
	uids := make([]types.UID, 0, len(pods))
	for _, p := range pods {
		b.add(p)
		uids = append(uids, p.UID)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.groups[uid] = uids
}

// forgetGroup drops the pods of the PodGroup with uid.
func (b *blockedPreemptors) forgetGroup(uid types.UID, pods []*v1.Pod) {
	for _, p := range pods {
		b.forget(p)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.groups, uid)
}

// add remembers pod (the latest version of it) and forgets expired entries.
func (b *blockedPreemptors) add(pod *v1.Pod) {
	now := b.clock.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	for uid, e := range b.pods {
		if now.Sub(e.since) > blockedTTL {
			delete(b.pods, uid)
		}
	}
	b.pods[pod.UID] = blockedPreemptor{pod: pod, since: now}
}

// forget drops pod.
func (b *blockedPreemptors) forget(pod *v1.Pod) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.pods, pod.UID)
}

// takeFor returns the preemptors remembered under uid, keyed by
// namespace/name as Handle.Activate takes them, and forgets them: the pod
// with uid, or every pod of the PodGroup with uid.
func (b *blockedPreemptors) takeFor(uid types.UID) map[string]*v1.Pod {
	now := b.clock.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	uids := []types.UID{uid}
	if members, ok := b.groups[uid]; ok {
		uids = members
		delete(b.groups, uid)
	}
	var out map[string]*v1.Pod
	for _, u := range uids {
		e, ok := b.pods[u]
		delete(b.pods, u)
		if !ok || now.Sub(e.since) > blockedTTL {
			continue
		}
		if out == nil {
			out = map[string]*v1.Pod{}
		}
		out[e.pod.Namespace+"/"+e.pod.Name] = e.pod
	}
	return out
}

// take returns the preemptors remembered, keyed by namespace/name as
// Handle.Activate takes them, and forgets them: a preemptor that budgets
// block again is remembered again by its next PostFilter.
func (b *blockedPreemptors) take() map[string]*v1.Pod {
	now := b.clock.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.pods) == 0 {
		return nil
	}
	pods := make(map[string]*v1.Pod, len(b.pods))
	for uid, e := range b.pods {
		if now.Sub(e.since) <= blockedTTL {
			pods[e.pod.Namespace+"/"+e.pod.Name] = e.pod
		}
		delete(b.pods, uid)
	}
	clear(b.groups)
	return pods
}

// budgetMayFree reports whether a change of a PodDisruptionBudget or a
// PodUnavailableBudget may let a disruption through that the budget refused
// before. oldObj is nil for an added budget, newObj for a deleted one. It
// is the queueing hint of the blocked preemptors: true is Queue, false
// QueueSkip. A new budget never frees anything; a deleted one, a changed
// spec (selector, targetRef, thresholds, unhealthy-pod policy) or a status
// whose numbers moved the right way may.
func budgetMayFree(oldObj, newObj any) bool {
	if newObj == nil {
		return oldObj != nil
	}
	if oldObj == nil {
		return false
	}
	switch n := newObj.(type) {
	case *policyv1.PodDisruptionBudget:
		o, ok := oldObj.(*policyv1.PodDisruptionBudget)
		return !ok || pdbMayFree(o, n)
	}
	if n, ok := budget.PUBOf(newObj); ok {
		o, ok := budget.PUBOf(oldObj)
		return !ok || pubMayFree(o, n)
	}
	return false
}

// pdbMayFree follows the Eviction API's checks: rules 2 to 4 (docs/design.md,
// Budget rules).
func pdbMayFree(o, n *policyv1.PodDisruptionBudget) bool {
	if !equality.Semantic.DeepEqual(o.Spec, n.Spec) {
		return true
	}
	was, is := o.Status, n.Status
	wasStale := was.ObservedGeneration < o.Generation
	isStale := is.ObservedGeneration < n.Generation
	return (wasStale && !isStale) ||
		is.DisruptionsAllowed > was.DisruptionsAllowed ||
		// Unhealthy pods spend nothing once currentHealthy >= desiredHealthy.
		is.CurrentHealthy > was.CurrentHealthy ||
		is.DesiredHealthy < was.DesiredHealthy ||
		len(is.DisruptedPods) < len(was.DisruptedPods)
}

// pubMayFree follows OpenKruise's PUB checks: rule 5 (docs/design.md, Budget
// rules); the protected operations are in the spec (v1beta1), or in an
// annotation.
func pubMayFree(o, n *budget.PUB) bool {
	if !equality.Semantic.DeepEqual(o.Spec, n.Spec) ||
		o.Annotations[budget.AnnotationPUBProtectOperations] != n.Annotations[budget.AnnotationPUBProtectOperations] {
		return true
	}
	was, is := o.Status, n.Status
	return is.UnavailableAllowed > was.UnavailableAllowed ||
		is.DesiredAvailable < was.DesiredAvailable ||
		len(is.DisruptedPods) < len(was.DisruptedPods) ||
		!equality.Semantic.DeepEqual(was.UnavailablePods, is.UnavailablePods)
}

// watchBudgetInformers is watchBudgets on the PDB informer of factory and,
// once the budget cache takes PUBs into account (at start, or later when
// their API becomes served), the cache's PUB informer. Both are the
// informers the cache reads, so no new watch starts.
func (pl *BudgetAwarePreemption) watchBudgetInformers(ctx context.Context, factory informers.SharedInformerFactory) error {
	if err := pl.watchBudgets(ctx, factory.Policy().V1().PodDisruptionBudgets().Informer(), nil); err != nil {
		return err
	}
	// A hold that ends (cancelled for a victim the API server refused,
	// expired when its disruption never happened, or ended by the settle
	// delay or the maximum hold once its pod went) frees its budgets
	// without a budget event; so does a refusal that runs out.
	pl.budgets.OnRelease(func() { pl.activateBlocked(ctx, "a hold on a budget ended") })
	if pl.refused != nil {
		pl.refused.expired = func(uid types.UID) {
			// uid is a pod's, or a gang's PodGroup's.
			if pods := pl.blocked.takeFor(uid); len(pods) > 0 && ctx.Err() == nil {
				logger := klog.FromContext(ctx)
				logger.V(4).Info("Requeueing a preemptor whose refusal ran out", "preemptor", uid, "pods", len(pods))
				pl.fh.Activate(logger, pods)
			}
		}
	}
	pl.budgets.OnPUBSupport(func() {
		if err := pl.watchBudgets(ctx, nil, pl.budgets.PUBInformer()); err != nil {
			klog.FromContext(ctx).Error(err, "Preemptors blocked by PodUnavailableBudgets wait for the scheduling queue's periodic flush: cannot watch PodUnavailableBudgets")
		}
	})
	return nil
}

// watchBudgets activates the blocked preemptors on the changes of the PDBs
// of pdbs and the PUBs of pubs (nil when PUBs are not served) that
// budgetMayFree accepts. The informers are the budget cache's.
func (pl *BudgetAwarePreemption) watchBudgets(ctx context.Context, pdbs, pubs toolscache.SharedIndexInformer) error {
	for _, x := range []struct {
		inf  toolscache.SharedIndexInformer
		kind budget.BudgetKind
	}{{pdbs, budget.KindPDB}, {pubs, budget.KindPUB}} {
		if x.inf == nil {
			continue
		}
		kind := x.kind
		if _, err := x.inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			UpdateFunc: func(oldObj, newObj any) { pl.budgetChanged(ctx, kind, oldObj, newObj) },
			DeleteFunc: func(obj any) {
				if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
					obj = d.Obj
				}
				pl.budgetChanged(ctx, kind, obj, nil)
			},
		}); err != nil {
			return err
		}
	}
	return nil
}

// budgetChanged activates the blocked preemptors when the change may free
// the budget, once the budget cache has handled it.
func (pl *BudgetAwarePreemption) budgetChanged(ctx context.Context, kind budget.BudgetKind, oldObj, newObj any) {
	if !budgetMayFree(oldObj, newObj) {
		return
	}
	pods := pl.blocked.take()
	if len(pods) == 0 {
		return
	}
	old, ok := oldObj.(interface {
		GetNamespace() string
		GetName() string
		GetResourceVersion() string
	})
	logger := klog.FromContext(ctx)
	go func() {
		if ok {
			// The cache has handled the change when it no longer holds the
			// old version.
			_ = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, cacheCatchUp, true, func(context.Context) (bool, error) {
				v, found := pl.budgets.ObservedResourceVersion(kind, old.GetNamespace(), old.GetName())
				return !found || v != old.GetResourceVersion(), nil
			})
		}
		if ctx.Err() != nil {
			return
		}
		logger.V(4).Info("Requeueing preemptors blocked by budgets after a budget change", "kind", kind, "count", len(pods))
		pl.fh.Activate(logger, pods)
	}()
}

// activateBlocked activates every blocked preemptor (why says what freed
// them, for the log).
func (pl *BudgetAwarePreemption) activateBlocked(ctx context.Context, why string) {
	pods := pl.blocked.take()
	if len(pods) == 0 || ctx.Err() != nil {
		return
	}
	logger := klog.FromContext(ctx)
	logger.V(4).Info("Requeueing preemptors blocked by budgets", "why", why, "count", len(pods))
	pl.fh.Activate(logger, pods)
}

// requeueWhenSynced makes sure the preemptors PostFilter turned away while
// the budget cache was not synced are activated once it is. The cache may
// lose its sync after start-up (PUB support turning on late waits for the
// PUB informer), so this is asked for by every such PostFilter, not once;
// one goroutine at a time waits, and it looks again after activating, so a
// preemptor turned away meanwhile is not left behind.
func (pl *BudgetAwarePreemption) requeueWhenSynced() {
	ctx := pl.lifetime
	if ctx == nil {
		ctx = context.Background()
	}
	pl.syncMu.Lock()
	defer pl.syncMu.Unlock()
	pl.syncWanted = true
	if pl.syncWaiting {
		return
	}
	pl.syncWaiting = true
	go func() {
		for {
			if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
				return pl.budgets.HasSynced(), nil
			}); err != nil {
				pl.syncMu.Lock()
				pl.syncWaiting = false
				pl.syncMu.Unlock()
				return
			}
			pl.syncMu.Lock()
			if !pl.syncWanted {
				pl.syncWaiting = false
				pl.syncMu.Unlock()
				return
			}
			pl.syncWanted = false
			pl.syncMu.Unlock()
			pl.activateBlocked(ctx, "the budget cache has synced")
		}
	}()
}

// behindRetry is how long after a StatusBehindPods refusal its preemptor is
// retried. The refusal lasts until the budget's controller writes the
// status, or the pod informer delivers the pod that turned Ready (usually
// within a second); the first is a budget event, the second is not, and
// would leave the preemptor to the scheduling queue's 5-minute flush.
const behindRetry = time.Second

// retryBehind activates pod behindRetry from now, if it is still blocked
// then.
func (pl *BudgetAwarePreemption) retryBehind(uid types.UID) {
	ctx := pl.lifetime
	if ctx == nil {
		ctx = context.Background()
	}
	time.AfterFunc(behindRetry, func() {
		// uid is a pod's, or a gang's PodGroup's.
		if pods := pl.blocked.takeFor(uid); len(pods) > 0 && ctx.Err() == nil {
			logger := klog.FromContext(ctx)
			logger.V(4).Info("Requeueing a preemptor refused while a budget's status was behind its pods", "preemptor", uid, "pods", len(pods))
			pl.fh.Activate(logger, pods)
		}
	})
}

// isBehind reports whether a denial the recorder saw was StatusBehindPods.
func (r *blockRecorder) isBehind() bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.behind
}

// behindAtActuation reports whether de (deniedAtActuation's) is a denial by
// the live count (StatusBehindPods).
func behindAtActuation(de *budget.DeniedError) bool {
	return de != nil && statusBehind(de.Decision)
}
