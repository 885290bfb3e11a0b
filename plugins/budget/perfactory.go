package budget

import (
	"context"
	"sync"

	"k8s.io/client-go/informers"
)

// PerFactory holds one value per shared informer factory: what every profile
// of one kube-scheduler or descheduler, all built on the same factory,
// shares (the budget cache and its ledger above all). A value lives until
// the context it was built under ends. The zero PerFactory is ready to use.
type PerFactory[T any] struct {
	mu      sync.Mutex
	entries map[informers.SharedInformerFactory]*perFactoryEntry[T]
}

type perFactoryEntry[T any] struct{ value T }

// Get returns factory's value, building it with build on the first call
// (under the lock, so build runs once per factory). It is forgotten when
// ctx ends.
func (p *PerFactory[T]) Get(ctx context.Context, factory informers.SharedInformerFactory, build func() (T, error)) (T, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.entries[factory]; ok {
		return e.value, nil
	}
	v, err := build()
	if err != nil {
		var zero T
		return zero, err
	}
	if p.entries == nil {
		p.entries = map[informers.SharedInformerFactory]*perFactoryEntry[T]{}
	}
	e := &perFactoryEntry[T]{value: v}
	p.entries[factory] = e
	go func() {
		<-ctx.Done()
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.entries[factory] == e {
			delete(p.entries, factory)
		}
	}()
	return v, nil
}
