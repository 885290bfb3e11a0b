package sandbox

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	kruisepub "github.com/openkruise/kruise-api/apps/pub"
	kruiseclientset "github.com/openkruise/kruise-api/client/clientset/versioned"
	kruiseinformers "github.com/openkruise/kruise-api/client/informers/externalversions"
	kruiselisters "github.com/openkruise/kruise-api/client/listers/policy/v1alpha1"
	policyv1alpha1 "github.com/openkruise/kruise-api/policy/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// This file is the stand-in for the status half of OpenKruise's
// PodUnavailableBudget controller (kruise v1.8.0:
// pkg/controller/podunavailablebudget and pkg/control/pubcontrol), which
// Options.SimulatePUBStatus turns on. It is a simulation of an external
// controller, not a budget decision: budgetguard's rules stay in
// plugins/budget, which reads the status written here.

// Kruise's timeouts for status entries written by its webhook.
const (
	// pubDisruptedPodTimeout is how long a DisruptedPods entry stays
	// while its pod is still active (kruise's DeletionTimeout).
	pubDisruptedPodTimeout = 20 * time.Second
	// pubUnavailablePodTimeout is how long an UnavailablePods entry stays
	// (kruise's UpdatedDelayCheckTime).
	pubUnavailablePodTimeout = 10 * time.Second
)

const pubStatusWorkers = 2

// The workloads the simulation resolves, by API group and kind.
var (
	pubKindReplicaSet  = appsv1.SchemeGroupVersion.WithKind("ReplicaSet").GroupKind()
	pubKindDeployment  = appsv1.SchemeGroupVersion.WithKind("Deployment").GroupKind()
	pubKindStatefulSet = appsv1.SchemeGroupVersion.WithKind("StatefulSet").GroupKind()
	pubKindRC          = corev1.SchemeGroupVersion.WithKind("ReplicationController").GroupKind()
)

// pubCoverage is what a PodUnavailableBudget counts: the active pods it
// covers and the number of pods it expects (status.totalReplicas).
type pubCoverage struct {
	pods     []*corev1.Pod
	expected int32
}

// computePUBStatus returns the status that kruise's controller writes for
// pub when it covers cov at now, and when the first DisruptedPods or
// UnavailablePods entry that it keeps expires (zero if none). It fails only
// for a maxUnavailable or minAvailable that is neither an integer nor a
// percentage; kruise then writes nothing.
func computePUBStatus(pub *policyv1alpha1.PodUnavailableBudget, cov pubCoverage, now time.Time) (policyv1alpha1.PodUnavailableBudgetStatus, time.Time, error) {
	desired, err := pubDesiredAvailable(pub.Spec, cov.expected)
	if err != nil {
		return policyv1alpha1.PodUnavailableBudgetStatus{}, time.Time{}, err
	}
	disrupted, unavailable, recheck := keepPUBPodEntries(pub.Status, cov.pods, now)
	var current int32
	for _, pod := range cov.pods {
		_, isDisrupted := disrupted[pod.Name]
		_, isUnavailable := unavailable[pod.Name]
		if podActive(pod) && !isDisrupted && !isUnavailable && pubPodAvailable(pod) {
			current++
		}
	}
	return policyv1alpha1.PodUnavailableBudgetStatus{
		ObservedGeneration: pub.Generation,
		DisruptedPods:      disrupted,
		UnavailablePods:    unavailable,
		// Kruise never writes a negative value.
		UnavailableAllowed: max(current-desired, 0),
		CurrentAvailable:   current,
		DesiredAvailable:   desired,
		TotalReplicas:      cov.expected,
	}, recheck, nil
}

// pubDesiredAvailable is kruise's desiredAvailable: expected minus
// maxUnavailable (a percentage of expected rounded up), at least 0; else
// minAvailable (a percentage rounded up); else 0.
func pubDesiredAvailable(spec policyv1alpha1.PodUnavailableBudgetSpec, expected int32) (int32, error) {
	switch {
	case spec.MaxUnavailable != nil:
		n, err := intstr.GetScaledValueFromIntOrPercent(spec.MaxUnavailable, int(expected), true)
		if err != nil {
			return 0, fmt.Errorf("spec.maxUnavailable %q: want an integer or a percentage such as \"25%%\": %w", spec.MaxUnavailable.String(), err)
		}
		return max(expected-int32(n), 0), nil
	case spec.MinAvailable != nil:
		n, err := intstr.GetScaledValueFromIntOrPercent(spec.MinAvailable, int(expected), true)
		if err != nil {
			return 0, fmt.Errorf("spec.minAvailable %q: want an integer or a percentage such as \"75%%\": %w", spec.MinAvailable.String(), err)
		}
		return int32(n), nil
	}
	return 0, nil
}

