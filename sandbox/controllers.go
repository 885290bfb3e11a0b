package sandbox

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	"k8s.io/kubernetes/pkg/controller/deployment"
	"k8s.io/kubernetes/pkg/controller/disruption"
	"k8s.io/kubernetes/pkg/controller/replicaset"
)

// Workers per controller, as kube-controller-manager's defaults scaled down
// for a small cluster.
const (
	replicaSetWorkers = 5
	deploymentWorkers = 5
	// disruptionWorkers is kube-controller-manager's default
	// (--concurrent-disruption-syncs).
	disruptionWorkers = 1
)

// newRESTMapper returns a RESTMapper over cached discovery. Call Reset on it
// after new API groups (CRDs) appear.
func newRESTMapper(disco discovery.DiscoveryInterface) *restmapper.DeferredDiscoveryRESTMapper {
	return restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))
}

// protobufConfig returns a copy of cfg that speaks protobuf, which only
// clients of built-in APIs can use.
func protobufConfig(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.ContentType = runtime.ContentTypeProtobuf
	c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return c
}

// clientFor returns a protobuf clientset for the built-in APIs whose requests
// carry userAgent, so that the apiserver's logs and audit tell the components
// apart.
func clientFor(cfg *rest.Config, userAgent string) (kubernetes.Interface, error) {
	c, err := kubernetes.NewForConfig(rest.AddUserAgent(protobufConfig(cfg), userAgent))
	if err != nil {
		return nil, fmt.Errorf("create client for %s: %w", userAgent, err)
	}
	return c, nil
}

// startControllers creates the disruption, ReplicaSet and Deployment
// controllers and the simulated kubelet on factory's informers, and runs them
// in goroutines tracked by wg until ctx is cancelled. componentCtx carries the
// logger for the upstream controllers, kubeletCtx the one for the kubelet.
// The caller starts factory afterwards.
func startControllers(componentCtx, kubeletCtx context.Context, wg *sync.WaitGroup, cfg *rest.Config, factory informers.SharedInformerFactory, mapper *restmapper.DeferredDiscoveryRESTMapper, opts Options) error {
	disruptionClient, err := clientFor(cfg, "sandbox-disruption-controller")
	if err != nil {
		return err
	}
	scaleClient, err := scale.NewForConfig(rest.AddUserAgent(rest.CopyConfig(cfg), "sandbox-disruption-controller"),
		mapper, dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(disruptionClient.Discovery()))
	if err != nil {
		return fmt.Errorf("create scale client: %w", err)
	}
	dc := disruption.NewDisruptionController(componentCtx,
		factory.Core().V1().Pods(),
		factory.Policy().V1().PodDisruptionBudgets(),
		factory.Core().V1().ReplicationControllers(),
		factory.Apps().V1().ReplicaSets(),
		factory.Apps().V1().Deployments(),
		factory.Apps().V1().StatefulSets(),
		disruptionClient,
		mapper,
		scaleClient,
		disruptionClient.Discovery(),
	)

	rsClient, err := clientFor(cfg, "sandbox-replicaset-controller")
	if err != nil {
		return err
	}
	rsc := replicaset.NewReplicaSetController(componentCtx,
		factory.Apps().V1().ReplicaSets(),
		factory.Core().V1().Pods(),
		rsClient,
		replicaset.BurstReplicas,
	)

	dClient, err := clientFor(cfg, "sandbox-deployment-controller")
	if err != nil {
		return err
	}
	dpc, err := deployment.NewDeploymentController(componentCtx,
		factory.Apps().V1().Deployments(),
		factory.Apps().V1().ReplicaSets(),
		factory.Core().V1().Pods(),
		dClient,
	)
	if err != nil {
		return fmt.Errorf("create deployment controller: %w", err)
	}

	kubeletClient, err := clientFor(cfg, "sandbox-kubelet")
	if err != nil {
		return err
	}
	kl, err := newKubelet(kubeletClient, factory.Core().V1().Pods(), factory.Core().V1().Nodes(), opts.NodeCapacity, opts.CrashLoopInterval)
	if err != nil {
		return fmt.Errorf("create simulated kubelet: %w", err)
	}

	wg.Go(func() { dc.Run(componentCtx, disruptionWorkers) })
	wg.Go(func() { rsc.Run(componentCtx, replicaSetWorkers) })
	wg.Go(func() { dpc.Run(componentCtx, deploymentWorkers) })
	wg.Go(func() { kl.run(kubeletCtx) })
	return nil
}

// waitForCacheSync waits until the informers of factory have synced.
func waitForCacheSync(ctx context.Context, factory informers.SharedInformerFactory, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("informer cache for %v did not sync within %s", typ, timeout)
		}
	}
	return nil
}
