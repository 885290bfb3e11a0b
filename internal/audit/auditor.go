package audit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// UserAgent is the user agent of the auditor's own clients.
const UserAgent = "sandbox-auditor"

// tailInterval is how often the auditor reads what the audit log gained.
const tailInterval = 100 * time.Millisecond

// partialLineWait bounds how long Finish waits for the rest of a line that
// kube-apiserver is writing.
const partialLineWait = 2 * time.Second

// ComponentMatch attributes requests whose user agent starts with
// UserAgentPrefix to Component.
type ComponentMatch struct {
	UserAgentPrefix string
	Component       Component
}

// Options configure an Auditor.
type Options struct {
	// Config reaches kube-apiserver; the auditor builds its own clients and
	// informers from it.
	Config *rest.Config
	// LogPath is the audit log that kube-apiserver writes (from
	// APIServerFlags).
	LogPath string
	// Components maps user agents to components, first match wins; a user
	// agent that matches none is ComponentOther. A prefix matches the whole
	// user agent, or the name that rest.AddUserAgent appended to client-go's
	// default one.
	Components []ComponentMatch
	// Ignore lists user agent prefixes whose requests are neither
	// disruptions nor refusals (the simulated kubelet finishing terminating
	// pods, the runner's own setup). Ignore wins over Components.
	Ignore []string
	// PUBs watches OpenKruise's PodUnavailableBudgets too, at
	// policy.kruise.io/v1beta1 where it is served, v1alpha1 otherwise.
	PUBs bool
}

// Auditor records what its informers see and what kube-apiserver's audit
// log says, from Start to Finish, and then judges it.
type Auditor struct {
	opts Options
	kube kubernetes.Interface
	dyn  dynamic.Interface
	// disco checks that PUBs are served, and at which version; nil skips
	// the check and reads pubVersion.
	disco      discovery.DiscoveryInterface
	pubVersion string
	now        func() time.Time

	mu           sync.Mutex
	observations []observation
	requests     []request
	tailErr      error
	state        int // 0 new, 1 started, 2 finished
	// series is what Finish's replay counted, for HealthySeries only.
	series []BudgetSeries

	log           *logReader
	stopCh        chan struct{}
	factory       informers.SharedInformerFactory
	kruiseFactory dynamicinformer.DynamicSharedInformerFactory
	tailCancel    context.CancelFunc
	tailDone      chan struct{}
}

// New checks opts and creates the auditor's clients. It does not contact
// the API server.
func New(opts Options) (*Auditor, error) {
	if opts.Config == nil {
		return nil, errors.New("audit: Options.Config is nil")
	}
	cfg := rest.AddUserAgent(rest.CopyConfig(opts.Config), UserAgent)
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("audit: create client: %w", err)
	}
	var dyn dynamic.Interface
	if opts.PUBs {
		if dyn, err = dynamic.NewForConfig(cfg); err != nil {
			return nil, fmt.Errorf("audit: create dynamic client for PUBs: %w", err)
		}
	}
	return newAuditor(opts, kube, dyn, kube.Discovery(), time.Now)
}

func newAuditor(opts Options, kube kubernetes.Interface, dyn dynamic.Interface, disco discovery.DiscoveryInterface, now func() time.Time) (*Auditor, error) {
	if opts.LogPath == "" {
		return nil, errors.New("audit: Options.LogPath is empty; pass the path APIServerFlags returned")
	}
	for i, m := range opts.Components {
		if m.UserAgentPrefix == "" {
			return nil, fmt.Errorf("audit: Options.Components[%d].UserAgentPrefix is empty; it would match every user agent", i)
		}
		if m.Component == "" {
			return nil, fmt.Errorf("audit: Options.Components[%d].Component is empty", i)
		}
	}
	for i, p := range opts.Ignore {
		if p == "" {
			return nil, fmt.Errorf("audit: Options.Ignore[%d] is empty; it would match every user agent", i)
		}
	}
	if opts.PUBs && dyn == nil {
		return nil, errors.New("audit: Options.PUBs is set but there is no kruise client")
	}
	return &Auditor{opts: opts, kube: kube, dyn: dyn, disco: disco, now: now, pubVersion: "v1alpha1"}, nil
}

