package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	kruiseclientset "github.com/openkruise/kruise-api/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	apiextensionsclientset "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/klog/v2"
)

// Options configure a control plane. Start fills the zero durations and an
// empty NodeCapacity with defaults; the booleans are taken as given, so start
// from DefaultOptions to get the PodUnavailableBudget CRD.
type Options struct {
	// Verbose leaves the logs of etcd, gRPC, kube-apiserver and the
	// controllers on. When false (the default), they are silenced while the
	// control plane runs: klog's global output is discarded (and restored by
	// Stop), etcd logs nowhere and gRPC's logger drops everything. The
	// sandbox's own messages (kubelet warnings, start and stop) still go to
	// the logger in Start's context, or to stderr at klog's -v verbosity when
	// there is none.
	Verbose bool

	// InstallPUBCRD installs the PodUnavailableBudget CRD
	// (policy.kruise.io/v1alpha1) from manifests/crds, and Start waits until
	// it is served. DefaultOptions sets it; leave it false to run without PUBs.
	InstallPUBCRD bool

	// SimulatePUBStatus runs a stand-in for the status half of OpenKruise's
	// PodUnavailableBudget controller (kruise v1.8.0), so that PUBs get the
	// status they would get in a cluster with OpenKruise installed. It
	// needs InstallPUBCRD; without it, Start logs that and runs no
	// simulation. Off by default.
	//
	// It reads and writes PUBs at policy.kruise.io/v1beta1, as OpenKruise's
	// controller does. For each PUB it writes observedGeneration,
	// totalReplicas (for spec.targetRef the workload's spec.replicas; for
	// spec.selector the summed spec.replicas of the workloads controlling
	// the matched active pods, so bare pods count 0;
	// spec.protectTotalReplicas, the v1alpha1 annotation
	// pub.kruise.io/protect-total-replicas, overrides both),
	// desiredAvailable (totalReplicas minus maxUnavailable, or
	// minAvailable; percentages rounded up), currentAvailable (covered
	// pods that are active, Running and Ready, without an
	// unavailable-pod.kruise.io/ label, with spec and status consistent
	// (budget.PodStateConsistent: no in-place or sidecar update under way)
	// and not listed in disruptedPods or unavailablePods; pods that
	// spec.ignoredPodSelector selects count too, as in OpenKruise) and
	// unavailableAllowed (currentAvailable minus
	// desiredAvailable, never below 0). It drops disruptedPods entries
	// after 20s and unavailablePods entries after 10s, and entries of pods
	// no longer covered and active. targetRef resolves Deployments
	// (through their ReplicaSets), ReplicaSets, StatefulSets and
	// ReplicationControllers by owner UID.
	//
	// OpenKruise's webhook is simulated apart (see DisablePUBWebhook). The
	// status simulation resolves no other workload kinds (their PUBs cover
	// no pods). It
	// reconciles at once on pod changes where OpenKruise
	// waits 5s after a pod starts terminating. Start does not wait for its
	// PUB cache; a PUB created right after Start gets its status once the
	// cache has synced.
	SimulatePUBStatus bool

	// DisablePUBWebhook turns off the stand-in for OpenKruise's pod
	// webhooks (kruise master 07169cfac), which runs whenever
	// InstallPUBCRD is set. The stand-in serves HTTPS on a loopback port
	// and registers, as kruise does, a MutatingWebhookConfiguration that
	// ties each new pod to the first PUB (by name) that names its workload
	// in spec.targetRef or selects it, with the annotations
	// pub.kruise.io/related-pub and kruise.io/related-pub; and a
	// ValidatingWebhookConfiguration for pod deletes and evictions (and
	// updates, admitted unchecked as with kruise's default feature gates).
	// For a pod that is tied to a PUB and counts as available (Running and
	// Ready, no unavailable-pod.kruise.io/ label, spec and status
	// consistent), it re-reads the PUB at policy.kruise.io/v1beta1 and
	// admits the operation free when the PUB's spec.ignoredPodSelector
	// selects the pod, the PUB desires no available pod, does not protect
	// the operation (spec.protectOperations, else the annotation
	// kruise.io/pub-protect-operations) or already records the pod in
	// status.disruptedPods or status.unavailablePods; else it records the
	// pod in status.disruptedPods and lowers status.unavailableAllowed by
	// one, with the PUB's resourceVersion, or, when unavailableAllowed is 0,
	// refuses with kruise's 403: admission webhook "vpod.kb.io" (for an
	// eviction "vpodeviction.kb.io") denied the request:
	// podunavailablebudget.policy.kruise.io "<name>" is forbidden: pub
	// unavailable allowed is negative. Dry-run requests record nothing.
	// Pods created before their PUB are not tied to it, so it never
	// protects them, as in a Kruise cluster. Turn it off for a cluster
	// without Kruise's webhook.
	DisablePUBWebhook bool

	// PUBStatusSelector, when set, limits the PUB status simulation to the
	// PUBs whose labels it matches; the others keep whatever status
	// someone else writes (tests that write it by hand share a control
	// plane with tests that want it simulated).
	PUBStatusSelector labels.Selector

	// NodeCapacity is what the simulated kubelet puts in a Node's status for
	// each resource that the status does not list yet. Allocatable defaults
	// to capacity. Default: DefaultNodeCapacity (4 CPUs, 16Gi, 110 pods).
	NodeCapacity corev1.ResourceList

	// CrashLoopInterval is how often a pod annotated crashloop restarts its
	// containers. Default: 2s.
	CrashLoopInterval time.Duration

	// GarbageCollector runs kube-controller-manager's garbage collector, so
	// that objects whose owners are gone are deleted, as in a cluster.
	// DefaultOptions leaves it off: tests create pods whose owner does not
	// exist on purpose (to make a PDB's status stale), and the collector
	// would delete them. `sandbox up` turns it on.
	GarbageCollector bool

	// APIServerFlags are added to kube-apiserver's command line, after
	// --endpoint-reconciler-type=none and
	// --disable-admission-plugins=ServiceAccount.
	APIServerFlags []string
}

