package sandbox

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// kubelet simulates the kubelets of all Nodes: it makes Nodes Ready and
// untainted, runs bound Pods as their ReadinessAnnotation asks, and finishes
// terminating Pods. It is driven by informer events through a work queue;
// time-based changes (after=, crashloop) are queued for when they are due.
type kubelet struct {
	client            kubernetes.Interface
	pods              corelisters.PodLister
	nodes             corelisters.NodeLister
	queue             workqueue.TypedRateLimitingInterface[kubeletKey]
	capacity          corev1.ResourceList
	crashLoopInterval time.Duration
	now               func() time.Time

	mu   sync.Mutex
	runs map[types.UID]*podState
}

// kubeletKey names a Node (namespace empty and node set) or a Pod.
type kubeletKey struct {
	node      bool
	namespace string
	name      string
}

// String is "node/<name>" or "<namespace>/<name>", for the logs.
func (k kubeletKey) String() string {
	if k.node {
		return "node/" + k.name
	}
	return k.namespace + "/" + k.name
}

// podState is what the kubelet remembers about a pod between syncs.
type podState struct {
	value string // the annotation value that run was made from
	run   podRun
}

const kubeletWorkers = 4

func newKubelet(client kubernetes.Interface, pods coreinformers.PodInformer, nodes coreinformers.NodeInformer, capacity corev1.ResourceList, crashLoopInterval time.Duration) (*kubelet, error) {
	k := &kubelet{
		client:            client,
		pods:              pods.Lister(),
		nodes:             nodes.Lister(),
		capacity:          capacity,
		crashLoopInterval: crashLoopInterval,
		now:               time.Now,
		runs:              map[types.UID]*podState{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[kubeletKey](),
			workqueue.TypedRateLimitingQueueConfig[kubeletKey]{Name: "sandbox-kubelet"},
		),
	}
	nodeKey := func(obj any) {
		if n, ok := obj.(*corev1.Node); ok {
			k.queue.Add(kubeletKey{node: true, name: n.Name})
		}
	}
	if _, err := nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    nodeKey,
		UpdateFunc: func(_, obj any) { nodeKey(obj) },
	}); err != nil {
		return nil, fmt.Errorf("watch nodes: %w", err)
	}
	podKey := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok {
			k.queue.Add(kubeletKey{namespace: p.Namespace, name: p.Name})
		}
	}
	if _, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    podKey,
		UpdateFunc: func(_, obj any) { podKey(obj) },
		DeleteFunc: func(obj any) {
			if p, ok := unwrapDeleted(obj).(*corev1.Pod); ok {
				k.mu.Lock()
				delete(k.runs, p.UID)
				k.mu.Unlock()
			}
		},
	}); err != nil {
		return nil, fmt.Errorf("watch pods: %w", err)
	}
	return k, nil
}

// run processes the queue until ctx is cancelled, and returns when all its
// workers have stopped.
func (k *kubelet) run(ctx context.Context) {
	defer utilruntime.HandleCrash()
	runWorkers(ctx, k.queue, kubeletWorkers, "Simulated kubelet", "object", k.sync)
}

// sync brings a node or a pod up to date, and returns when the pod's status
// will next change by itself.
func (k *kubelet) sync(ctx context.Context, key kubeletKey) (time.Duration, error) {
	if key.node {
		return 0, k.syncNode(ctx, key.name)
	}
	return k.syncPod(ctx, key.namespace, key.name)
}

// syncNode removes the not-ready taint, adds missing well-known labels, and
// writes a Ready status.
func (k *kubelet) syncNode(ctx context.Context, name string) error {
	logger := klog.FromContext(ctx)
	node, err := k.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	nodes := k.client.CoreV1().Nodes()
	get := func(ctx context.Context) (*corev1.Node, error) { return nodes.Get(ctx, name, metav1.GetOptions{}) }

	if err := updateOnConflict(ctx, node, get, desiredNodeMeta, func(ctx context.Context, n *corev1.Node) error {
		_, err := nodes.Update(ctx, n, metav1.UpdateOptions{})
		if err == nil {
			logger.V(2).Info("Simulated kubelet removed the not-ready taint", "node", klog.KObj(n))
		}
		return err
	}); err != nil {
		return fmt.Errorf("update node %s: %w", name, err)
	}

	desired := func(n *corev1.Node) (*corev1.Node, bool) { return desiredNodeStatus(n, k.capacity, k.now()) }
	if err := updateOnConflict(ctx, node, get, desired, func(ctx context.Context, n *corev1.Node) error {
		_, err := nodes.UpdateStatus(ctx, n, metav1.UpdateOptions{})
		if err == nil {
			logger.V(2).Info("Simulated kubelet made the node Ready", "node", klog.KObj(n))
		}
		return err
	}); err != nil {
		return fmt.Errorf("update status of node %s: %w", name, err)
	}
	return nil
}

