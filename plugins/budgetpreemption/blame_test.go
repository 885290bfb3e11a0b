package budgetpreemption

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/component-base/metrics/legacyregistry"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"

	"github.com/budgetguard/budgetguard/plugins/budget"
)

// blockedCount sums budgetguard_preemption_blocked_total over its reasons.
func blockedCount(t *testing.T) float64 {
	t.Helper()
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != "budgetguard_preemption_blocked_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// postFilter runs PostFilter for p, which is in e's cluster, with every node
// short of CPU, and returns its status and the events recorded on p.
func (e *env) postFilter(t *testing.T, p *v1.Pod) (*fwk.Status, []string) {
	t.Helper()
	rec := events.NewFakeRecorder(100)
	e.pl.fh = &recorderHandle{Handle: e.fw, rec: rec}
	state, nodeInfos := e.preFilter(t, p)
	m := framework.NewDefaultNodeToStatus()
	for _, ni := range nodeInfos {
		if ni.Node() == nil {
			continue
		}
		m.Set(ni.Node().Name, fwk.NewStatus(fwk.Unschedulable, "Insufficient cpu"))
	}
	_, status := e.pl.PostFilter(e.ctx, state, p, m)
	var evs []string
	for {
		select {
		case ev := <-rec.Events:
			evs = append(evs, ev)
		default:
			return status, evs
		}
	}
}

// TestBlockedCountedOncePerPostFilter: one PostFilter that budgets blocked
// counts one in budgetguard_preemption_blocked_total and sends the
// preemptor one event, however many victims and nodes the budgets denied,
// whether the dry run or the actuation found the denial.
func TestBlockedCountedOncePerPostFilter(t *testing.T) {
	delete := DefaultArgs()
	delete.Actuation = ActuationDelete
	tests := []struct {
		name  string
		args  *BudgetAwarePreemptionArgs
		pods  []*v1.Pod
		pdbs  []*policyv1.PodDisruptionBudget
		raced *v1.Pod // reserved in the ledger between the dry run and the actuation
	}{
		{
			name: "the dry run: denied victims on two nodes",
			args: DefaultArgs(),
			pods: slices.Concat(replicas("db", "n1", "db", true, 0, 0, 0, 0), replicas("db-b", "n2", "db", true, 0, 0, 0, 0)),
			pdbs: []*policyv1.PodDisruptionBudget{appPDB("db", 8, 8, 0).Obj()},
		},
		{
			// n2's victims are denied in the dry run; n1's two victims are
			// allowed then, and denied together when they are reserved,
			// after a disruption of web elsewhere.
			name:  "the actuation: two victims denied together, after a node denied in the dry run",
			args:  delete,
			pods:  slices.Concat(replicas("web", "n1", "web", true, 0, 0, 0, 0), replicas("db", "n2", "db", true, 0, 0, 0, 0)),
			pdbs:  []*policyv1.PodDisruptionBudget{appPDB("web", 4, 2, 2).Obj(), appPDB("db", 4, 4, 0).Obj()},
			raced: pod("web-9", "elsewhere", "web", 0, true).Obj(),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := preemptor("2", 100)
			e := newEnv(t, tc.args, []*v1.Node{node("n1"), node("n2")}, append(tc.pods, p), tc.pdbs)
			e.pl.deletePod = func(context.Context, preemption.Candidate, preemption.ExecutorPreemptor, *v1.Pod, string) error {
				t.Error("a victim was deleted")
				return nil
			}
			if tc.raced != nil {
				var once sync.Once
				e.pl.Executor.PreemptPod = func(ctx context.Context, c preemption.Candidate, pr preemption.ExecutorPreemptor, victim *v1.Pod, name string) (bool, error) {
					once.Do(func() {
						if d, _ := e.budgets.Reserve(tc.raced, budget.OperationEvict); !d.Allowed {
							t.Errorf("reserving %s: %s", tc.raced.Name, d.Message())
						}
					})
					return false, e.pl.preemptPod(ctx, c, pr, victim, name)
				}
			}
			before := blockedCount(t)
			status, evs := e.postFilter(t, p)
			if status.IsSuccess() {
				t.Fatal("PostFilter succeeded; want it blocked by the budgets")
			}
			if got := blockedCount(t) - before; got != 1 {
				t.Errorf("budgetguard_preemption_blocked_total grew by %v, want 1 (status %q)", got, status.Message())
			}
			n := 0
			for _, ev := range evs {
				if strings.Contains(ev, "PreemptionBlockedByBudget") {
					n++
				}
			}
			if n != 1 {
				t.Errorf("%d PreemptionBlockedByBudget events, want 1: %q", n, evs)
			}
		})
	}
}