// DefaultOptions returns the options for a quiet control plane that serves
// PodUnavailableBudgets.
func DefaultOptions() Options {
	return Options{InstallPUBCRD: true}
}

const defaultCrashLoopInterval = 2 * time.Second

func (o Options) withDefaults() Options {
	if len(o.NodeCapacity) == 0 {
		o.NodeCapacity = DefaultNodeCapacity()
	}
	if o.CrashLoopInterval <= 0 {
		o.CrashLoopInterval = defaultCrashLoopInterval
	}
	return o
}

// ControlPlane is a running embedded etcd, kube-apiserver, controllers and
// simulated kubelet. Create it with Start and end it with Stop.
type ControlPlane struct {
	// Config reaches kube-apiserver as a privileged loopback user. It asks
	// for JSON, so it works for clients of custom resources too (kube-apiserver's
	// own loopback config asks for protobuf, which those cannot decode).
	// Copy it with rest.CopyConfig before changing it.
	Config *rest.Config
	// Client is a clientset for the built-in APIs; it speaks protobuf.
	// KruiseClient, APIExtensionsClient and Dynamic use Config as it is.
	Client              kubernetes.Interface
	KruiseClient        kruiseclientset.Interface
	APIExtensionsClient apiextensionsclientset.Interface
	Dynamic             dynamic.Interface
	// RESTMapper maps kinds to resources through cached discovery. Call
	// Reset on it after creating CRDs.
	RESTMapper *restmapper.DeferredDiscoveryRESTMapper
	// Informers is the shared informer factory of the controllers and the
	// kubelet, started and synced. Informers requested from it later only
	// run after another call to Informers.Start.
	Informers informers.SharedInformerFactory
	// ServingCAData verifies kube-apiserver's serving certificate for
	// Config.Host without Config's TLS server name: put it in kubeconfigs
	// for other processes, with credentials of their own. (Config's CA
	// verifies only the loopback certificate, which it asks for by name.)
	ServingCAData []byte
	// EtcdURL is the client URL of the embedded etcd.
	EtcdURL string
	// StartDuration is how long Start took.
	StartDuration time.Duration

	logger  klog.Logger
	dir     string
	etcd    *etcdServer
	api     *apiServer
	harness *harness
	cluster *clusterControllers
	webhook *pubWebhook
	logs    logSetup
	cancel  context.CancelFunc // stops the controllers and the kubelet
	// apiCancel cancels kube-apiserver's parent context; tearDown stops it.
	apiCancel context.CancelFunc
	wg        sync.WaitGroup

	stopOnce sync.Once
	stopErr  error
}

