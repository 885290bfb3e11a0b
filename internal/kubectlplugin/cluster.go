package kubectlplugin

import (
	"context"
	"fmt"
	"time"

	kruiseclientset "github.com/openkruise/kruise-api/client/clientset/versioned"
	kruiseinformers "github.com/openkruise/kruise-api/client/informers/externalversions"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/budgetguard/budgetguard/plugins/budget"
)

// syncTimeout bounds how long the plugin waits for its informers when the
// API server neither answers their lists nor refuses them (a refusal ends
// the wait at once).
const syncTimeout = 30 * time.Second

// cluster is a read-only view of one namespace, or of all: a budget.Cache
// filled by informers, as in the scheduler and the descheduler.
type cluster struct {
	client  kubernetes.Interface
	cache   *budget.Cache
	factory informers.SharedInformerFactory
	kruise  kruiseinformers.SharedInformerFactory
}

// openCluster lists and watches pods, PDBs, ReplicaSets, Deployments,
// StatefulSets and (when served) PUBs in namespace ("" for all) and waits
// until the Cache has them.
//
// The first list, watch or discovery request the API server refuses (403,
// or 401) ends the wait with an error that names the verb, the resource and
// the namespace: the plugin never answers without a kind it may not read,
// since an answer without the PUBs could call a PUB-protected pod free.
func openCluster(ctx context.Context, cfg *rest.Config, namespace string) (*cluster, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "kubectl-budgetguard"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", cfg.Host, err)
	}
	// The informers' own clients, whose refusals end the wait.
	refused := newRefusals()
	icfg := rest.CopyConfig(cfg)
	icfg.Wrap(refused.wrap)
	ic, err := kubernetes.NewForConfig(icfg)
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", cfg.Host, err)
	}
	kc, err := kruiseclientset.NewForConfig(icfg)
	if err != nil {
		return nil, fmt.Errorf("OpenKruise client for %s: %w", cfg.Host, err)
	}
	c := &cluster{
		client:  client,
		factory: informers.NewSharedInformerFactoryWithOptions(ic, 0, informers.WithNamespace(namespace)),
		kruise:  kruiseinformers.NewSharedInformerFactoryWithOptions(kc, 0, kruiseinformers.WithNamespace(namespace)),
	}
	beta, err := budget.NewPUBv1beta1Client(icfg)
	if err != nil {
		return nil, fmt.Errorf("OpenKruise v1beta1 client for %s: %w", cfg.Host, err)
	}
	c.cache, err = budget.New(ctx, c.factory, budget.Options{
		KruiseInformers: c.kruise,
		PUBv1beta1:      &budget.PUBv1beta1Source{Client: beta, Namespace: namespace},
		Discovery:       ic.Discovery(),
	})
	if err != nil {
		return nil, err
	}
	// Registered before the factories start, so that lint can list them.
	c.factory.Core().V1().Pods().Lister()
	c.factory.Policy().V1().PodDisruptionBudgets().Lister()
	c.factory.Start(ctx.Done())
	c.kruise.Start(ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	go func() {
		select {
		case <-refused.refused:
			cancel()
		case <-syncCtx.Done():
		}
	}()
	if !c.cache.WaitForCacheSync(syncCtx) {
		select {
		case <-refused.refused:
			return nil, refused.err
		default:
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		last := ""
		if l := refused.lastFailure(); l != "" {
			last = "; the last failure: " + l
		}
		if reason, why := c.cache.NotSynced(); reason == budget.NotSyncedDiscovery {
			// An answer without the PUBs could call a PUB-protected pod free.
			return nil, fmt.Errorf("cannot tell whether %s serves PodUnavailableBudgets within %s: %s", cfg.Host, syncTimeout, why)
		}
		where := "all namespaces"
		if namespace != "" {
			where = "namespace " + namespace
		}
		return nil, fmt.Errorf("could not list pods, PodDisruptionBudgets, ReplicaSets, Deployments, StatefulSets and PodUnavailableBudgets in %s of %s within %s%s", where, cfg.Host, syncTimeout, last)
	}
	return c, nil
}

// pod returns the pod from the informers.
func (c *cluster) pod(namespace, name string) (*v1.Pod, error) {
	pod, err := c.factory.Core().V1().Pods().Lister().Pods(namespace).Get(name)
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s: %w", namespace, name, err)
	}
	return pod, nil
}

// node returns the pod's node (nil when unbound), or why it could not be
// read: what depends on it (cluster-autoscaler's taints, whether preemption
// may take the pod) is then unknown, never guessed; the rest of the answer
// does not depend on it.
func (c *cluster) node(ctx context.Context, pod *v1.Pod) (*v1.Node, string) {
	if pod.Spec.NodeName == "" {
		return nil, ""
	}
	node, err := c.client.CoreV1().Nodes().Get(ctx, pod.Spec.NodeName, metav1.GetOptions{})
	switch {
	case err == nil:
		return node, ""
	case apierrors.IsForbidden(err):
		return nil, "no permission to get nodes"
	case apierrors.IsNotFound(err):
		return nil, fmt.Sprintf("node %s does not exist", pod.Spec.NodeName)
	}
	return nil, fmt.Sprintf("could not get node %s: %v", pod.Spec.NodeName, err)
}

// events lists the events about pod.
func (c *cluster) events(ctx context.Context, pod *v1.Pod) ([]v1.Event, error) {
	list, err := c.client.CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Pod,involvedObject.name=" + pod.Name,
	})
	if err != nil {
		return nil, fmt.Errorf("events of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return list.Items, nil
}

// lintInput is every pod, PDB and PUB the informers hold.
func (c *cluster) lintInput() (budget.LintInput, error) {
	var in budget.LintInput
	var err error
	if in.Pods, err = c.factory.Core().V1().Pods().Lister().List(labels.Everything()); err != nil {
		return in, err
	}
	if in.PDBs, err = c.factory.Policy().V1().PodDisruptionBudgets().Lister().List(labels.Everything()); err != nil {
		return in, err
	}
	if inf := c.cache.PUBInformer(); c.cache.PUBEnabled() && inf != nil {
		for _, obj := range inf.GetStore().List() {
			if p, ok := budget.PUBOf(obj); ok {
				in.PUBs = append(in.PUBs, p)
			}
		}
	}
	return in, nil
}