// Start opens the audit log at its current end, starts the auditor's own
// informers (pods, PDBs, ReplicaSets, Deployments, StatefulSets, and PUBs
// if asked), waits until they have synced, and starts tailing the log.
// Requests logged before Start are not audited.
func (a *Auditor) Start(ctx context.Context) (err error) {
	a.mu.Lock()
	if a.state != 0 {
		a.mu.Unlock()
		return errors.New("audit: Start called twice")
	}
	a.state = 1
	a.mu.Unlock()
	defer func() {
		if err != nil {
			a.stop()
		}
	}()

	if a.opts.PUBs && a.disco != nil {
		if a.pubVersion, err = pubsServed(a.disco); err != nil {
			return err
		}
	}
	if a.log, err = openLog(a.opts.LogPath); err != nil {
		return err
	}
	a.stopCh = make(chan struct{})
	a.factory = informers.NewSharedInformerFactory(a.kube, 0)
	if err := a.watchBuiltins(); err != nil {
		return err
	}
	a.factory.Start(a.stopCh)
	if a.opts.PUBs {
		a.kruiseFactory = dynamicinformer.NewDynamicSharedInformerFactory(a.dyn, 0)
		if _, err := a.kruiseFactory.ForResource(pubResource.WithVersion(a.pubVersion)).Informer().AddEventHandler(a.pubHandler(ctx)); err != nil {
			return fmt.Errorf("audit: watch PodUnavailableBudgets: %w", err)
		}
		a.kruiseFactory.Start(a.stopCh)
	}
	for typ, ok := range a.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("audit: informer for %v did not sync: %w", typ, context.Cause(ctx))
		}
	}
	if a.kruiseFactory != nil {
		for typ, ok := range a.kruiseFactory.WaitForCacheSync(ctx.Done()) {
			if !ok {
				return fmt.Errorf("audit: informer for %v did not sync: %w", typ, context.Cause(ctx))
			}
		}
	}

	tailCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	a.tailCancel = cancel
	a.tailDone = make(chan struct{})
	go a.tail(tailCtx)
	klog.FromContext(ctx).V(2).Info("Auditor started", "log", a.opts.LogPath, "pubs", a.opts.PUBs)
	return nil
}

// pubsServed returns the version at which PUBs are read: v1beta1 where it
// is served (OpenKruise's storage version, which alone holds
// spec.ignoredPodSelector), v1alpha1 otherwise.
func pubsServed(disco discovery.DiscoveryInterface) (string, error) {
	var errs []error
	for _, version := range []string{"v1beta1", "v1alpha1"} {
		gv := pubResource.Group + "/" + version
		list, err := disco.ServerResourcesForGroupVersion(gv)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", gv, err))
			continue
		}
		for _, r := range list.APIResources {
			if r.Name == pubResource.Resource {
				return version, nil
			}
		}
		errs = append(errs, fmt.Errorf("%s does not serve %s", gv, pubResource.Resource))
	}
	return "", fmt.Errorf("audit: Options.PUBs is set but PodUnavailableBudgets are not served: %w", errors.Join(errs...))
}

