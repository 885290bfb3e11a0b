package budgetpreemption

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"

	"github.com/budgetguard/budgetguard/plugins/budget"
)

func TestPodGroupPostFilter(t *testing.T) {
	bestEffort := DefaultArgs()
	bestEffort.Mode = ModeBestEffort
	tests := []struct {
		name   string
		args   *BudgetAwarePreemptionArgs
		nodes  []*v1.Node
		pods   []*v1.Pod
		pdbs   []*policyv1.PodDisruptionBudget
		groups []*schedulingv1beta1.PodGroup
		// members is the preempting gang's size and each member's CPU.
		members int
		cpu     string
		// want are the victims disrupted; blockedBy, when set, is the
		// budget the refusal must name (status and PodGroup event).
		want      []string
		blockedBy string
	}{
		{
			name:    "within the allowance: the gang takes what the PDB allows",
			nodes:   []*v1.Node{node("n1")},
			pods:    replicas("web", "n1", "web", true, 0, 0, 0, 0),
			pdbs:    []*policyv1.PodDisruptionBudget{appPDB("web", 4, 1, 3).Obj()},
			members: 3, cpu: "1",
			// The most important is reprieved first; equal here, so the
			// first in the node's list stays.
			want: []string{"web-1", "web-2", "web-3"},
		},
		{
			name:    "beyond the allowance: refused, naming the PDB",
			nodes:   []*v1.Node{node("n1")},
			pods:    replicas("web", "n1", "web", true, 0, 0, 0, 0),
			pdbs:    []*policyv1.PodDisruptionBudget{appPDB("web", 4, 2, 2).Obj()},
			members: 3, cpu: "1",
			blockedBy: "pdb shop/web",
		},
		{
			name:    "free victims are taken before budget-spending ones",
			nodes:   []*v1.Node{node("n1")},
			pods:    append(replicas("web", "n1", "web", true, 0, 0), replicas("batch", "n1", "", true, 0, 0)...),
			pdbs:    []*policyv1.PodDisruptionBudget{appPDB("web", 2, 0, 2).Obj()},
			members: 2, cpu: "1",
			want: []string{"batch-0", "batch-1"},
		},
		{
			name:  "each victim allowed alone, not together, and no other way: refused",
			nodes: []*v1.Node{node("n1")},
			pods: append(replicas("web", "n1", "web", true, 0, 0),
				highPod("keep", "n1", "2")),
			pdbs:    []*policyv1.PodDisruptionBudget{appPDB("web", 2, 1, 1).Obj()},
			members: 1, cpu: "2",
			blockedBy: "pdb shop/web",
		},
		{
			name:    "BestEffort takes budget-spending victims when it must",
			args:    bestEffort,
			nodes:   []*v1.Node{node("n1")},
			pods:    replicas("web", "n1", "web", true, 0, 0, 0, 0),
			pdbs:    []*policyv1.PodDisruptionBudget{appPDB("web", 4, 2, 2).Obj()},
			members: 3, cpu: "1",
			want: []string{"web-1", "web-2", "web-3"},
		},
		{
			name:  "a victim PodGroup spends the budgets of all its pods: denied when they exceed it",
			nodes: []*v1.Node{node("n1")},
			pods: []*v1.Pod{
				pod("train-0", "n1", "train", 0, true).PodGroupName("train").Obj(),
				pod("train-1", "n1", "train", 0, true).PodGroupName("train").Obj(),
				highPod("keep", "n1", "2"),
			},
			pdbs:    []*policyv1.PodDisruptionBudget{appPDB("train", 2, 1, 1).Obj()},
			groups:  []*schedulingv1beta1.PodGroup{victimGroup("train")},
			members: 1, cpu: "1",
			blockedBy: "pdb shop/train",
		},
		{
			name:  "a victim PodGroup goes whole when its budgets allow all its pods",
			nodes: []*v1.Node{node("n1")},
			pods: []*v1.Pod{
				pod("train-0", "n1", "train", 0, true).PodGroupName("train").Obj(),
				pod("train-1", "n1", "train", 0, true).PodGroupName("train").Obj(),
				highPod("keep", "n1", "2"),
			},
			pdbs:    []*policyv1.PodDisruptionBudget{appPDB("train", 2, 0, 2).Obj()},
			groups:  []*schedulingv1beta1.PodGroup{victimGroup("train")},
			members: 1, cpu: "1",
			want: []string{"train-0", "train-1"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pg, members := gang("gang", tc.members, tc.cpu, 100)
			g := newGangEnv(t, tc.args, tc.nodes, tc.pods, tc.pdbs, append(tc.groups, pg)...)
			res, status := g.postFilter(pg, members)
			if tc.blockedBy != "" {
				if status.Code() != fwk.Unschedulable || !strings.Contains(status.Message(), tc.blockedBy) {
					t.Errorf("status %v; want Unschedulable naming %s", status, tc.blockedBy)
				}
				if ev, all := g.refusalEvent(pg, tc.blockedBy); ev == "" {
					t.Errorf("events %q; want %s on the PodGroup naming %s", all, budget.EventPreemptionBlockedByBudget, tc.blockedBy)
				}
			} else {
				if !status.IsSuccess() {
					t.Fatalf("PodGroupPostFilter: %v", status)
				}
				want := map[string]string{}
				for _, m := range members {
					want[m.Name] = "n1"
				}
				if diff := cmp.Diff(want, nominated(res)); diff != "" {
					t.Errorf("nominations (-want,+got):\n%s", diff)
				}
			}
			if diff := cmp.Diff(tc.want, g.disruptedPods()); diff != "" {
				t.Errorf("disrupted victims (-want,+got):\n%s", diff)
			}
		})
	}
}

