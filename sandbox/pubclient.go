package sandbox

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	kruisebeta "github.com/budgetguard/budgetguard/apis/kruise/policy/v1beta1"
	"github.com/budgetguard/budgetguard/plugins/budget"
)

// The PUB webhook and the PUB status simulation read and write
// PodUnavailableBudgets at policy.kruise.io/v1beta1, OpenKruise's storage
// version, as OpenKruise's webhook and controller do: a v1alpha1 read has
// no spec.ignoredPodSelector.

// pubClient reads PodUnavailableBudgets of policy.kruise.io/v1beta1, lists
// and watches them, and writes their status with the resourceVersion read
// as the precondition (budget.PUBStatusClient).
type pubClient interface {
	budget.PUBStatusClient
	// List returns the PUBs of namespace ("" for all).
	List(ctx context.Context, namespace string, opts metav1.ListOptions) (*kruisebeta.PodUnavailableBudgetList, error)
	// Watch watches the PUBs of namespace ("" for all).
	Watch(ctx context.Context, namespace string, opts metav1.ListOptions) (watch.Interface, error)
}

// newPUBClient returns a pubClient on cfg (budget.NewPUBv1beta1Client).
func newPUBClient(cfg *rest.Config) (pubClient, error) {
	c, err := budget.NewPUBv1beta1Client(cfg)
	if err != nil {
		return nil, fmt.Errorf("create a client of %s: %w", kruisebeta.GroupVersion, err)
	}
	return restPUBClient{PUBStatusClient: budget.PUBStatusClientV1beta1(c), c: c}, nil
}

type restPUBClient struct {
	budget.PUBStatusClient
	c rest.Interface
}

func (r restPUBClient) List(ctx context.Context, namespace string, opts metav1.ListOptions) (*kruisebeta.PodUnavailableBudgetList, error) {
	list := &kruisebeta.PodUnavailableBudgetList{}
	err := r.c.Get().Namespace(namespace).Resource(PUBResource).VersionedParams(&opts, metav1.ParameterCodec).Do(ctx).Into(list)
	return list, err
}

func (r restPUBClient) Watch(ctx context.Context, namespace string, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return r.c.Get().Namespace(namespace).Resource(PUBResource).VersionedParams(&opts, metav1.ParameterCodec).Watch(ctx)
}

// pubListWatch lists and watches c's PUBs in every namespace, for an
// informer of *kruisebeta.PodUnavailableBudget.
func pubListWatch(c pubClient) cache.ListerWatcher {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return c.List(ctx, metav1.NamespaceAll, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return c.Watch(ctx, metav1.NamespaceAll, opts)
		},
	}
}
