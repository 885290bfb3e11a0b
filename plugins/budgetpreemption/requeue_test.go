package budgetpreemption

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/budgetguard/budgetguard/internal/testobj"
	"github.com/budgetguard/budgetguard/plugins/budget"
)

func TestBudgetMayFree(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// pdb is web's PDB at generation 1: 4 healthy, 3 desired, 1 allowed.
	pdb := func() *testobj.PDBWrapper { return appPDB("web", 4, 3, 1) }
	pub := func() *testobj.PUBWrapper {
		return testobj.MakePUB().Namespace(ns).Name("web").Generation(1).MatchLabels("app", "web").
			MaxUnavailable(intstr.FromInt32(1)).Status(4, 3, 1)
	}
	type testCase struct {
		name     string
		old, new any
		want     bool
	}
	// The cases every kind of budget shares: base is the budget (4
	// available, 3 desired, 1 allowed); up and down change only the
	// number of disruptions allowed.
	var tests []testCase
	for _, k := range []struct {
		kind           string
		base, up, down func() any
	}{
		{"pdb", func() any { return pdb().Obj() }, func() any { return pdb().Status(4, 3, 2).Obj() }, func() any { return pdb().Status(3, 3, 0).Obj() }},
		{"pub", func() any { return pub().Obj() }, func() any { return pub().Status(4, 3, 2).Obj() }, func() any { return pub().Status(3, 3, 0).Obj() }},
	} {
		tests = append(tests,
			testCase{name: k.kind + " added", new: k.base()},
			testCase{name: k.kind + " deleted", old: k.base(), want: true},
			testCase{name: k.kind + " unchanged (resync)", old: k.base(), new: k.base()},
			testCase{name: k.kind + " allowed up", old: k.base(), new: k.up(), want: true},
			testCase{name: k.kind + " allowed down", old: k.base(), new: k.down()},
		)
	}
	tests = append(tests, []testCase{
		{name: "pdb currentHealthy up", old: pdb().Status(2, 3, 0).Obj(), new: pdb().Status(3, 3, 0).Obj(), want: true},
		{name: "pdb desiredHealthy down", old: pdb().Status(3, 3, 0).Obj(), new: pdb().Status(3, 2, 0).Obj(), want: true},
		{name: "pdb disrupted pod confirmed", old: pdb().Status(4, 3, 0).Disrupted(at, "web-0").Obj(), new: pdb().Status(4, 3, 0).Obj(), want: true},
		{name: "pdb disrupted pod recorded", old: pdb().Obj(), new: pdb().Status(4, 3, 0).Disrupted(at, "web-0").Obj()},
		{name: "pdb maxUnavailable raised", old: pdb().Obj(), new: pdb().MaxUnavailable(2).Generation(2).Obj(), want: true},
		{name: "pdb selector changed", old: pdb().Obj(), new: pdb().MatchLabels("app", "shop").Obj(), want: true},
		{name: "pdb unhealthyPodEvictionPolicy AlwaysAllow", old: pdb().Obj(), new: pdb().UnhealthyPodEvictionPolicy(policyv1.AlwaysAllow).Obj(), want: true},
		{name: "pdb status catches up with its generation", old: pdb().Generation(2).Obj(), new: pdb().Generation(2).Status(4, 3, 1).Obj(), want: true},
		{name: "pdb labels changed", old: pdb().Obj(), new: func() *policyv1.PodDisruptionBudget {
			p := pdb().Obj()
			p.Labels = map[string]string{"team": "shop"}
			return p
		}()},
		{name: "pub desiredAvailable to 0", old: pub().Status(3, 3, 0).Obj(), new: pub().Status(3, 0, 0).Obj(), want: true},
		{name: "pub disrupted pod confirmed", old: pub().Status(4, 3, 0).Disrupted(at, "web-0").Obj(), new: pub().Status(4, 3, 0).Obj(), want: true},
		{name: "pub maxUnavailable raised", old: pub().Obj(), new: pub().MaxUnavailable(intstr.FromInt32(2)).Obj(), want: true},
		{name: "pub protects DELETE only", old: pub().Obj(), new: pub().Annotation(budget.AnnotationPUBProtectOperations, "DELETE").Obj(), want: true},
		{name: "pub unrelated annotation", old: pub().Obj(), new: pub().Annotation("team", "shop").Obj()},
		{name: "not a budget", old: &v1.Pod{}, new: &v1.Pod{}},
	}...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := budgetMayFree(tc.old, tc.new); got != tc.want {
				t.Errorf("budgetMayFree = %v, want %v (%v)", got, tc.want, hint(tc.want))
			}
		})
	}
}

