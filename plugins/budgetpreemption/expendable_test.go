package budgetpreemption

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
)

// TestExpendableVictimsUnderBudget checks the cluster-autoscaler contract for
// expendable pods: in Strict mode a victim below expendablePodsPriorityCutoff
// is taken although its budget allows no disruption (the autoscaler assumes
// it may be preempted and will not scale up), and the preemptor is told so
// by an event naming the budget and the cutoff. At or above the cutoff the
// budget keeps it.
func TestExpendableVictimsUnderBudget(t *testing.T) {
	for _, tc := range []struct {
		name      string
		priority  int32
		want      map[string][]string
		wantEvent bool
	}{
		// The replicas are alike (no start time): the reprieve keeps the
		// node's order (preemption.MoreImportantVictim), so the last goes.
		{name: "below the cutoff", priority: -20, want: map[string][]string{"n1": {"web-3"}}, wantEvent: true},
		{name: "above the cutoff", priority: -5, want: map[string][]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pods := replicas("web", "n1", "web", true, tc.priority, tc.priority, tc.priority, tc.priority)
			// The budget allows no disruption: 4 healthy, 4 desired.
			e := newEnv(t, nil, []*v1.Node{node("n1")}, pods, []*policyv1.PodDisruptionBudget{appPDB("web", 4, 4, 0).Obj()})
			rec := events.NewFakeRecorder(10)
			e.pl.fh = &recorderHandle{Handle: e.fw, rec: rec}
			p := preemptor("1", 100)

			state, nodeInfos := e.preFilter(t, p)
			exp := &expendableRecorder{}
			state.Write(expendableKey, exp)
			candidates, _, _ := e.pl.Evaluator.DryRunPreemption(e.ctx, state, p, nodeInfos, nil, 0, int32(len(nodeInfos)))
			got := victimsByNode(candidates)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("victims per candidate node (-want,+got):\n%s", diff)
			}
			if c := e.pl.Evaluator.SelectCandidate(e.ctx, candidates); c != nil {
				e.pl.reportExpendable(p, c.Name(), exp)
			}
			select {
			case ev := <-rec.Events:
				if !tc.wantEvent {
					t.Errorf("unexpected event %q", ev)
				}
				for _, want := range []string{reasonExpendableUnderBudget, "pdb shop/web", "shop/web-3", "preempting 1 pod below expendablePodsPriorityCutoff -10 on node n1 although a disruption budget protects it,"} {
					if !strings.Contains(ev, want) {
						t.Errorf("event %q does not contain %q", ev, want)
					}
				}
			default:
				if tc.wantEvent {
					t.Errorf("no %s event on the preemptor", reasonExpendableUnderBudget)
				}
			}
		})
	}
}

// TestExpendableVictimDeletedAtActuation: in Strict mode with the Eviction
// API, a budget-protected victim below the cutoff is neither refused by the
// reservation nor evicted (the API server would answer 429): it is deleted,
// as cluster-autoscaler assumes, and reserves nothing.
func TestExpendableVictimDeletedAtActuation(t *testing.T) {
	pods := replicas("web", "n1", "web", true, -20, -20)
	e := newEnv(t, DefaultArgs(), []*v1.Node{node("n1")}, pods, []*policyv1.PodDisruptionBudget{appPDB("web", 2, 2, 0).Obj()})
	var deleted []string
	e.pl.deletePod = func(_ context.Context, _ preemption.Candidate, _ preemption.ExecutorPreemptor, victim *v1.Pod, _ string) error {
		deleted = append(deleted, victim.Name)
		return nil
	}
	p := testPreemptor{preemptor("1", 100)}
	if err := e.pl.preemptPod(e.ctx, &testCandidate{"n1", pods[:1]}, p, pods[0], Name); err != nil {
		t.Fatalf("preempting an expendable victim: %v", err)
	}
	if len(deleted) != 1 || deleted[0] != pods[0].Name {
		t.Errorf("deleted %v, want [%s] (deleted, not evicted)", deleted, pods[0].Name)
	}
	if got := e.budgets.InFlight(); got != 0 {
		t.Errorf("ledger holds %d reservations, want 0: an expendable victim spends no budget", got)
	}
}
