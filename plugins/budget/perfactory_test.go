package budget

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

func TestPerFactory(t *testing.T) {
	var p PerFactory[*int]
	ctx, cancel := context.WithCancel(context.Background())
	f1 := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	f2 := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	builds := 0
	build := func() (*int, error) { builds++; n := builds; return &n, nil }

	a, _ := p.Get(ctx, f1, build)
	b, _ := p.Get(ctx, f1, build)
	c, _ := p.Get(ctx, f2, build)
	if a != b || a == c || builds != 2 {
		t.Fatalf("one value per factory: got %v %v %v after %d builds, want the first two equal and 2 builds", *a, *b, *c, builds)
	}
	if _, err := p.Get(ctx, informers.NewSharedInformerFactory(fake.NewClientset(), 0), func() (*int, error) { return nil, errors.New("no") }); err == nil {
		t.Error("a failed build returned no error")
	}

	// Once the context ends the value is forgotten: a new one is built.
	cancel()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		p.mu.Lock()
		_, held := p.entries[f1]
		p.mu.Unlock()
		if !held {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the value outlived its context")
		}
	}
	d, _ := p.Get(context.Background(), f1, build)
	if d == a || builds != 3 {
		t.Errorf("after the context ended Get returned the old value (builds %d)", builds)
	}
}
