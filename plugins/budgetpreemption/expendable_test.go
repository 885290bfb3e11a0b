package budgetpreemption

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/client-go/tools/events"
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
		{name: "below the cutoff", priority: -20, want: map[string][]string{"n1": {"web-0"}}, wantEvent: true},
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
			got := map[string][]string{}
			for _, c := range candidates {
				var names []string
				for _, v := range c.Victims().Pods {
					names = append(names, v.Name)
				}
				got[c.Name()] = names
			}
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
				for _, want := range []string{reasonExpendableUnderBudget, "pdb shop/web", "shop/web-0", "expendablePodsPriorityCutoff -10"} {
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
