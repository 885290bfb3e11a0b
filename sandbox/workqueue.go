package sandbox

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// This file holds what the simulated kubelet and the PodUnavailableBudget
// status controller share: a work queue's workers, and the retried write of
// an object's desired state.

// syncFunc brings the object of one queue key up to date. A positive
// duration asks for the key to be synced again after it.
type syncFunc[K comparable] func(ctx context.Context, key K) (time.Duration, error)

// runWorkers runs n workers that sync the keys of queue until ctx is
// cancelled, then shuts queue down and returns when the workers have
// stopped. A key whose sync fails is queued again, rate-limited; the failure
// is logged at V(2) as "<who> will retry", with the key under keyName.
func runWorkers[K comparable](ctx context.Context, queue workqueue.TypedRateLimitingInterface[K], n int, who, keyName string, syncKey syncFunc[K]) {
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			wait.UntilWithContext(ctx, func(ctx context.Context) {
				for processNext(ctx, queue, who, keyName, syncKey) {
				}
			}, time.Second)
		})
	}
	<-ctx.Done()
	queue.ShutDown()
	wg.Wait()
}

// processNext syncs the next key of queue; it reports false once queue is
// shut down.
func processNext[K comparable](ctx context.Context, queue workqueue.TypedRateLimitingInterface[K], who, keyName string, syncKey syncFunc[K]) bool {
	key, quit := queue.Get()
	if quit {
		return false
	}
	defer queue.Done(key)
	after, err := syncKey(ctx, key)
	if err != nil {
		if ctx.Err() == nil {
			klog.FromContext(ctx).V(2).Info(who+" will retry", keyName, key, "err", err)
		}
		queue.AddRateLimited(key)
		return true
	}
	queue.Forget(key)
	if after > 0 {
		queue.AddAfter(key, after)
	}
	return true
}

// unwrapDeleted returns the object of an informer's delete notification
// whose final state is unknown, and any other object as it is.
func unwrapDeleted(obj any) any {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Obj
	}
	return obj
}

// updateOnConflict writes desired(obj) with write if it differs from obj. On
// a conflict it reads the object again with get and retries.
func updateOnConflict[T any](ctx context.Context, obj T, get func(context.Context) (T, error), desired func(T) (T, bool), write func(context.Context, T) error) error {
	first := true
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := obj
		if !first {
			var err error
			if cur, err = get(ctx); err != nil {
				return err
			}
		}
		first = false
		want, changed := desired(cur)
		if !changed {
			return nil
		}
		return write(ctx, want)
	})
}