// TestBlameOnlyBudgetsThatKeepThePreemptorOut: a budget is named in the
// refusal, the event and the metric only when removing the pods it protects
// would have let the preemptor fit.
func TestBlameOnlyBudgetsThatKeepThePreemptorOut(t *testing.T) {
	system := func(n int) []*v1.Pod {
		prios := make([]int32, n)
		for i := range prios {
			prios[i] = 200
		}
		return replicas("system", "n1", "", true, prios...)
	}
	webPDB, dbPDB := appPDB("web", 1, 1, 0).Obj(), appPDB("db", 2, 2, 0).Obj()
	tests := []struct {
		name string
		pods []*v1.Pod
		cpu  string
		// blamed are the budgets the refusal names; none means the
		// preemption is not counted as blocked.
		blamed, innocent []string
	}{
		{
			name:     "no fit even with every lower-priority pod gone; every one protected",
			pods:     slices.Concat(system(3), replicas("web", "n1", "web", true, 0)),
			cpu:      "2",
			innocent: []string{"pdb shop/web"},
		},
		{
			name:     "no fit even with every lower-priority pod gone; some free",
			pods:     slices.Concat(system(2), replicas("batch", "n1", "", true, 0), replicas("web", "n1", "web", true, 0)),
			cpu:      "3",
			innocent: []string{"pdb shop/web"},
		},
		{
			name:     "only one budget's pods would make room",
			pods:     slices.Concat(replicas("web", "n1", "web", true, 0), replicas("db", "n1", "db", true, 0, 0), system(1)),
			cpu:      "2",
			blamed:   []string{"pdb shop/db"},
			innocent: []string{"pdb shop/web"},
		},
		{
			name:   "two budgets' pods together would make room",
			pods:   slices.Concat(replicas("web", "n1", "web", true, 0), replicas("db", "n1", "db", true, 0), system(2)),
			cpu:    "2",
			blamed: []string{"pdb shop/web", "pdb shop/db"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := preemptor(tc.cpu, 100)
			e := newEnv(t, nil, []*v1.Node{node("n1")}, append(tc.pods, p), []*policyv1.PodDisruptionBudget{webPDB, dbPDB})
			before := blockedCount(t)
			status, evs := e.postFilter(t, p)
			if status.IsSuccess() {
				t.Fatal("PostFilter succeeded; want no candidate")
			}
			msg := status.Message()
			for _, b := range tc.blamed {
				if !strings.Contains(msg, b) {
					t.Errorf("status %q does not name %s", msg, b)
				}
			}
			for _, b := range tc.innocent {
				if strings.Contains(msg, b) {
					t.Errorf("status %q names %s, which did not keep the preemptor out", msg, b)
				}
				for _, ev := range evs {
					if strings.Contains(ev, b) {
						t.Errorf("event %q names %s, which did not keep the preemptor out", ev, b)
					}
				}
			}
			want := 0.0
			if len(tc.blamed) > 0 {
				want = 1
			}
			if got := blockedCount(t) - before; got != want {
				t.Errorf("budgetguard_preemption_blocked_total grew by %v, want %v", got, want)
			}
		})
	}
}
