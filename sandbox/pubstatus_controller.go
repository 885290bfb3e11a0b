package sandbox

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	kruisebeta "github.com/budgetguard/budgetguard/apis/kruise/policy/v1beta1"
)

// This file is the controller half of the PodUnavailableBudget status
// simulation: it watches PUBs, pods and workloads, and writes the status
// that pubstatus.go computes, as OpenKruise's controller would. It reads and
// writes PUBs at policy.kruise.io/v1beta1 (pubclient.go): a status written
// at v1alpha1 would be computed from a PUB that has lost
// spec.ignoredPodSelector and carries its spec through v1alpha1.

const pubStatusWorkers = 2

// pubStatusController writes the status of PodUnavailableBudgets from
// informers. It reconciles a PUB when the PUB changes, when a pod or
// workload of its namespace changes in a way that can change its status,
// and when a DisruptedPods or UnavailablePods entry times out.
type pubStatusController struct {
	client      pubClient
	pubInformer cache.SharedIndexInformer
	workloads   pubWorkloads
	synced      []cache.InformerSynced
	queue       workqueue.TypedRateLimitingInterface[cache.ObjectName]
	now         func() time.Time
	// selector picks the PUBs whose status is simulated; nil for all.
	selector labels.Selector

	mu     sync.Mutex
	warned map[cache.ObjectName]string // the last problem logged per PUB
}

// startPUBStatus starts the PodUnavailableBudget status simulation on
// factory's informers in a goroutine tracked by wg, until ctx is cancelled.
// The caller starts factory afterwards.
func startPUBStatus(ctx context.Context, wg *sync.WaitGroup, cfg *rest.Config, factory informers.SharedInformerFactory, selector labels.Selector) error {
	client, err := newPUBClient(rest.AddUserAgent(rest.CopyConfig(cfg), "sandbox-pub-status"))
	if err != nil {
		return fmt.Errorf("PodUnavailableBudget status simulation: %w", err)
	}
	c, err := newPUBStatusController(client, factory)
	if err != nil {
		return err
	}
	c.selector = selector
	wg.Go(func() { c.run(ctx) })
	return nil
}

func newPUBStatusController(client pubClient, factory informers.SharedInformerFactory) (*pubStatusController, error) {
	pubInformer := cache.NewSharedIndexInformer(pubListWatch(client), &kruisebeta.PodUnavailableBudget{}, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	c := &pubStatusController{
		client:      client,
		pubInformer: pubInformer,
		workloads:   newPUBWorkloads(factory),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName](),
			workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: "sandbox-pub-status"},
		),
		now:    time.Now,
		warned: map[cache.ObjectName]string{},
	}

	enqueuePUB := func(obj any) {
		if pub, ok := unwrapDeleted(obj).(*kruisebeta.PodUnavailableBudget); ok {
			c.queue.Add(cache.MetaObjectToName(pub))
		}
	}
	handlers := []struct {
		informer cache.SharedIndexInformer
		handler  cache.ResourceEventHandler
	}{
		{pubInformer, cache.ResourceEventHandlerFuncs{
			AddFunc:    enqueuePUB,
			UpdateFunc: func(_, obj any) { enqueuePUB(obj) },
			DeleteFunc: enqueuePUB,
		}},
		{factory.Core().V1().Pods().Informer(), c.namespaceHandler(func(old, cur metav1.Object) bool {
			o, c := old.(*corev1.Pod), cur.(*corev1.Pod)
			return podActive(o) != podActive(c) || pubPodAvailable(o) != pubPodAvailable(c)
		})},
		{factory.Core().V1().ReplicationControllers().Informer(), c.namespaceHandler(replicasChanged(func(o *corev1.ReplicationController) *int32 { return o.Spec.Replicas }))},
		{factory.Apps().V1().ReplicaSets().Informer(), c.namespaceHandler(replicasChanged(func(o *appsv1.ReplicaSet) *int32 { return o.Spec.Replicas }))},
		{factory.Apps().V1().Deployments().Informer(), c.namespaceHandler(replicasChanged(func(o *appsv1.Deployment) *int32 { return o.Spec.Replicas }))},
		{factory.Apps().V1().StatefulSets().Informer(), c.namespaceHandler(replicasChanged(func(o *appsv1.StatefulSet) *int32 { return o.Spec.Replicas }))},
	}
	for _, h := range handlers {
		if _, err := h.informer.AddEventHandler(h.handler); err != nil {
			return nil, fmt.Errorf("PodUnavailableBudget status simulation: add event handler: %w", err)
		}
		c.synced = append(c.synced, h.informer.HasSynced)
	}
	return c, nil
}