// keepPUBPodEntries returns the DisruptedPods and UnavailablePods entries of
// st that kruise keeps: those of covered active pods that have not timed out
// (nil maps when none is left), and when the first kept entry times out.
func keepPUBPodEntries(st policyv1alpha1.PodUnavailableBudgetStatus, pods []*corev1.Pod, now time.Time) (disrupted, unavailable map[string]metav1.Time, recheck time.Time) {
	keep := func(entries map[string]metav1.Time, name string, timeout time.Duration, into *map[string]metav1.Time) {
		at, ok := entries[name]
		if !ok {
			return
		}
		expires := at.Add(timeout)
		if expires.Before(now) {
			return
		}
		if *into == nil {
			*into = map[string]metav1.Time{}
		}
		(*into)[name] = at
		if recheck.IsZero() || expires.Before(recheck) {
			recheck = expires
		}
	}
	for _, pod := range pods {
		if !podActive(pod) {
			continue
		}
		keep(st.DisruptedPods, pod.Name, pubDisruptedPodTimeout, &disrupted)
		keep(st.UnavailablePods, pod.Name, pubUnavailablePodTimeout, &unavailable)
	}
	return disrupted, unavailable, recheck
}

// podActive is kubecontroller.IsPodActive: not Succeeded, Failed or
// terminating.
func podActive(pod *corev1.Pod) bool {
	return pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed && pod.DeletionTimestamp == nil
}

// pubPodAvailable is kruise's IsPodReady: Running, Ready, not terminating,
// and without an unavailable-pod.kruise.io/ label. Kruise also requires the
// pod's state to be consistent (no in-place update or sidecar upgrade under
// way); the sandbox updates no pod in place, so that is left out.
func pubPodAvailable(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning || pod.DeletionTimestamp != nil ||
		!podConditionTrue(pod.Status.Conditions, corev1.PodReady) {
		return false
	}
	for key := range pod.Labels {
		if strings.HasPrefix(key, kruisepub.PubUnavailablePodLabelPrefix) {
			return false
		}
	}
	return true
}

// pubWorkloads reads the pods and workloads a PodUnavailableBudget covers.
type pubWorkloads struct {
	pods         corelisters.PodLister
	rcs          corelisters.ReplicationControllerLister
	replicaSets  appslisters.ReplicaSetLister
	deployments  appslisters.DeploymentLister
	statefulSets appslisters.StatefulSetLister
}

// coverage returns what pub covers, as kruise's GetPodsForPub does. A
// problem with pub's spec or annotations comes back as an error together
// with the coverage that kruise computes in that case (usually none); the
// status is still written from it.
func (w pubWorkloads) coverage(pub *policyv1alpha1.PodUnavailableBudget) (pubCoverage, error) {
	var cov pubCoverage
	var problem error
	switch {
	case pub.Spec.TargetReference != nil:
		// Kruise: targetRef takes priority over selector.
		cov, problem = w.targetCoverage(pub.Namespace, pub.Spec.TargetReference)
	case pub.Spec.Selector == nil:
		return pubCoverage{}, errors.New("spec has neither targetRef nor selector, so it covers no pods")
	default:
		sel, err := metav1.LabelSelectorAsSelector(pub.Spec.Selector)
		if err != nil {
			return pubCoverage{}, fmt.Errorf("spec.selector: %w; it covers no pods", err)
		}
		pods, _ := w.pods.Pods(pub.Namespace).List(sel)
		cov.pods = activePods(pods, nil)
		cov.expected = w.expectedScale(pub.Namespace, cov.pods)
	}
	if value := pub.Annotations[policyv1alpha1.PubProtectTotalReplicasAnnotation]; value != "" {
		n, err := strconv.ParseInt(value, 10, 32)
		if err != nil {
			n = 0 // as kruise, which ignores the parse error
			problem = errors.Join(problem, fmt.Errorf("annotation %s: %q is not a 32-bit integer; counting 0 expected pods, as kruise does",
				policyv1alpha1.PubProtectTotalReplicasAnnotation, value))
		}
		cov.expected = int32(n)
	}
	return cov, problem
}