// The victims of one gang preemption are reserved together: a second gang,
// decided while the first one's victims are still running, finds the
// allowance spent.
func TestPodGroupPostFilterReservesOnce(t *testing.T) {
	pg1, members1 := gang("one", 2, "1", 100)
	pg2, members2 := gang("two", 3, "1", 100)
	g := newGangEnv(t, nil, []*v1.Node{node("n1"), node("n2")},
		append(replicas("web", "n1", "web", true, 0, 0, 0, 0), replicas("api", "n2", "web", true, 0, 0, 0, 0)...),
		[]*policyv1.PodDisruptionBudget{appPDB("web", 8, 6, 2).Obj()}, pg1, pg2)
	if _, s := g.postFilter(pg1, members1); !s.IsSuccess() {
		t.Fatalf("first gang: %v", s)
	}
	first := g.disruptedPods()
	if len(first) != 2 {
		t.Fatalf("first gang disrupted %v, want 2 victims", first)
	}
	// Its victims are going: the snapshot no longer has them, but the
	// PDB's status has not counted them yet.
	g.forget(t, first...)
	_, s := g.postFilter(pg2, members2)
	if s.IsSuccess() || !strings.Contains(s.Message(), "pdb shop/web") {
		t.Errorf("second gang: %v; want a refusal naming pdb shop/web", s)
	}
	if got := len(g.disruptedPods()); got != 2 {
		t.Errorf("%d victims in all, want 2: the budget allowed 2", got)
	}
}

func TestPodGroupPostFilterPreemptNever(t *testing.T) {
	pg, members := gang("gang", 1, "1", 100)
	never := v1.PreemptNever
	members[0].Spec.PreemptionPolicy = &never
	g := newGangEnv(t, nil, []*v1.Node{node("n1")}, replicas("web", "n1", "", true, 0, 0, 0, 0), nil, pg)
	if _, s := g.postFilter(pg, members); s.IsSuccess() || !strings.Contains(s.Message(), "preemptionPolicy=Never") {
		t.Errorf("a gang with preemptionPolicy Never: %v; want refused for its preemptionPolicy", s)
	}
	if got := g.disruptedPods(); len(got) != 0 {
		t.Errorf("disrupted %v", got)
	}
}