// namespaceHandler queues every PUB in the namespace of an added or deleted
// object, and of an updated one whose labels, owners or deletion changed or
// for which changed reports true.
func (c *pubStatusController) namespaceHandler(changed func(old, cur metav1.Object) bool) cache.ResourceEventHandler {
	enqueue := func(obj any) {
		if o, ok := unwrapDeleted(obj).(metav1.Object); ok {
			c.enqueueNamespace(o.GetNamespace())
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		DeleteFunc: enqueue,
		UpdateFunc: func(oldObj, curObj any) {
			old, ok1 := oldObj.(metav1.Object)
			cur, ok2 := curObj.(metav1.Object)
			if !ok1 || !ok2 {
				return
			}
			if !maps.Equal(old.GetLabels(), cur.GetLabels()) ||
				!apiequality.Semantic.DeepEqual(old.GetOwnerReferences(), cur.GetOwnerReferences()) ||
				(old.GetDeletionTimestamp() == nil) != (cur.GetDeletionTimestamp() == nil) ||
				changed(old, cur) {
				c.enqueueNamespace(cur.GetNamespace())
			}
		},
	}
}

// replicasChanged reports whether an update of a workload of type T changed
// its spec.replicas.
func replicasChanged[T metav1.Object](replicas func(T) *int32) func(old, cur metav1.Object) bool {
	return func(old, cur metav1.Object) bool {
		o, ok1 := old.(T)
		c, ok2 := cur.(T)
		return ok1 && ok2 && ptr.Deref(replicas(o), 1) != ptr.Deref(replicas(c), 1)
	}
}

func (c *pubStatusController) enqueueNamespace(namespace string) {
	pubs, _ := c.pubInformer.GetIndexer().ByIndex(cache.NamespaceIndex, namespace)
	for _, obj := range pubs {
		if pub, ok := obj.(*kruisebeta.PodUnavailableBudget); ok {
			c.queue.Add(cache.MetaObjectToName(pub))
		}
	}
}

// pub returns the PUB key from the informer's cache.
func (c *pubStatusController) pub(key cache.ObjectName) (*kruisebeta.PodUnavailableBudget, error) {
	obj, ok, err := c.pubInformer.GetIndexer().GetByKey(key.String())
	if err != nil {
		return nil, err
	}
	pub, isPUB := obj.(*kruisebeta.PodUnavailableBudget)
	if !ok || !isPUB {
		return nil, apierrors.NewNotFound(kruisebeta.Resource(PUBResource), key.Name)
	}
	return pub, nil
}

// run starts the PUB informer, waits for the caches and processes the queue
// until ctx is cancelled; it returns when its workers have stopped and the
// PUB informer has shut down.
func (c *pubStatusController) run(ctx context.Context) {
	defer utilruntime.HandleCrash()
	var informer sync.WaitGroup
	defer informer.Wait()
	defer c.queue.ShutDown()
	informerCtx, stopInformer := context.WithCancel(ctx)
	defer stopInformer()
	informer.Go(func() { c.pubInformer.RunWithContext(informerCtx) })
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.synced...) {
		return
	}
	klog.FromContext(ctx).V(1).Info("Simulating PodUnavailableBudget status, as OpenKruise's controller would")
	runWorkers(ctx, c.queue, pubStatusWorkers, "PodUnavailableBudget status simulation", "podUnavailableBudget", c.sync)
}

// sync writes the status of one PUB if it differs from what kruise would
// compute, and returns when it must be computed again because an entry of
// DisruptedPods or UnavailablePods times out (zero if never).
func (c *pubStatusController) sync(ctx context.Context, key cache.ObjectName) (time.Duration, error) {
	logger := klog.FromContext(ctx)
	pub, err := c.pub(key)
	if apierrors.IsNotFound(err) {
		c.mu.Lock()
		delete(c.warned, key)
		c.mu.Unlock()
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if pub.DeletionTimestamp != nil {
		return 0, nil
	}
	if c.selector != nil && !c.selector.Matches(labels.Set(pub.Labels)) {
		// Someone else writes its status.
		return 0, nil
	}

	cov, problem := c.workloads.coverage(pub)
	now := c.now()
	var recheck time.Time
	var invalid error
	get := func(ctx context.Context) (*kruisebeta.PodUnavailableBudget, error) {
		return c.client.Get(ctx, key.Namespace, key.Name)
	}
	desired := func(p *kruisebeta.PodUnavailableBudget) (*kruisebeta.PodUnavailableBudget, bool) {
		st, at, err := computePUBStatus(p, cov, now)
		invalid, recheck = err, at
		if err != nil || apiequality.Semantic.DeepEqual(p.Status, st) {
			return p, false
		}
		want := p.DeepCopy()
		want.Status = st
		return want, true
	}
	// The write carries the resourceVersion read: a conflict reads again.
	err = updateOnConflict(ctx, pub, get, desired, func(ctx context.Context, p *kruisebeta.PodUnavailableBudget) error {
		err := c.client.UpdateStatus(ctx, p)
		if err == nil {
			st := p.Status
			logger.V(2).Info("Simulated PodUnavailableBudget status", "podUnavailableBudget", klog.KObj(p),
				"totalReplicas", st.TotalReplicas, "desiredAvailable", st.DesiredAvailable, "currentAvailable", st.CurrentAvailable,
				"unavailableAllowed", st.UnavailableAllowed, "disruptedPods", len(st.DisruptedPods), "unavailablePods", len(st.UnavailablePods))
		}
		return err
	})
	c.warn(logger, key, errors.Join(problem, invalid))
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("update status of PodUnavailableBudget %s: %w", key, err)
	}
	if recheck.IsZero() {
		return 0, nil
	}
	return max(recheck.Sub(c.now()), 0) + time.Millisecond, nil
}

// warn logs problem for the PUB key unless it was the last one logged for
// it; a nil problem clears the record.
func (c *pubStatusController) warn(logger klog.Logger, key cache.ObjectName, problem error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if problem == nil {
		delete(c.warned, key)
		return
	}
	if c.warned[key] == problem.Error() {
		return
	}
	c.warned[key] = problem.Error()
	logger.Error(problem, "PodUnavailableBudget cannot be simulated as written; its status follows what OpenKruise does in this case", "podUnavailableBudget", key)
}