// targetCoverage is kruise's GetPodsForRef: the workload's spec.replicas,
// and the active pods with an owner reference to it, or for a Deployment to
// one of its ReplicaSets. A missing or deleting workload, or one with zero
// replicas, covers nothing.
func (w pubWorkloads) targetCoverage(namespace string, ref *policyv1alpha1.TargetReference) (pubCoverage, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return pubCoverage{}, fmt.Errorf("spec.targetRef.apiVersion %q: %w; it covers no pods", ref.APIVersion, err)
	}
	var replicas int32
	var owners []types.UID
	switch gk := (schema.GroupKind{Group: gv.Group, Kind: ref.Kind}); gk {
	case pubKindReplicaSet:
		rs, err := w.replicaSets.ReplicaSets(namespace).Get(ref.Name)
		if err != nil || rs.DeletionTimestamp != nil {
			return pubCoverage{}, nil
		}
		replicas, owners = ptr.Deref(rs.Spec.Replicas, 1), []types.UID{rs.UID}
	case pubKindStatefulSet:
		ss, err := w.statefulSets.StatefulSets(namespace).Get(ref.Name)
		if err != nil || ss.DeletionTimestamp != nil {
			return pubCoverage{}, nil
		}
		replicas, owners = ptr.Deref(ss.Spec.Replicas, 1), []types.UID{ss.UID}
	case pubKindRC:
		rc, err := w.rcs.ReplicationControllers(namespace).Get(ref.Name)
		if err != nil || rc.DeletionTimestamp != nil {
			return pubCoverage{}, nil
		}
		replicas, owners = ptr.Deref(rc.Spec.Replicas, 1), []types.UID{rc.UID}
	case pubKindDeployment:
		d, err := w.deployments.Deployments(namespace).Get(ref.Name)
		if err != nil || d.DeletionTimestamp != nil {
			return pubCoverage{}, nil
		}
		replicas = ptr.Deref(d.Spec.Replicas, 1)
		owners = w.replicaSetsOf(d)
		if len(owners) == 0 {
			owners = []types.UID{d.UID}
		}
	default:
		return pubCoverage{}, fmt.Errorf("spec.targetRef: kind %q of apiVersion %q is not simulated (the sandbox resolves Deployment, ReplicaSet and StatefulSet of apps, and ReplicationController); it covers no pods",
			ref.Kind, ref.APIVersion)
	}
	if replicas == 0 {
		return pubCoverage{}, nil
	}
	pods, _ := w.pods.Pods(namespace).List(labels.Everything())
	return pubCoverage{pods: activePods(pods, owners), expected: replicas}, nil
}

// replicaSetsOf returns the UIDs of d's ReplicaSets that are not being
// deleted, including those scaled to zero.
func (w pubWorkloads) replicaSetsOf(d *appsv1.Deployment) []types.UID {
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil
	}
	rss, _ := w.replicaSets.ReplicaSets(d.Namespace).List(sel)
	var uids []types.UID
	for _, rs := range rss {
		if ref := metav1.GetControllerOf(rs); rs.DeletionTimestamp == nil && ref != nil && ref.UID == d.UID {
			uids = append(uids, rs.UID)
		}
	}
	return uids
}

// activePods returns the active pods, only those with an owner reference to
// one of owners unless owners is nil.
func activePods(pods []*corev1.Pod, owners []types.UID) []*corev1.Pod {
	var out []*corev1.Pod
	for _, pod := range pods {
		if !podActive(pod) {
			continue
		}
		if owners != nil && !ownedByAny(pod, owners) {
			continue
		}
		out = append(out, pod)
	}
	return out
}

func ownedByAny(pod *corev1.Pod, owners []types.UID) bool {
	for _, ref := range pod.OwnerReferences {
		for _, uid := range owners {
			if ref.UID == uid {
				return true
			}
		}
	}
	return false
}

// expectedScale is kruise's GetExpectedScaleForPods: the sum of
// spec.replicas of the workloads that control pods, a ReplicaSet of a
// Deployment counting as the Deployment, each workload once. Pods without a
// controller add nothing. Kruise asks the scale subresource of other kinds
// (and counts -1 for an owner without one); the sandbox adds nothing for
// them.
func (w pubWorkloads) expectedScale(namespace string, pods []*corev1.Pod) int32 {
	seen := map[types.UID]bool{}
	scale := map[types.UID]int32{}
	for _, pod := range pods {
		ref := metav1.GetControllerOf(pod)
		if ref == nil || seen[ref.UID] {
			continue
		}
		seen[ref.UID] = true
		if uid, n, ok := w.workloadScale(namespace, ref); ok {
			scale[uid] = n
		}
	}
	var sum int32
	for _, n := range scale {
		sum += n
	}
	return sum
}