// ErrAlreadyRunning is returned by Start while another control plane of this
// process has not been stopped.
var ErrAlreadyRunning = errors.New("a sandbox control plane is already running in this process; stop it first (kube-apiserver changes process-wide feature gates)")

var (
	runningMu sync.Mutex
	running   bool
)

// Start starts embedded etcd, kube-apiserver, the disruption, ReplicaSet,
// Deployment, StatefulSet, garbage-collector and namespace controllers and the
// simulated kubelet, and installs the
// PodUnavailableBudget CRD, serves the PUB webhook and simulates PUB status
// if opts ask for it. It
// returns once all of them serve (the PUB status simulation syncs its cache
// in the background), or stops what it started and returns an error.
//
// ctx bounds the start and carries the logger; cancelling it later does not
// stop the control plane, Stop does. Only one control plane runs in a process
// at a time; Start returns ErrAlreadyRunning otherwise.
func Start(ctx context.Context, opts Options) (_ *ControlPlane, err error) {
	runningMu.Lock()
	if running {
		runningMu.Unlock()
		return nil, ErrAlreadyRunning
	}
	running = true
	runningMu.Unlock()

	began := time.Now()
	opts = opts.withDefaults()
	cp := &ControlPlane{logs: setupLogging(ctx, opts.Verbose)}
	cp.logger = cp.logs.logger.WithName("sandbox")
	defer func() {
		if err != nil {
			if stopErr := cp.Stop(); stopErr != nil {
				cp.logger.Error(stopErr, "Stopping the partly started control plane")
			}
		}
	}()
	logCtx := klog.NewContext(ctx, cp.logger)

	if cp.dir, err = os.MkdirTemp("", "budgetguard-sandbox-"); err != nil {
		return nil, fmt.Errorf("create temporary directory: %w", err)
	}
	if cp.etcd, err = startEtcd(logCtx, cp.dir, opts.Verbose); err != nil {
		return nil, err
	}
	cp.EtcdURL = cp.etcd.clientURL
	etcdReady := time.Now()

	// kube-apiserver runs on a context that outlives ctx, but a cancelled ctx
	// still aborts its start.
	apiCtx, apiCancel := context.WithCancel(klog.NewContext(context.WithoutCancel(ctx), cp.logs.components.WithName("kube-apiserver")))
	cp.apiCancel = apiCancel
	stopAbort := context.AfterFunc(ctx, apiCancel)
	cp.harness = newHarness("sandbox", cp.logger.WithName("harness"))
	cp.api, err = startAPIServer(apiCtx, cp.harness, cp.etcd.clientURL, opts.APIServerFlags)
	stopAbort()
	if err != nil {
		return nil, err
	}
	apiReady := time.Now()
	cp.ServingCAData = cp.api.servingCA
	if err := cp.newClients(cp.api.config); err != nil {
		return nil, err
	}

	if opts.InstallPUBCRD {
		if err := InstallPUBCRD(logCtx, cp.APIExtensionsClient, cp.Client.Discovery()); err != nil {
			return nil, err
		}
		cp.RESTMapper.Reset()
		if !opts.DisablePUBWebhook {
			if cp.webhook, err = startPUBWebhook(logCtx, cp.Config, cp.logger.WithName("pub-webhook")); err != nil {
				return nil, err
			}
		}
	}

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	cp.cancel = cancel
	componentCtx := klog.NewContext(runCtx, cp.logs.components.WithName("controllers"))
	kubeletCtx := klog.NewContext(runCtx, cp.logger.WithName("kubelet"))
	informerClient, err := clientFor(cp.Config, "sandbox-informers")
	if err != nil {
		return nil, err
	}
	cp.Informers = informers.NewSharedInformerFactory(informerClient, 0)
	if err := startControllers(componentCtx, kubeletCtx, &cp.wg, cp.Config, cp.Informers, cp.RESTMapper, opts); err != nil {
		return nil, err
	}
	if cp.cluster, err = startClusterControllers(componentCtx, &cp.wg, cp.Config, cp.Informers, cp.RESTMapper, opts.GarbageCollector); err != nil {
		return nil, err
	}
	if opts.SimulatePUBStatus && !opts.InstallPUBCRD {
		cp.logger.Info("Not simulating PodUnavailableBudget status: Options.SimulatePUBStatus needs Options.InstallPUBCRD")
	} else if opts.SimulatePUBStatus {
		pubCtx := klog.NewContext(runCtx, cp.logger.WithName("pub-status"))
		if err := startPUBStatus(pubCtx, &cp.wg, cp.Config, cp.Informers, opts.PUBStatusSelector); err != nil {
			return nil, err
		}
	}
	cp.Informers.Start(runCtx.Done())
	cp.cluster.started(runCtx.Done())
	if err := waitForCacheSync(logCtx, cp.Informers, time.Minute); err != nil {
		return nil, err
	}

	cp.StartDuration = time.Since(began)
	cp.logger.V(1).Info("Control plane is up", "apiserver", cp.Config.Host, "etcd", cp.EtcdURL,
		"etcdStart", etcdReady.Sub(began), "apiserverStart", apiReady.Sub(etcdReady), "total", cp.StartDuration)
	return cp, nil
}

