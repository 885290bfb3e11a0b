package budgetpreemption

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
)

// TestAsyncPreemptionActivatesWhenTheGateTookTheLastVictim: with
// asynchronous preemption, upstream disrupts every victim but the last in
// parallel, then registers the last one and disrupts it, so that the last
// victim's removal always arrives when PreEnqueue can see it and let the
// preemptor in. budgetguard disrupts the victims that spend a budget first,
// from whichever parallel call comes first: here web-0, upstream's last
// victim, goes before upstream registers it, and its removal may be spent
// while the preemptor is kept out. The plugin activates the preemptor once
// the last victim is registered; otherwise the preemptor could stay
// nominated in the unschedulable pool.
func TestAsyncPreemptionActivatesWhenTheGateTookTheLastVictim(t *testing.T) {
	p := preemptor("2", 100)
	pods := []*v1.Pod{
		pod("keep-0", "n1", "", 200, true).Obj(), pod("keep-1", "n1", "", 200, true).Obj(),
		pod("free-0", "n1", "", 5, true).Obj(),   // upstream's first victim, spends nothing
		pod("web-0", "n1", "web", 0, true).Obj(), // upstream's last victim, spends pdb web
		p,
	}
	e := newEnv(t, nil, []*v1.Node{node("n1")}, pods, []*policyv1.PodDisruptionBudget{appPDB("web", 1, 0, 1).Obj()})
	disrupted := e.asyncPreemption(t, p, "its last victim was registered")
	order := disrupted()
	if len(order) != 2 || order[0] != "web-0" || order[1] != "free-0" {
		t.Errorf("victims disrupted in the order %v, want [web-0 free-0] (the one that spends a budget first)", order)
	}
}

// TestAsyncPreemptionActivatesWhenTheLastVictimWasAlreadyGone: upstream's
// last victim is gone from the cluster before upstream registers it
// (another preemption or a controller deleted it after the snapshot). Its
// removal may have been judged while PreEnqueue still kept the preemptor
// out, and nothing else is coming: upstream's own PreemptPod, given a
// victim already deleted, returns without activating the preemptor, which
// waits, nominated, for the queue's periodic flush (5 minutes). The plugin
// activates the preemptor once the last victim is registered.
func TestAsyncPreemptionActivatesWhenTheLastVictimWasAlreadyGone(t *testing.T) {
	p := preemptor("2", 100)
	keep := []*v1.Pod{pod("keep-0", "n1", "", 200, true).Obj(), pod("keep-1", "n1", "", 200, true).Obj(), p}
	free := pod("free-0", "n1", "", 5, true).Obj() // upstream's first victim
	gone := pod("gone-0", "n1", "", 0, true).Obj() // upstream's last victim, no longer served
	snapshot := append([]*v1.Pod{free, gone}, keep...)
	served := append([]*v1.Pod{free}, keep...)
	e := buildEnv(t, envSpec{nodes: []*v1.Node{node("n1")}, pods: snapshot, served: served})
	disrupted := e.asyncPreemption(t, p, "its last victim, already gone, was registered")()
	if len(disrupted) != 1 || disrupted[0] != "free-0" {
		t.Errorf("disrupted %v, want [free-0] (gone-0 is gone already)", disrupted)
	}
}

// asyncPreemption rebuilds e's plugin with asynchronous preemption, runs
// PostFilter for p on n1, and waits for p to be activated (what: after
// what). It returns the victims disrupted, in order, once upstream's
// preemption goroutine has finished with them.
func (e *env) asyncPreemption(t *testing.T, p *v1.Pod, what string) func() []string {
	t.Helper()
	h := &activatorHandle{Handle: e.fw, activated: make(chan map[string]*v1.Pod, 10)}
	e.pl = newPlugin(DefaultArgs(), h, e.budgets, feature.Features{EnableAsyncPreemption: true})
	var mu sync.Mutex
	var disrupted []string
	evictionsAsDeletes(e)
	e.pl.deletePod = func(_ context.Context, _ preemption.Candidate, _ preemption.ExecutorPreemptor, victim *v1.Pod, _ string) error {
		mu.Lock()
		defer mu.Unlock()
		disrupted = append(disrupted, victim.Name)
		return nil
	}
	if _, status := e.postFilterN1(t, p); !status.IsSuccess() {
		t.Fatalf("PostFilter: %v", status)
	}
	select {
	case got := <-h.activated:
		if got[p.Namespace+"/"+p.Name] == nil {
			t.Errorf("activated %v, want the preemptor", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the preemptor was not activated after %s", what)
	}
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(disrupted)
	}
}