// syncPod finishes a terminating pod, or writes the status of a bound one. It
// returns when the status will next change by itself.
func (k *kubelet) syncPod(ctx context.Context, namespace, name string) (time.Duration, error) {
	logger := klog.FromContext(ctx)
	pod, err := k.pods.Pods(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if pod.DeletionTimestamp != nil {
		return 0, k.finishPod(ctx, pod)
	}
	if pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return 0, nil
	}

	run := k.podRun(ctx, pod)
	hostIP := k.hostIP(pod.Spec.NodeName)
	pods := k.client.CoreV1().Pods(namespace)
	get := func(ctx context.Context) (*corev1.Pod, error) {
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err == nil && p.UID != pod.UID {
			return nil, apierrors.NewNotFound(corev1.Resource("pods"), name)
		}
		return p, err
	}
	var next time.Duration
	desired := func(p *corev1.Pod) (*corev1.Pod, bool) {
		var d *corev1.Pod
		d, next = desiredPodStatus(p, run, hostIP, k.crashLoopInterval, k.now())
		return d, !apiequality.Semantic.DeepEqual(p.Status, d.Status)
	}
	err = updateOnConflict(ctx, pod, get, desired, func(ctx context.Context, p *corev1.Pod) error {
		_, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{})
		if err == nil {
			logger.V(4).Info("Simulated kubelet updated pod status", "pod", klog.KObj(p),
				"ready", podConditionTrue(p.Status.Conditions, corev1.PodReady))
		}
		return err
	})
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("update status of pod %s/%s: %w", namespace, name, err)
	}
	return next, nil
}

// podRun returns how pod runs now, remembering when its annotation value was
// first seen. An invalid value is logged when it is first seen on the pod.
func (k *kubelet) podRun(ctx context.Context, pod *corev1.Pod) podRun {
	value := pod.Annotations[ReadinessAnnotation]
	k.mu.Lock()
	defer k.mu.Unlock()
	st := k.runs[pod.UID]
	if st != nil && st.value == value {
		return st.run
	}
	mode, err := parseReadiness(value)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Simulated kubelet runs the pod as never Ready", "pod", klog.KObj(pod))
	}
	var restarts int32
	for _, s := range pod.Status.ContainerStatuses {
		restarts = max(restarts, s.RestartCount)
	}
	st = &podState{value: value, run: podRun{mode: mode, since: k.now(), restarts: restarts}}
	k.runs[pod.UID] = st
	return st.run
}

// hostIP returns the node's internal IP, or the fake one the kubelet gives a
// node without addresses.
func (k *kubelet) hostIP(nodeName string) string {
	if node, err := k.nodes.Get(nodeName); err == nil {
		for _, a := range node.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				return a.Address
			}
		}
	}
	return fakeIP("10.240", nodeName)
}

// finishPod deletes a terminating pod with a grace period of 0, as the
// kubelet's status manager does once the containers have stopped. It does so
// whatever the pod's deletionGracePeriodSeconds: one of 0 on a pod that is
// still there is a delete whose second phase never ran (the API server
// writes the deletionTimestamp, then removes the object, and a client that
// dies in between cancels the removal), and the API server removes such a
// pod on the next delete. A pod that finalizers keep stays, unchanged.
func (k *kubelet) finishPod(ctx context.Context, pod *corev1.Pod) error {
	err := k.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      &metav1.Preconditions{UID: &pod.UID},
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete terminating pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	klog.FromContext(ctx).V(2).Info("Simulated kubelet finished a terminating pod", "pod", klog.KObj(pod))
	return nil
}
