package sandbox

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/controller-manager/pkg/informerfactory"
	"k8s.io/kubernetes/pkg/controller/clusterroleaggregation"
	"k8s.io/kubernetes/pkg/controller/garbagecollector"
	namespacecontroller "k8s.io/kubernetes/pkg/controller/namespace"
	"k8s.io/kubernetes/pkg/controller/statefulset"
)

// Workers and periods of the controllers that make the sandbox behave like a
// cluster beyond what the scenarios exercise: kube-controller-manager's
// defaults, scaled down for a small cluster.
const (
	statefulSetWorkers   = 5
	gcWorkers            = 5
	gcSyncPeriod         = 30 * time.Second
	namespaceWorkers     = 2
	namespaceSyncPeriod  = 5 * time.Minute
	namespaceClientQPS   = 100
	namespaceClientBurst = 200
	aggregationWorkers   = 5
)

// clusterControllers are the StatefulSet, garbage-collector, namespace and
// clusterrole aggregation controllers, wired as kube-controller-manager wires
// them (cmd/kube-controller-manager/app/apps.go, core.go and rbac.go,
// Kubernetes 1.37.2): StatefulSet workloads get their pods, owned objects go
// when their owner goes (with Options.GarbageCollector), a deleted namespace
// is emptied and removed instead of staying Terminating, and the aggregated
// ClusterRoles (view, edit, admin) get the rules of the roles labelled to
// aggregate into them, so an RBAC trial against the sandbox sees what a
// cluster's user of those roles would.
type clusterControllers struct {
	metadataInformers metadatainformer.SharedInformerFactory // nil without the garbage collector
	informersStarted  chan struct{}
}

// startClusterControllers creates the controllers on factory's informers
// and runs them in goroutines tracked by wg until ctx is cancelled. Call
// started once factory has been started (the garbage collector's graph
// builder waits for it), and shutdown after the controllers have stopped.
func startClusterControllers(ctx context.Context, wg *sync.WaitGroup, cfg *rest.Config, factory informers.SharedInformerFactory, mapper *restmapper.DeferredDiscoveryRESTMapper, withGC bool) (*clusterControllers, error) {
	cc := &clusterControllers{informersStarted: make(chan struct{})}
	ssClient, err := clientFor(cfg, "sandbox-statefulset-controller")
	if err != nil {
		return nil, err
	}
	ssc := statefulset.NewStatefulSetController(ctx,
		factory.Core().V1().Pods(),
		factory.Apps().V1().StatefulSets(),
		factory.Core().V1().PersistentVolumeClaims(),
		factory.Apps().V1().ControllerRevisions(),
		ssClient,
	)

	nsConfig := rest.AddUserAgent(rest.CopyConfig(cfg), "sandbox-namespace-controller")
	nsConfig.QPS, nsConfig.Burst = namespaceClientQPS, namespaceClientBurst
	nsClient, err := kubernetes.NewForConfig(protobufConfig(nsConfig))
	if err != nil {
		return nil, fmt.Errorf("create namespace controller client: %w", err)
	}
	nsMetadata, err := metadata.NewForConfig(nsConfig)
	if err != nil {
		return nil, fmt.Errorf("create namespace controller metadata client: %w", err)
	}
	nsc := namespacecontroller.NewNamespaceController(ctx, nsClient, nsMetadata,
		nsClient.Discovery().ServerPreferredNamespacedResources,
		factory.Core().V1().Namespaces(),
		namespaceSyncPeriod,
		corev1.FinalizerKubernetes,
	)

	if withGC {
		gcConfig := rest.AddUserAgent(rest.CopyConfig(cfg), "sandbox-garbage-collector")
		gcClient, err := kubernetes.NewForConfig(protobufConfig(gcConfig))
		if err != nil {
			return nil, fmt.Errorf("create garbage collector client: %w", err)
		}
		gcMetadata, err := metadata.NewForConfig(gcConfig)
		if err != nil {
			return nil, fmt.Errorf("create garbage collector metadata client: %w", err)
		}
		cc.metadataInformers = metadatainformer.NewSharedInformerFactory(gcMetadata, 0)
		gc, err := garbagecollector.NewGarbageCollector(ctx, gcClient, gcMetadata, mapper,
			garbagecollector.DefaultIgnoredResources(),
			informerfactory.NewInformerFactory(factory, cc.metadataInformers),
			cc.informersStarted,
		)
		if err != nil {
			return nil, fmt.Errorf("create garbage collector: %w", err)
		}
		wg.Go(func() { gc.Run(ctx, gcWorkers, gcSyncPeriod) })
		// Sync starts the graph builder's monitors and picks up resources
		// that appear later (CRDs), as kube-controller-manager does.
		wg.Go(func() { gc.Sync(ctx, gcClient.Discovery(), gcSyncPeriod) })
	}

	aggClient, err := clientFor(cfg, "sandbox-clusterrole-aggregation-controller")
	if err != nil {
		return nil, err
	}
	crac := clusterroleaggregation.NewClusterRoleAggregation(factory.Rbac().V1().ClusterRoles(), aggClient.RbacV1())

	wg.Go(func() { ssc.Run(ctx, statefulSetWorkers) })
	wg.Go(func() { nsc.Run(ctx, namespaceWorkers) })
	wg.Go(func() { crac.Run(ctx, aggregationWorkers) })
	return cc, nil
}

// started tells the garbage collector that the informer factories run, and
// starts the metadata informers.
func (cc *clusterControllers) started(stop <-chan struct{}) {
	if cc.metadataInformers != nil {
		cc.metadataInformers.Start(stop)
	}
	close(cc.informersStarted)
}

// shutdown waits for the metadata informers to stop.
func (cc *clusterControllers) shutdown() {
	if cc.metadataInformers != nil {
		cc.metadataInformers.Shutdown()
	}
}