// workloadScale returns the UID and spec.replicas of the workload ref names,
// following a ReplicaSet to its Deployment, if it exists with ref's UID and
// is not being deleted.
func (w pubWorkloads) workloadScale(namespace string, ref *metav1.OwnerReference) (types.UID, int32, bool) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return "", 0, false
	}
	var obj metav1.Object
	var replicas *int32
	switch (schema.GroupKind{Group: gv.Group, Kind: ref.Kind}) {
	case pubKindReplicaSet:
		rs, err := w.replicaSets.ReplicaSets(namespace).Get(ref.Name)
		if err != nil || rs.UID != ref.UID {
			return "", 0, false
		}
		if owner := metav1.GetControllerOf(rs); owner != nil && owner.Kind == pubKindDeployment.Kind {
			return w.workloadScale(namespace, owner)
		}
		obj, replicas = rs, rs.Spec.Replicas
	case pubKindDeployment:
		d, err := w.deployments.Deployments(namespace).Get(ref.Name)
		if err != nil {
			return "", 0, false
		}
		obj, replicas = d, d.Spec.Replicas
	case pubKindStatefulSet:
		ss, err := w.statefulSets.StatefulSets(namespace).Get(ref.Name)
		if err != nil {
			return "", 0, false
		}
		obj, replicas = ss, ss.Spec.Replicas
	case pubKindRC:
		rc, err := w.rcs.ReplicationControllers(namespace).Get(ref.Name)
		if err != nil {
			return "", 0, false
		}
		obj, replicas = rc, rc.Spec.Replicas
	default:
		return "", 0, false
	}
	if obj.GetUID() != ref.UID || obj.GetDeletionTimestamp() != nil {
		return "", 0, false
	}
	return obj.GetUID(), ptr.Deref(replicas, 1), true
}

// pubStatusController writes the status of PodUnavailableBudgets from
// informers. It reconciles a PUB when the PUB changes, when a pod or
// workload of its namespace changes in a way that can change its status,
// and when a DisruptedPods or UnavailablePods entry times out.
type pubStatusController struct {
	client        kruiseclientset.Interface
	kruiseFactory kruiseinformers.SharedInformerFactory
	pubs          kruiselisters.PodUnavailableBudgetLister
	workloads     pubWorkloads
	synced        []cache.InformerSynced
	queue         workqueue.TypedRateLimitingInterface[cache.ObjectName]
	now           func() time.Time

	mu     sync.Mutex
	warned map[cache.ObjectName]string // the last problem logged per PUB
}

// startPUBStatus starts the PodUnavailableBudget status simulation on
// factory's informers in a goroutine tracked by wg, until ctx is cancelled.
// The caller starts factory afterwards.
func startPUBStatus(ctx context.Context, wg *sync.WaitGroup, cfg *rest.Config, factory informers.SharedInformerFactory) error {
	client, err := kruiseclientset.NewForConfig(rest.AddUserAgent(rest.CopyConfig(cfg), "sandbox-pub-status"))
	if err != nil {
		return fmt.Errorf("create kruise client for the PodUnavailableBudget status simulation: %w", err)
	}
	c, err := newPUBStatusController(client, factory)
	if err != nil {
		return err
	}
	wg.Go(func() { c.run(ctx) })
	return nil
}

