package budgetpreemption

import (
	"context"
	"fmt"
	"time"

	kruiseclient "github.com/openkruise/kruise-api/client/clientset/versioned"
	kruiseinformers "github.com/openkruise/kruise-api/client/informers/externalversions"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/budgetguard/budgetguard/plugins/budget"
)

// One budget cache per scheduler process.
//
// kube-scheduler builds every profile's framework on one shared informer
// factory, and calls New once per profile that enables the plugin. The
// cache, its Kruise informer factory and its ledger are shared by every
// profile built on the same informer factory, as BudgetAwareEvictor shares
// one per descheduler factory: with a cache and a ledger per profile, two
// profiles could both spend a budget's one allowed disruption. Each profile
// keeps its own args, candidate reservations and blocked preemptors; the
// budgets are decided in one place.

// sharedBudgets is what every profile on one informer factory shares.
type sharedBudgets struct {
	cache *budget.Cache
	// kruise is the Kruise informer factory of v1alpha1
	// PodUnavailableBudgets (the cache reads v1beta1 itself where served),
	// nil when the handle has no kubeconfig.
	kruise kruiseinformers.SharedInformerFactory
	// kruiseClient writes PUB disruption records (nil without a
	// kubeconfig).
	kruiseClient kruiseclient.Interface
}

var sharedCaches budget.PerFactory[*sharedBudgets]

// kruiseConfig is cfg for the Kruise client. kube-scheduler's clients speak
// protobuf (clientConnection.contentType defaults to it), which custom
// resources do not: with it, every PodUnavailableBudget status write (the
// PUB disruption record) fails to encode, and every PUB-covered victim is
// refused.
func kruiseConfig(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = "application/json"
	cfg.AcceptContentTypes = "application/json"
	return cfg
}

// budgetsFor returns the budget cache of fh's informer factory, building it
// on the first call. The cache lives until ctx (the scheduler's) ends.
func budgetsFor(ctx context.Context, fh fwk.Handle) (*sharedBudgets, error) {
	factory := fh.SharedInformerFactory()
	if factory == nil {
		return nil, fmt.Errorf("%s: the handle has no shared informer factory", Name)
	}
	return sharedCaches.Get(ctx, factory, func() (*sharedBudgets, error) { return newSharedBudgets(ctx, fh, factory) })
}

func newSharedBudgets(ctx context.Context, fh fwk.Handle, factory informers.SharedInformerFactory) (*sharedBudgets, error) {
	var opts budget.Options
	sh := &sharedBudgets{}
	if cfg := fh.KubeConfig(); cfg != nil && fh.ClientSet() != nil {
		kc, err := kruiseclient.NewForConfig(kruiseConfig(cfg))
		if err != nil {
			return nil, fmt.Errorf("%s: creating the Kruise client: %w", Name, err)
		}
		beta, err := budget.NewPUBv1beta1Client(kruiseConfig(cfg))
		if err != nil {
			return nil, fmt.Errorf("%s: creating the PodUnavailableBudget v1beta1 client: %w", Name, err)
		}
		sh.kruise = kruiseinformers.NewSharedInformerFactory(kc, 0)
		sh.kruiseClient = kc
		opts.KruiseInformers = sh.kruise
		opts.PUBv1beta1 = &budget.PUBv1beta1Source{Client: beta}
		opts.Discovery = fh.ClientSet().Discovery()
	}
	c, err := budget.New(ctx, factory, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	sh.cache = c
	c.ExportMetrics(ctx, "scheduler")
	if sh.kruise != nil {
		sh.kruise.Start(ctx.Done())
	}
	go func() {
		if c.WaitForCacheSync(ctx) {
			c.Run(ctx, time.Minute)
		}
	}()
	klog.FromContext(ctx).V(2).Info("Budget cache built; every profile on this informer factory shares it", "plugin", Name)
	return sh, nil
}