// newClients fills in Config and the clients from kube-apiserver's loopback
// config.
func (cp *ControlPlane) newClients(loopback *rest.Config) error {
	cfg := rest.CopyConfig(loopback)
	cfg.ContentType = ""
	cfg.AcceptContentTypes = ""
	cp.Config = cfg
	var err error
	if cp.Client, err = kubernetes.NewForConfig(protobufConfig(cfg)); err != nil {
		return fmt.Errorf("create client: %w", err)
	}
	if cp.KruiseClient, err = kruiseclientset.NewForConfig(rest.CopyConfig(cfg)); err != nil {
		return fmt.Errorf("create kruise client: %w", err)
	}
	if cp.APIExtensionsClient, err = apiextensionsclientset.NewForConfig(rest.CopyConfig(cfg)); err != nil {
		return fmt.Errorf("create apiextensions client: %w", err)
	}
	if cp.Dynamic, err = dynamic.NewForConfig(rest.CopyConfig(cfg)); err != nil {
		return fmt.Errorf("create dynamic client: %w", err)
	}
	cp.RESTMapper = newRESTMapper(cp.Client.Discovery())
	return nil
}

// Stop stops the controllers and the kubelet, shuts the informers down, stops
// the PUB webhook, tears kube-apiserver down, closes etcd and removes the temporary directory, in
// that order. It may be called more than once, also on a nil ControlPlane;
// later calls return what the first returned. Another control plane may be
// started once Stop has returned.
func (cp *ControlPlane) Stop() error {
	if cp == nil {
		return nil
	}
	cp.stopOnce.Do(func() { cp.stopErr = cp.stop() })
	return cp.stopErr
}

func (cp *ControlPlane) stop() error {
	defer func() {
		runningMu.Lock()
		running = false
		runningMu.Unlock()
	}()
	began := time.Now()
	var errs []error
	if cp.cancel != nil {
		cp.cancel()
	}
	cp.wg.Wait()
	if cp.Informers != nil {
		cp.Informers.Shutdown()
	}
	if cp.cluster != nil {
		cp.cluster.shutdown()
	}
	if cp.webhook != nil {
		cp.webhook.stop()
	}
	if cp.api != nil && cp.api.tearDown != nil {
		cp.api.tearDown()
	}
	if cp.apiCancel != nil {
		cp.apiCancel()
	}
	if cp.harness != nil {
		if err := cp.harness.runCleanups(); err != nil {
			errs = append(errs, fmt.Errorf("restore after kube-apiserver: %w", err))
		}
	}
	if cp.etcd != nil {
		cp.etcd.close()
	}
	if cp.dir != "" {
		if err := os.RemoveAll(cp.dir); err != nil {
			errs = append(errs, fmt.Errorf("remove temporary directory: %w", err))
		}
	}
	if cp.logs.restore != nil {
		cp.logs.restore()
	}
	cp.logger.V(1).Info("Control plane stopped", "duration", time.Since(began))
	return errors.Join(errs...)
}