func newPUBStatusController(client kruiseclientset.Interface, factory informers.SharedInformerFactory) (*pubStatusController, error) {
	kf := kruiseinformers.NewSharedInformerFactory(client, 0)
	pubInformer := kf.Policy().V1alpha1().PodUnavailableBudgets()
	pods := factory.Core().V1().Pods()
	rcs := factory.Core().V1().ReplicationControllers()
	rss := factory.Apps().V1().ReplicaSets()
	deployments := factory.Apps().V1().Deployments()
	statefulSets := factory.Apps().V1().StatefulSets()
	c := &pubStatusController{
		client:        client,
		kruiseFactory: kf,
		pubs:          pubInformer.Lister(),
		workloads: pubWorkloads{
			pods:         pods.Lister(),
			rcs:          rcs.Lister(),
			replicaSets:  rss.Lister(),
			deployments:  deployments.Lister(),
			statefulSets: statefulSets.Lister(),
		},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName](),
			workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: "sandbox-pub-status"},
		),
		now:    time.Now,
		warned: map[cache.ObjectName]string{},
	}

	enqueuePUB := func(obj any) {
		if pub, ok := unwrapDeleted(obj).(*policyv1alpha1.PodUnavailableBudget); ok {
			c.queue.Add(cache.MetaObjectToName(pub))
		}
	}
	handlers := []struct {
		informer cache.SharedIndexInformer
		handler  cache.ResourceEventHandler
	}{
		{pubInformer.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    enqueuePUB,
			UpdateFunc: func(_, obj any) { enqueuePUB(obj) },
			DeleteFunc: enqueuePUB,
		}},
		{pods.Informer(), c.namespaceHandler(func(old, cur metav1.Object) bool {
			o, c := old.(*corev1.Pod), cur.(*corev1.Pod)
			return podActive(o) != podActive(c) || pubPodAvailable(o) != pubPodAvailable(c)
		})},
		{rcs.Informer(), c.namespaceHandler(replicasChanged(func(o *corev1.ReplicationController) *int32 { return o.Spec.Replicas }))},
		{rss.Informer(), c.namespaceHandler(replicasChanged(func(o *appsv1.ReplicaSet) *int32 { return o.Spec.Replicas }))},
		{deployments.Informer(), c.namespaceHandler(replicasChanged(func(o *appsv1.Deployment) *int32 { return o.Spec.Replicas }))},
		{statefulSets.Informer(), c.namespaceHandler(replicasChanged(func(o *appsv1.StatefulSet) *int32 { return o.Spec.Replicas }))},
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
	pubs, _ := c.pubs.PodUnavailableBudgets(namespace).List(labels.Everything())
	for _, pub := range pubs {
		c.queue.Add(cache.MetaObjectToName(pub))
	}
}

func unwrapDeleted(obj any) any {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Obj
	}
	return obj
}

// run starts the PUB informer, waits for the caches and processes the queue
// until ctx is cancelled; it returns when its workers have stopped and the
// PUB informer has shut down.
func (c *pubStatusController) run(ctx context.Context) {
	defer utilruntime.HandleCrash()
	defer c.kruiseFactory.Shutdown()
	defer c.queue.ShutDown()
	c.kruiseFactory.Start(ctx.Done())
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.synced...) {
		return
	}
	klog.FromContext(ctx).V(1).Info("Simulating PodUnavailableBudget status, as OpenKruise's controller would")
	var wg sync.WaitGroup
	for range pubStatusWorkers {
		wg.Go(func() { wait.UntilWithContext(ctx, c.worker, time.Second) })
	}
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
}

func (c *pubStatusController) worker(ctx context.Context) {
	for c.processNext(ctx) {
	}
}

func (c *pubStatusController) processNext(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	recheck, err := c.sync(ctx, key)
	if err != nil {
		if ctx.Err() == nil {
			klog.FromContext(ctx).V(2).Info("PodUnavailableBudget status simulation will retry", "podUnavailableBudget", key, "err", err)
		}
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	if recheck > 0 {
		c.queue.AddAfter(key, recheck)
	}
	return true
}

// sync writes the status of one PUB if it differs from what kruise would
// compute, and returns when it must be computed again because an entry of
// DisruptedPods or UnavailablePods times out (zero if never).
func (c *pubStatusController) sync(ctx context.Context, key cache.ObjectName) (time.Duration, error) {
	logger := klog.FromContext(ctx)
	pub, err := c.pubs.PodUnavailableBudgets(key.Namespace).Get(key.Name)
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

	cov, problem := c.workloads.coverage(pub)
	now := c.now()
	var recheck time.Time
	var invalid error
	pubs := c.client.PolicyV1alpha1().PodUnavailableBudgets(key.Namespace)
	get := func(ctx context.Context) (*policyv1alpha1.PodUnavailableBudget, error) {
		return pubs.Get(ctx, key.Name, metav1.GetOptions{})
	}
	desired := func(p *policyv1alpha1.PodUnavailableBudget) (*policyv1alpha1.PodUnavailableBudget, bool) {
		st, at, err := computePUBStatus(p, cov, now)
		invalid, recheck = err, at
		if err != nil || apiequality.Semantic.DeepEqual(p.Status, st) {
			return p, false
		}
		want := p.DeepCopy()
		want.Status = st
		return want, true
	}
	err = updateOnConflict(ctx, pub, get, desired, func(ctx context.Context, p *policyv1alpha1.PodUnavailableBudget) error {
		_, err := pubs.UpdateStatus(ctx, p, metav1.UpdateOptions{})
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
