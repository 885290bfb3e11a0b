package budgetpreemption

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/budgetguard/budgetguard/plugins/budget"
)

// nodeVictims is what SelectVictimsOnNode answers for one node: the
// victims' names in its order, the count and the status code.
type nodeVictims struct {
	Victims []string
	Count   int
	Code    fwk.Code
}

func nodeVictimsOf(victims []*v1.Pod, count int, s *fwk.Status) nodeVictims {
	got := nodeVictims{Count: count, Code: s.Code()}
	for _, p := range victims {
		got.Victims = append(got.Victims, p.Name)
	}
	return got
}

// selectOn runs sel on a copy of e's only node and of a cycle state as
// PostFilter gives the dry run, and returns its answer.
type selectOn func(state fwk.CycleState, ni fwk.NodeInfo) ([]*v1.Pod, int, *fwk.Status)

func (e *env) selectOnNode(t *testing.T, p *v1.Pod, sel selectOn) nodeVictims {
	t.Helper()
	state, nodeInfos := e.preFilter(t, p)
	state.Write(blockKey, &blockRecorder{})
	state.Write(expendableKey, &expendableRecorder{})
	return nodeVictimsOf(sel(state, nodeInfos[0].Snapshot()))
}

// unbudgetedArgs are the configurations the fast path must not tell apart
// from the full path: Strict, BestEffort, and an overriding preemptor.
func unbudgetedArgs() map[string]*BudgetAwarePreemptionArgs {
	bestEffort := DefaultArgs()
	bestEffort.Mode = ModeBestEffort
	override := DefaultArgs()
	override.OverrideBudgetsAtPriority = ptr.To[int32](100)
	return map[string]*BudgetAwarePreemptionArgs{"Strict": DefaultArgs(), "BestEffort": bestEffort, "override": override}
}

// TestUnbudgetedNodeReprievedAsUpstream: on a node where no budget covers
// any potential victim, SelectVictimsOnNode takes the reprieve without
// decisions, and answers as the full path (every pod decided) does on the
// same node, in Strict, in BestEffort and for an overriding preemptor: the
// same victims in the same order, count 0, the same status. Upstream's
// DefaultPreemption, given the cluster's PDBs, takes the same victims,
// except where budgetguard's own rules differ (wantUpstream).
func TestUnbudgetedNodeReprievedAsUpstream(t *testing.T) {
	n1 := []*v1.Node{node("n1")}
	// db's PDB covers no pod on n1.
	dbPDB := appPDB("db", 3, 3, 0).Obj()
	tests := []struct {
		name      string
		pods      []*v1.Pod
		pdbs      []*policyv1.PodDisruptionBudget
		preemptor *v1.Pod
		want      nodeVictims
		// wantUpstream is DefaultPreemption's answer where it differs.
		wantUpstream *nodeVictims
	}{
		{
			name:      "running pods under no budget",
			pods:      replicas("web", "n1", "web", true, 3, 0, 2, 1),
			pdbs:      []*policyv1.PodDisruptionBudget{dbPDB},
			preemptor: preemptor("2", 100),
			want:      nodeVictims{Victims: []string{"web-3", "web-1"}, Code: fwk.Success},
		},
		{
			name: "pods as scheduler_perf leaves them: Pending, never started",
			pods: []*v1.Pod{
				pod("p-0", "n1", "web", 5, false).Phase(v1.PodPending).Obj(), pod("p-1", "n1", "web", 7, false).Phase(v1.PodPending).Obj(),
				pod("p-2", "n1", "web", 6, false).Phase(v1.PodPending).Obj(), pod("p-3", "n1", "web", 4, false).Phase(v1.PodPending).Obj(),
			},
			preemptor: preemptor("3", 100),
			want:      nodeVictims{Victims: []string{"p-2", "p-0", "p-3"}, Code: fwk.Success},
		},
		{
			// Rule 1: a budget has no say about pods being deleted or
			// not yet running; upstream counts them against the PDB,
			// reprieves them first, and takes the others instead.
			name: "a PDB that allows nothing, over pods rule 1 exempts",
			pods: []*v1.Pod{
				pod("web-0", "n1", "web", 1, true).Terminating().Obj(), pod("web-1", "n1", "web", 2, false).Phase(v1.PodPending).Obj(),
				pod("batch-0", "n1", "", 3, true).Obj(), pod("batch-1", "n1", "", 4, true).Obj(),
			},
			pdbs:         []*policyv1.PodDisruptionBudget{appPDB("web", 2, 2, 0).Obj()},
			preemptor:    preemptor("2", 100),
			want:         nodeVictims{Victims: []string{"web-1", "web-0"}, Code: fwk.Success},
			wantUpstream: &nodeVictims{Victims: []string{"batch-1", "batch-0"}, Code: fwk.Success},
		},
		{
			name: "a pod annotated safe-to-evict false is no victim",
			pods: slices.Concat(replicas("web", "n1", "web", true, 3, 2, 1),
				[]*v1.Pod{pod("keep", "n1", "", 0, true).Annotation(budget.AnnotationSafeToEvict, "false").Obj()}),
			preemptor:    preemptor("2", 100),
			want:         nodeVictims{Victims: []string{"web-1", "web-2"}, Code: fwk.Success},
			wantUpstream: &nodeVictims{Victims: []string{"web-2", "keep"}, Code: fwk.Success},
		},
		{
			name:      "a pod below the expendable cutoff under no budget",
			pods:      replicas("web", "n1", "web", true, 3, -20, 2, 1),
			preemptor: preemptor("2", 100),
			want:      nodeVictims{Victims: []string{"web-3", "web-1"}, Code: fwk.Success},
		},
		{
			name:      "the preemptor does not fit with every lower-priority pod removed",
			pods:      slices.Concat(replicas("web", "n1", "web", true, 1, 0), replicas("sys", "n1", "", true, 200, 200)),
			preemptor: preemptor("3", 100),
			want:      nodeVictims{Code: fwk.Unschedulable},
		},
		{
			name:      "no lower-priority pod",
			pods:      replicas("sys", "n1", "", true, 200, 200, 200, 200),
			preemptor: preemptor("1", 100),
			want:      nodeVictims{Code: fwk.UnschedulableAndUnresolvable},
		},
	}
	for mode, args := range unbudgetedArgs() {
		for _, tc := range tests {
			t.Run(mode+"/"+tc.name, func(t *testing.T) {
				e := newEnv(t, args, n1, tc.pods, tc.pdbs)
				p := tc.preemptor
				state, nodeInfos := e.preFilter(t, p)
				if _, ok := e.pl.unbudgetedVictims(p, e.units(t, nodeInfos[0])); !ok {
					t.Fatal("unbudgetedVictims: a potential victim is covered; want none")
				}
				fast := e.selectOnNode(t, p, func(state fwk.CycleState, ni fwk.NodeInfo) ([]*v1.Pod, int, *fwk.Status) {
					return e.pl.SelectVictimsOnNode(e.ctx, state, p, ni, e.units(t, ni), nil)
				})
				full := e.selectOnNode(t, p, func(state fwk.CycleState, ni fwk.NodeInfo) ([]*v1.Pod, int, *fwk.Status) {
					return e.pl.selectDeciding(e.ctx, state, p, ni, e.units(t, ni))
				})
				if diff := cmp.Diff(tc.want, fast); diff != "" {
					t.Errorf("SelectVictimsOnNode (-want,+got):\n%s", diff)
				}
				if diff := cmp.Diff(fast, full); diff != "" {
					t.Errorf("the full path answers otherwise (-SelectVictimsOnNode,+full path):\n%s", diff)
				}

				all, err := e.fw.SharedInformerFactory().Policy().V1().PodDisruptionBudgets().Lister().List(labels.Everything())
				if err != nil {
					t.Fatal(err)
				}
				dp := upstreamPreemption(t, e)
				up := nodeVictimsOf(dp.SelectVictimsOnNode(e.ctx, state, p, nodeInfos[0].Snapshot(), e.units(t, nodeInfos[0]), all))
				wantUp := tc.want
				if tc.wantUpstream != nil {
					wantUp = *tc.wantUpstream
				}
				if diff := cmp.Diff(wantUp, up); diff != "" {
					t.Errorf("DefaultPreemption (-want,+got):\n%s", diff)
				}
			})
		}
	}
}