// TestGangVictimGroupSpreadOverNodes: a PodGroup disrupted whole whose pods
// run on two nodes is one unit: its budgets decide all its pods together,
// and it goes whole or not at all, though the gang needs the room of one
// of its pods only.
func TestGangVictimGroupSpreadOverNodes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		allowed   int32
		want      []string
		blockedBy string
	}{
		{name: "its budgets allow all its pods together: taken whole", allowed: 2, want: []string{"train-0", "train-1"}},
		{name: "Strict, a PDB allows only some of them: not taken at all", allowed: 1, blockedBy: "pdb shop/train"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pg, members := gang("gang", 1, "1", 100)
			pods := []*v1.Pod{
				pod("train-0", "n1", "train", 0, true).PodGroupName("train").Obj(),
				pod("train-1", "n2", "train", 0, true).PodGroupName("train").Obj(),
				highPod("keep-1", "n1", "3"), highPod("keep-2", "n2", "3"),
			}
			g := newGangEnv(t, nil, []*v1.Node{node("n1"), node("n2")}, pods,
				[]*policyv1.PodDisruptionBudget{appPDB("train", 2, 2-tc.allowed, tc.allowed).Obj()}, victimGroup("train"), pg)
			// The premise: the Evaluator's unit on n1 is the whole group,
			// its pod on n2 included.
			n1, err := g.snapshot.NodeInfos().Get("n1")
			if err != nil {
				t.Fatal(err)
			}
			var unit []string
			for _, v := range g.units(t, n1) {
				if v.IsGroup() {
					unit = append(unit, victimNames(v)...)
				}
			}
			if diff := cmp.Diff([]string{"train-0", "train-1"}, unit); diff != "" {
				t.Fatalf("the group unit on n1 (-want,+got):\n%s", diff)
			}

			res, status := g.postFilter(pg, members)
			if tc.blockedBy == "" {
				if !status.IsSuccess() {
					t.Fatalf("PodGroupPostFilter: %v", status)
				}
				if got := nominated(res)[members[0].Name]; got == "" {
					t.Errorf("%s nominated nowhere", members[0].Name)
				}
			} else {
				if status.Code() != fwk.Unschedulable || !strings.Contains(status.Message(), tc.blockedBy) {
					t.Errorf("status %v; want Unschedulable naming %s", status, tc.blockedBy)
				}
				if ev, all := g.refusalEvent(pg, tc.blockedBy); ev == "" {
					t.Errorf("events %q; want a refusal on the PodGroup naming %s", all, tc.blockedBy)
				}
			}
			if diff := cmp.Diff(tc.want, g.disruptedPods()); diff != "" {
				t.Errorf("disrupted victims (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestGangRefusalActivatesTheGroupWhenItRunsOut (defect 1): a gang
// preemption refused at actuation is remembered under the PodGroup's UID,
// and its end activates the group's pods: the expiry hook looks the UID up
// among the blocked preemptors, which hold the group's members under it.
// While the refusal holds and the victim's budget denies it, the gang
// preempts nothing and the status names the budget; once the budget allows
// the victim (the refusal was the cache's own), the gang preempts.
func TestGangRefusalActivatesTheGroupWhenItRunsOut(t *testing.T) {
	t.Run("a 429 from the eviction", func(t *testing.T) {
		// One victim: its cancelled reservation is released before the
		// group is remembered, and no other reservation is left to end
		// and activate the blocked preemptors: only the refusal's end can.
		pg, members := gang("gang", 2, "500m", 100)
		g := newGangEnv(t, nil, []*v1.Node{node("n1")}, []*v1.Pod{pod("web-0", "n1", "web", 0, true).Obj(), highPod("keep", "n1", "3")},
			[]*policyv1.PodDisruptionBudget{appPDB("web", 1, 0, 1).Obj()}, pg)
		g.refuse = apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
		if err := g.pl.watchBudgetInformers(g.ctx, g.factory); err != nil {
			t.Fatal(err)
		}
		const ttl = 300 * time.Millisecond
		g.pl.refused.ttl = ttl
		start := time.Now()
		if _, status := g.postFilter(pg, members); status.Code() != fwk.Unschedulable {
			t.Fatalf("PodGroupPostFilter: %v; want Unschedulable: the API server refused the eviction", status)
		}
		if _, live := g.pl.refused.lookup(pg.UID, groupDomain); !live {
			t.Fatalf("no refusal remembered under the PodGroup's UID at %q", groupDomain)
		}
		select {
		case got := <-g.h.activated:
			if elapsed := time.Since(start); elapsed < ttl || elapsed > ttl+2*time.Second {
				t.Errorf("activated %v after %v; want it when the refusal ran out (%v)", got, elapsed, ttl)
			}
			var pods []*v1.Pod
			for _, p := range got {
				pods = append(pods, p)
			}
			if diff := cmp.Diff(keys(members), keys(pods)); diff != "" {
				t.Errorf("activated when the refusal ran out (-want,+got):\n%s", diff)
			}
		case <-time.After(ttl + 2*time.Second):
			t.Fatal("the group's pods were not activated when the refusal ran out")
		}
		if got := g.disruptedPods(); len(got) != 0 {
			t.Errorf("disrupted %v; the API server refused every eviction", got)
		}
	})

	t.Run("a DeniedError from the reservation", func(t *testing.T) {
		pg, members := gang("gang", 1, "1", 100)
		// The snapshot has web-0 under pdb shop/web, which allows it; the
		// cluster has relabelled it since, under pdb shop/db, which does
		// not: the reservation, which re-reads the victim, is denied.
		inSnapshot := []*v1.Pod{pod("web-0", "n1", "web", 0, true).Obj(), highPod("keep", "n1", "3")}
		served := []*v1.Pod{pod("web-0", "n1", "db", 0, true).Obj(), highPod("keep", "n1", "3")}
		g := newGangEnvServing(t, nil, []*v1.Node{node("n1")}, inSnapshot, served,
			[]*policyv1.PodDisruptionBudget{appPDB("web", 1, 0, 1).Obj(), appPDB("db", 1, 1, 0).Obj()}, pg)

		if _, status := g.postFilter(pg, members); status.Code() != fwk.Unschedulable {
			t.Fatalf("first PodGroupPostFilter: %v; want Unschedulable: the reservation is denied", status)
		}
		f, live := g.pl.refused.lookup(pg.UID, groupDomain)
		var de *budget.DeniedError
		if !live || !errors.As(f.err, &de) {
			t.Fatalf("refusal under the PodGroup's UID at %q: live %v, error %v; want the reservation's DeniedError", groupDomain, live, f.err)
		}
		g.h.rec.take()
		reservations := func() int {
			g.pl.mu.Lock()
			defer g.pl.mu.Unlock()
			return len(g.pl.reservations)
		}
		tried := reservations()

		_, status := g.postFilter(pg, members)
		if n := reservations(); n != tried {
			t.Errorf("while the refusal holds, the gang's victims were chosen and reserved again (%d candidates reserved, was %d)", n, tried)
		}
		if status.Code() != fwk.Unschedulable || !strings.Contains(status.Message(), "pdb shop/db") {
			t.Errorf("while the refusal holds: %v; want Unschedulable naming pdb shop/db", status)
		}
		if ev, all := g.refusalEvent(pg, "pdb shop/db"); ev == "" {
			t.Errorf("events %q; want a refusal on the PodGroup naming pdb shop/db", all)
		}
		if got := g.disruptedPods(); len(got) != 0 {
			t.Fatalf("disrupted %v while the refusal holds", got)
		}

		pdbs := g.fw.ClientSet().PolicyV1().PodDisruptionBudgets(ns)
		cur, err := pdbs.Get(g.ctx, "db", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Status.DisruptionsAllowed, cur.Status.DesiredHealthy = 1, 0
		cur.ResourceVersion = "2" // the fake clientset keeps what it is given
		freed, err := pdbs.UpdateStatus(g.ctx, cur, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for v, _ := g.budgets.ObservedResourceVersion(budget.KindPDB, ns, "db"); v != freed.ResourceVersion; v, _ = g.budgets.ObservedResourceVersion(budget.KindPDB, ns, "db") {
			if time.Now().After(deadline) {
				t.Fatal("the budget cache did not see the freed PDB")
			}
			time.Sleep(10 * time.Millisecond)
		}
		res, status := g.postFilter(pg, members)
		if !status.IsSuccess() {
			t.Fatalf("once the budget allows the victim: %v; want a preemption", status)
		}
		if diff := cmp.Diff([]string{"web-0"}, g.disruptedPods()); diff != "" {
			t.Errorf("disrupted victims (-want,+got):\n%s", diff)
		}
		if got := nominated(res)[members[0].Name]; got != "n1" {
			t.Errorf("%s nominated to %q, want n1", members[0].Name, got)
		}
	})
}

// TestGangBestEffortSparesDeniedVictimsFirst (defect 2): in BestEffort
// mode a unit its budget denies is reprieved before one that spends a
// budget within its allowance, whatever their importance: of two where
// one must go, the allowed one goes, though the denied one is less
// important. Were denied and spending units one class, ordered by
// importance alone, the denied one would go.
func TestGangBestEffortSparesDeniedVictimsFirst(t *testing.T) {
	bestEffort := DefaultArgs()
	bestEffort.Mode = ModeBestEffort
	now := time.Now()
	for _, tc := range []struct {
		name            string
		denied, allowed *v1.Pod
	}{
		{
			name:    "the denied one has a lower priority",
			denied:  pod("db-0", "n1", "db", 0, true).Obj(),
			allowed: pod("web-0", "n1", "web", 50, true).Obj(),
		},
		{
			name:    "the denied one is younger",
			denied:  pod("db-0", "n1", "db", 10, true).StartTime(metav1.NewTime(now)).Obj(),
			allowed: pod("web-0", "n1", "web", 10, true).StartTime(metav1.NewTime(now.Add(-time.Hour))).Obj(),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pg, members := gang("gang", 1, "1", 100)
			g := newGangEnv(t, bestEffort, []*v1.Node{node("n1")}, []*v1.Pod{tc.denied, tc.allowed, highPod("keep", "n1", "2")},
				[]*policyv1.PodDisruptionBudget{appPDB("db", 1, 1, 0).Obj(), appPDB("web", 1, 0, 1).Obj()}, pg)
			// The premise: db-0 is denied, web-0 allowed and spends its
			// budget, and web-0 is the more important unit.
			if d := g.budgets.Decide(tc.denied, budget.OperationEvict); d.Allowed {
				t.Fatalf("db-0 allowed; want it denied")
			}
			if d := g.budgets.Decide(tc.allowed, budget.OperationEvict); !d.Allowed || d.Free() {
				t.Fatalf("web-0: allowed %v, free %v; want allowed, spending: %s", d.Allowed, d.Free(), d.Message())
			}
			n1, err := g.snapshot.NodeInfos().Get("n1")
			if err != nil {
				t.Fatal(err)
			}
			byName := map[string]*preemption.DomainVictim{}
			for _, v := range g.units(t, n1) {
				byName[victimNames(v)[0]] = v
			}
			if !preemption.MoreImportantVictim(byName["web-0"], byName["db-0"]) {
				t.Fatal("web-0 is not the more important unit; the test shows nothing")
			}

			if _, status := g.postFilter(pg, members); !status.IsSuccess() {
				t.Fatalf("PodGroupPostFilter: %v", status)
			}
			if diff := cmp.Diff([]string{"web-0"}, g.disruptedPods()); diff != "" {
				t.Errorf("disrupted victims (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestPodGroupAsyncPreemptionActivatesWhenTheLastVictimWasAlreadyGone is
// TestAsyncPreemptionActivatesWhenTheLastVictimWasAlreadyGone for a gang:
// its victims were taken by another preemption after the snapshot (as
// victims disrupted whole, on many nodes, can be). Once upstream has
// registered the last of them, the gang's pods are activated.
func TestPodGroupAsyncPreemptionActivatesWhenTheLastVictimWasAlreadyGone(t *testing.T) {
	pg, members := gang("gang", 1, "2", 100)
	keep := highPod("keep", "n1", "2")
	inSnapshot := []*v1.Pod{pod("gone-0", "n1", "", 5, true).Obj(), pod("gone-1", "n1", "", 0, true).Obj(), keep}
	g := newGangEnvServing(t, nil, []*v1.Node{node("n1")}, inSnapshot, []*v1.Pod{keep}, nil, pg)
	g.asyncPreemption(t, pg, members, "its last victim, already gone, was registered")
	if got := g.disruptedPods(); len(got) != 0 {
		t.Errorf("disrupted %v; every victim was gone already", got)
	}
}

// TestPodGroupAsyncPreemptionActivatesWhenTheGateTookTheLastVictim is
// TestAsyncPreemptionActivatesWhenTheGateTookTheLastVictim for a gang:
// both victims spend pdb shop/web, so the gate disrupts both from the
// first call, upstream's last victim included, before upstream registers
// it. The gang's pods are activated once it is registered.
func TestPodGroupAsyncPreemptionActivatesWhenTheGateTookTheLastVictim(t *testing.T) {
	pg, members := gang("gang", 1, "2", 100)
	pods := []*v1.Pod{pod("web-0", "n1", "web", 5, true).Obj(), pod("web-1", "n1", "web", 0, true).Obj(), highPod("keep", "n1", "2")}
	g := newGangEnv(t, nil, []*v1.Node{node("n1")}, pods, []*policyv1.PodDisruptionBudget{appPDB("web", 2, 0, 2).Obj()}, pg)
	g.asyncPreemption(t, pg, members, "its last victim, disrupted by the gate, was registered")
	if diff := cmp.Diff([]string{"web-0", "web-1"}, g.disruptedPods()); diff != "" {
		t.Errorf("disrupted (-want,+got):\n%s", diff)
	}
}