func hint(b bool) fwk.QueueingHint {
	if b {
		return fwk.Queue
	}
	return fwk.QueueSkip
}

func TestBlockedPreemptorsExpire(t *testing.T) {
	clk := testingclock.NewFakePassiveClock(time.Now())
	b := newBlockedPreemptors()
	b.clock = clk
	old := preemptor("1", 100)
	old.Name, old.UID = "old", "old"
	b.add(old)
	clk.SetTime(clk.Now().Add(blockedTTL + time.Second))
	p := preemptor("1", 100)
	b.add(p)
	got := b.take()
	if len(got) != 1 || got[ns+"/preemptor"] != p {
		t.Errorf("take() = %v, want only %s/preemptor", got, ns)
	}
	if got := b.take(); got != nil {
		t.Errorf("second take() = %v, want nothing", got)
	}
}

// activatorHandle records the pods the plugin activates.
type activatorHandle struct {
	fwk.Handle
	activated chan map[string]*v1.Pod
}

func (h *activatorHandle) Activate(_ klog.Logger, pods map[string]*v1.Pod) { h.activated <- pods }

// TestPreemptorRequeuedWhenBudgetFrees: a preemptor that the budget blocked
// is activated when the PDB's status allows more disruptions, and not on a
// change that frees nothing. Before requeue.go nothing requeued it: the
// plugin registered no budget event, so the preemptor waited for the
// queue's 5-minute flush.
func TestPreemptorRequeuedWhenBudgetFrees(t *testing.T) {
	p := preemptor("2", 100)
	pods := append(replicas("web", "n1", "web", true, 0, 0, 0, 0), p)
	e := newEnv(t, nil, []*v1.Node{node("n1")}, pods, []*policyv1.PodDisruptionBudget{appPDB("web", 4, 3, 1).Obj()})
	h := &activatorHandle{Handle: e.fw, activated: make(chan map[string]*v1.Pod, 10)}
	e.pl.fh = h
	if err := e.pl.watchBudgetInformers(e.ctx, e.fw.SharedInformerFactory()); err != nil {
		t.Fatal(err)
	}

	state, _ := e.preFilter(t, p)
	m := framework.NewDefaultNodeToStatus()
	m.Set("n1", fwk.NewStatus(fwk.Unschedulable, "Insufficient cpu"))
	if _, status := e.pl.PostFilter(e.ctx, state, p, m); status.IsSuccess() || !strings.Contains(status.Message(), "pdb shop/web") {
		t.Fatalf("PostFilter: %v; want it blocked by pdb shop/web", status)
	}

	pdbs := e.fw.ClientSet().PolicyV1().PodDisruptionBudgets(ns)
	update := func(what string, change func(*policyv1.PodDisruptionBudget)) string {
		t.Helper()
		cur, err := pdbs.Get(e.ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		change(cur)
		got, err := pdbs.UpdateStatus(e.ctx, cur, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return got.ResourceVersion
	}
	update("labelled", func(p *policyv1.PodDisruptionBudget) { p.Labels = map[string]string{"team": "shop"} })
	select {
	case got := <-h.activated:
		t.Fatalf("a change that frees nothing activated %v", got)
	case <-time.After(500 * time.Millisecond):
	}

	freed := update("freed", func(p *policyv1.PodDisruptionBudget) { p.Status.DisruptionsAllowed = 2 })
	select {
	case got := <-h.activated:
		if len(got) != 1 || got[ns+"/preemptor"] == nil || got[ns+"/preemptor"].UID != p.UID {
			t.Errorf("activated %v, want only %s/preemptor", got, ns)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the preemptor was not activated after disruptionsAllowed went from 1 to 2")
	}
	if v, _ := e.budgets.ObservedResourceVersion(budget.KindPDB, ns, "web"); v != freed {
		t.Errorf("activated before the budget cache saw the freed budget: it has version %q", v)
	}
}