// TestCoveredPodTakesTheFullPath: one potential victim under a budget, by a
// PDB or a PUB, and the node's pods are decided. Web-0, the least important
// pod, is covered; the reprieve without decisions would take it. Where its
// PDB denies it, Strict keeps it and takes others in its place, or finds
// no candidate when none will do; BestEffort takes it when it must, and
// counts it as denied. Where its PUB allows it, Strict prefers the victims
// that spend nothing.
func TestCoveredPodTakesTheFullPath(t *testing.T) {
	pods := func() []*v1.Pod {
		return slices.Concat(replicas("web", "n1", "web", true, 0), replicas("batch", "n1", "", true, 1, 2, 3))
	}
	pdb := []*policyv1.PodDisruptionBudget{appPDB("web", 1, 1, 0).Obj()}
	for _, tc := range []struct {
		name      string
		mode      string
		pub       bool
		preemptor *v1.Pod
		want      nodeVictims
	}{
		{name: "Strict, a PDB that denies it", mode: "Strict", preemptor: preemptor("2", 10),
			want: nodeVictims{Victims: []string{"batch-1", "batch-0"}, Code: fwk.Success}},
		{name: "Strict, a PDB that denies it, the whole node needed", mode: "Strict", preemptor: preemptor("4", 10),
			want: nodeVictims{Code: fwk.Unschedulable}},
		{name: "BestEffort, a PDB that denies it, the whole node needed", mode: "BestEffort", preemptor: preemptor("4", 10),
			want: nodeVictims{Victims: []string{"batch-2", "batch-1", "batch-0", "web-0"}, Count: deniedWeight, Code: fwk.Success}},
		{name: "Strict, a PUB that allows it", mode: "Strict", pub: true, preemptor: preemptor("2", 10),
			want: nodeVictims{Victims: []string{"batch-1", "batch-0"}, Code: fwk.Success}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e *env
			if tc.pub {
				// kruise-api's generated fake clientset never sends the
				// initial-events bookmark of a streaming list.
				clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
				e = newEnv(t, unbudgetedArgs()[tc.mode], []*v1.Node{node("n1")}, pods(), nil)
				withWebPUB(t, e)
			} else {
				e = newEnv(t, unbudgetedArgs()[tc.mode], []*v1.Node{node("n1")}, pods(), pdb)
			}
			p := tc.preemptor
			_, nodeInfos := e.preFilter(t, p)
			if _, ok := e.pl.unbudgetedVictims(p, e.units(t, nodeInfos[0])); ok {
				t.Fatal("unbudgetedVictims: no potential victim covered; want web-0 covered")
			}
			got := e.selectOnNode(t, p, func(state fwk.CycleState, ni fwk.NodeInfo) ([]*v1.Pod, int, *fwk.Status) {
				return e.pl.SelectVictimsOnNode(e.ctx, state, p, ni, e.units(t, ni), nil)
			})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("SelectVictimsOnNode (-want,+got):\n%s", diff)
			}
		})
	}
}