// tail reads the log every tailInterval until ctx ends.
func (a *Auditor) tail(ctx context.Context) {
	defer close(a.tailDone)
	t := time.NewTicker(tailInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		reqs, err := a.log.read()
		a.mu.Lock()
		a.requests = append(a.requests, reqs...)
		if err != nil {
			a.tailErr = err
		}
		a.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// Finish reads the audit log to its end, stops the informers, and returns
// what the auditor concludes, in a deterministic order: budgets by kind,
// namespace and name; disruptions, refusals and violations in the order
// kube-apiserver received the requests.
//
// Every request whose response its client has received is in the log by
// then: in blocking mode kube-apiserver writes the line before the response
// leaves the server. Stop the components (or wait for their requests)
// before calling Finish.
func (a *Auditor) Finish(ctx context.Context) (Result, error) {
	a.mu.Lock()
	switch a.state {
	case 0:
		a.mu.Unlock()
		return Result{}, errors.New("audit: Finish called before Start")
	case 2:
		a.mu.Unlock()
		return Result{}, errors.New("audit: Finish called twice")
	}
	a.state = 2
	a.mu.Unlock()

	if a.tailCancel == nil {
		a.stop()
		return Result{}, errors.New("audit: Finish called after Start failed")
	}
	a.tailCancel()
	<-a.tailDone
	defer a.stop()

	a.mu.Lock()
	tailErr := a.tailErr
	a.mu.Unlock()
	if tailErr != nil {
		return Result{}, tailErr
	}
	if err := a.readToEnd(ctx); err != nil {
		return Result{}, err
	}

	// Informers may still deliver; stop them before reading what they recorded.
	a.stop()
	a.mu.Lock()
	obs := a.observations
	reqs := a.requests
	a.mu.Unlock()
	res, series := replay(ctx, &a.opts, obs, reqs)
	a.mu.Lock()
	a.series = series
	a.mu.Unlock()
	return res, nil
}

// readToEnd reads the rest of the log, waiting a little for the end of a
// line that is being written.
func (a *Auditor) readToEnd(ctx context.Context) error {
	deadline := time.Now().Add(partialLineWait)
	for {
		reqs, err := a.log.read()
		a.mu.Lock()
		a.requests = append(a.requests, reqs...)
		a.mu.Unlock()
		if err != nil {
			return err
		}
		if len(a.log.partial) == 0 {
			return nil
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("audit: %s ends in an incomplete line (%d bytes) that was not completed within %s", a.log.path, len(a.log.partial), partialLineWait)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("audit: waiting for the rest of the last line of %s: %w", a.log.path, context.Cause(ctx))
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// stop ends the informers and closes the log; it may be called again.
func (a *Auditor) stop() {
	if a.stopCh != nil {
		close(a.stopCh)
		a.stopCh = nil
		a.factory.Shutdown()
		if a.kruiseFactory != nil {
			a.kruiseFactory.Shutdown()
		}
	}
	if a.log != nil {
		_ = a.log.close()
		a.log = nil
	}
}

// record appends an observation stamped now.
func (a *Auditor) record(o observation) {
	a.mu.Lock()
	defer a.mu.Unlock()
	o.at = a.now()
	o.seq = len(a.observations)
	a.observations = append(a.observations, o)
}

func tombstone(obj any) any {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}

// handler returns event handlers that record each added or updated object
// with onObject, and each deleted one with onDelete.
func handler[T any](onObject func(T), onDelete func(T)) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if o, ok := obj.(T); ok {
				onObject(o)
			}
		},
		UpdateFunc: func(_, obj any) {
			if o, ok := obj.(T); ok {
				onObject(o)
			}
		},
		DeleteFunc: func(obj any) {
			if o, ok := tombstone(obj).(T); ok {
				onDelete(o)
			}
		},
	}
}

// stripManagedFields keeps the recorded history small.
func stripManagedFields(obj any) (any, error) {
	if m, ok := obj.(metav1.ObjectMetaAccessor); ok {
		m.GetObjectMeta().SetManagedFields(nil)
	}
	return obj, nil
}

func (a *Auditor) watchBuiltins() error {
	pods := a.factory.Core().V1().Pods().Informer()
	if err := pods.SetTransform(stripManagedFields); err != nil {
		return fmt.Errorf("audit: pod informer transform: %w", err)
	}
	podObs := func(p *corev1.Pod, deleted bool) {
		o := observation{podKey: podKey{p.Namespace, p.Name}}
		if !deleted {
			o.pod = p
		}
		a.record(o)
	}
	regs := []struct {
		what     string
		informer cache.SharedIndexInformer
		h        cache.ResourceEventHandler
	}{
		{"pods", pods, handler(func(p *corev1.Pod) { podObs(p, false) }, func(p *corev1.Pod) { podObs(p, true) })},
		{"PodDisruptionBudgets", a.factory.Policy().V1().PodDisruptionBudgets().Informer(), handler(
			func(p *policyv1.PodDisruptionBudget) { a.record(observation{budget: pdbRef(p), pdb: p}) },
			func(p *policyv1.PodDisruptionBudget) { a.record(observation{budget: pdbRef(p)}) })},
		{"ReplicaSets", a.factory.Apps().V1().ReplicaSets().Informer(), workloadHandler[*appsv1.ReplicaSet](a, "ReplicaSet")},
		{"Deployments", a.factory.Apps().V1().Deployments().Informer(), workloadHandler[*appsv1.Deployment](a, "Deployment")},
		{"StatefulSets", a.factory.Apps().V1().StatefulSets().Informer(), workloadHandler[*appsv1.StatefulSet](a, "StatefulSet")},
	}
	for _, r := range regs {
		if _, err := r.informer.AddEventHandler(r.h); err != nil {
			return fmt.Errorf("audit: watch %s: %w", r.what, err)
		}
	}
	return nil
}

func (a *Auditor) pubHandler(ctx context.Context) cache.ResourceEventHandler {
	logger := klog.FromContext(ctx)
	decode := func(u *unstructured.Unstructured) *pubObject {
		p, err := decodePUB(u)
		if err != nil {
			// Never as if no budget existed: the PUB is kept, covering
			// what its selector and targetRef say, with the fields that
			// decoded.
			logger.Error(err, "Auditor could not read a PodUnavailableBudget whole", "pub", klog.KObj(u))
		}
		return p
	}
	return handler(
		func(u *unstructured.Unstructured) {
			if p := decode(u); p != nil {
				a.record(observation{budget: pubRefOf(u), pub: p})
			}
		},
		func(u *unstructured.Unstructured) { a.record(observation{budget: pubRefOf(u)}) })
}

func workloadHandler[T metav1.Object](a *Auditor, kind string) cache.ResourceEventHandler {
	key := func(o T) workloadKey {
		return workloadKey{group: "apps", kind: kind, namespace: o.GetNamespace(), name: o.GetName()}
	}
	return handler(
		func(o T) {
			w := &workload{uid: o.GetUID()}
			if c := metav1.GetControllerOfNoCopy(o); c != nil {
				w.controller = c.DeepCopy()
			}
			a.record(observation{workloadKey: key(o), workload: w})
		},
		func(o T) { a.record(observation{workloadKey: key(o)}) })
}

func pdbRef(p *policyv1.PodDisruptionBudget) BudgetRef {
	return BudgetRef{Kind: KindPDB, Namespace: p.Namespace, Name: p.Name}
}

func pubRefOf(p metav1.Object) BudgetRef {
	return BudgetRef{Kind: KindPUB, Namespace: p.GetNamespace(), Name: p.GetName()}
}
