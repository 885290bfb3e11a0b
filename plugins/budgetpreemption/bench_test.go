package budgetpreemption

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultpreemption"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

// Benchmark size: nodes × pods per node × PDBs.
const (
	benchNodes       = 100
	benchPodsPerNode = 16
	benchPDBs        = 50
)

// benchSnapshot is a full cluster: every node's CPU is taken by 1-CPU pods
// spread over benchPDBs applications, each under a PDB that allows 2.
func benchSnapshot() ([]*v1.Node, []*v1.Pod, []*policyv1.PodDisruptionBudget) {
	var nodes []*v1.Node
	var pods []*v1.Pod
	for n := range benchNodes {
		name := fmt.Sprintf("node-%03d", n)
		nodes = append(nodes, st.MakeNode().Name(name).Capacity(map[v1.ResourceName]string{
			v1.ResourceCPU: fmt.Sprint(benchPodsPerNode), v1.ResourcePods: "110",
		}).Obj())
		for j := range benchPodsPerNode {
			i := n*benchPodsPerNode + j
			pods = append(pods, pod(fmt.Sprintf("p-%05d", i), name, fmt.Sprintf("app-%02d", i%benchPDBs), int32(j%3), true).Obj())
		}
	}
	var pdbs []*policyv1.PodDisruptionBudget
	per := int32(benchNodes * benchPodsPerNode / benchPDBs)
	for a := range benchPDBs {
		pdbs = append(pdbs, appPDB(fmt.Sprintf("app-%02d", a), per, per-2, 2).Obj())
	}
	return nodes, pods, pdbs
}

// upstreamPreemption is upstream's DefaultPreemption on e's framework, with
// the candidate-node arithmetic budgetguard's defaults use.
func upstreamPreemption(b testing.TB, e *env) *defaultpreemption.DefaultPreemption {
	dp, err := defaultpreemption.New(e.ctx, &schedconfig.DefaultPreemptionArgs{
		MinCandidateNodesPercentage: DefaultMinCandidateNodesPercentage,
		MinCandidateNodesAbsolute:   DefaultMinCandidateNodesAbsolute,
	}, e.fw, feature.Features{})
	if err != nil {
		b.Fatal(err)
	}
	return dp
}

// quietEnv is newEnv with a logger that discards: upstream logs every
// victim at V(5), and the test logger would print it.
func quietEnv(b *testing.B, nodes []*v1.Node, pods []*v1.Pod, pdbs []*policyv1.PodDisruptionBudget) *env {
	e := newEnv(b, nil, nodes, pods, pdbs)
	e.ctx = klog.NewContext(e.ctx, logr.Discard())
	return e
}

// benchmarkVictimSelection times what PostFilter does before actuation:
// the dry run on every node and the choice of a candidate.
func benchmarkVictimSelection(b *testing.B, upstream bool, nodes []*v1.Node, pods []*v1.Pod, pdbs []*policyv1.PodDisruptionBudget, preemptor *v1.Pod) {
	e := quietEnv(b, nodes, pods, pdbs)
	ev := e.pl.Evaluator
	if upstream {
		ev = upstreamPreemption(b, e).Evaluator
	}
	state, nodeInfos := e.preFilter(b, preemptor)
	// PostFilter gives the dry runs its recorders.
	state.Write(blockKey, &blockRecorder{})
	state.Write(expendableKey, &expendableRecorder{})
	lister := e.fw.SharedInformerFactory().Policy().V1().PodDisruptionBudgets().Lister()
	n := int32(len(nodeInfos))
	b.ResetTimer()
	for b.Loop() {
		// Upstream lists every PDB on each attempt; so does this loop.
		all, err := lister.List(labels.Everything())
		if err != nil {
			b.Fatal(err)
		}
		candidates, _, err := ev.DryRunPreemption(e.ctx, state, preemptor, nodeInfos, all, 0, n)
		if err != nil || len(candidates) == 0 {
			b.Fatalf("no candidates: %v", err)
		}
		if c := ev.SelectCandidate(e.ctx, candidates); c == nil {
			b.Fatal("no candidate chosen")
		}
	}
}

// BenchmarkVictimSelection compares BudgetAwarePreemption with upstream
// DefaultPreemption on the same snapshot (benchNodes × benchPodsPerNode ×
// benchPDBs).
func BenchmarkVictimSelection(b *testing.B) {
	b.Run("BudgetAwarePreemption", func(b *testing.B) {
		nodes, pods, pdbs := benchSnapshot()
		benchmarkVictimSelection(b, false, nodes, pods, pdbs, preemptor("2", 100))
	})
	b.Run("DefaultPreemption", func(b *testing.B) {
		nodes, pods, pdbs := benchSnapshot()
		benchmarkVictimSelection(b, true, nodes, pods, pdbs, preemptor("2", 100))
	})
}

// unbudgetedNodes is upstream's PreemptionBasic shape with no budget: nodes
// full of low-priority 900m pods, perNode on each, with 400m to spare (4
// pods on a 4-CPU node, as upstream's). Every 3-CPU preemptor needs 3
// victims on any node whatever perNode is, so a larger perNode adds pods to
// look at and reprieve, not victims. With running false the pods are as
// scheduler_perf leaves them, with no kubelet: Pending, never started; with
// running true they are Running, Ready and started a second apart.
func unbudgetedNodes(nodes, perNode int, running bool) ([]*v1.Node, []*v1.Pod) {
	var ns []*v1.Node
	var ps []*v1.Pod
	for n := range nodes {
		name := fmt.Sprintf("node-%03d", n)
		ns = append(ns, st.MakeNode().Name(name).Capacity(map[v1.ResourceName]string{
			v1.ResourceCPU: fmt.Sprintf("%dm", perNode*900+400), v1.ResourcePods: "110",
		}).Obj())
		for j := range perNode {
			ps = append(ps, unbudgetedPod(fmt.Sprintf("low-%03d-%02d", n, j), name, j, running))
		}
	}
	return ns, ps
}

// unbudgetedPod is upstream's pod-low-priority (900m, priority 0) on
// nodeName, the j-th there; see unbudgetedNodes for running.
func unbudgetedPod(name, nodeName string, j int, running bool) *v1.Pod {
	w := st.MakePod().Namespace(ns).Name(name).UID(name).Node(nodeName).Label("app", fmt.Sprintf("app-%d", j%4)).
		Req(map[v1.ResourceName]string{v1.ResourceCPU: "900m"})
	if !running {
		return w.Phase(v1.PodPending).Obj()
	}
	started := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, j, 0, time.UTC))
	return w.Phase(v1.PodRunning).Condition(v1.PodReady, v1.ConditionTrue, "").StartTime(started).Obj()
}

// highPriorityPreemptor is upstream's pod-high-priority: 3 CPU, priority 10.
func highPriorityPreemptor() *v1.Pod { return preemptor("3", 10) }

// benchPlugins are the two plugins a benchmark compares, as the values of
// its plugin= sub-benchmarks, so that benchstat -col /plugin puts them side
// by side.
var benchPlugins = []string{"DefaultPreemption", Name}

// BenchmarkSelectVictimsNoBudget times SelectVictimsOnNode, budgetguard's
// and upstream's, on one node whose pods no budget covers, in a cluster
// with no budget, as on upstream's scheduler_perf workloads. Each iteration
// works on a fresh copy of the node and of the cycle state, as the
// Evaluator's dry run does; both plugins pay for the copies.
func BenchmarkSelectVictimsNoBudget(b *testing.B) {
	for _, victims := range []string{"pending", "running"} {
		for _, perNode := range []int{4, 32} {
			for _, plugin := range benchPlugins {
				b.Run(fmt.Sprintf("victims=%s/pods=%d/plugin=%s", victims, perNode, plugin), func(b *testing.B) {
					nodes, pods := unbudgetedNodes(1, perNode, victims == "running")
					e := quietEnv(b, nodes, pods, nil)
					var sel preemption.Interface = e.pl
					if plugin != Name {
						sel = upstreamPreemption(b, e)
					}
					p := highPriorityPreemptor()
					state, nodeInfos := e.preFilter(b, p)
					state.Write(blockKey, &blockRecorder{})
					state.Write(expendableKey, &expendableRecorder{})
					units := e.units(b, nodeInfos[0])
					b.ResetTimer()
					for b.Loop() {
						victims, _, s := sel.SelectVictimsOnNode(e.ctx, state.Clone(), p, nodeInfos[0].Snapshot(), units, nil)
						if !s.IsSuccess() || len(victims) != 3 {
							b.Fatalf("want 3 victims, got %d: %v", len(victims), s)
						}
					}
				})
			}
		}
	}
}

// BenchmarkVictimSelectionNoBudget is BenchmarkVictimSelection on upstream's
// PreemptionBasic at 500 nodes, pods as scheduler_perf leaves them (4
// Pending pods of 900m on each 4-CPU node) and no budget: the dry run on
// the candidate nodes and the choice among them.
func BenchmarkVictimSelectionNoBudget(b *testing.B) {
	for _, plugin := range benchPlugins {
		b.Run("nodes=500/plugin="+plugin, func(b *testing.B) {
			nodes, pods := unbudgetedNodes(500, 4, false)
			benchmarkVictimSelection(b, plugin != Name, nodes, pods, nil, highPriorityPreemptor())
		})
	}
}

// BenchmarkPostFilterShortPath times PostFilter, budgetguard's and
// upstream's, where it ends before any dry run, as most of upstream's
// PreemptionAsync calls do: the preemptor is not eligible (its nominated
// node still holds a victim of its earlier preemption, terminating), or no
// node is one that preemption could help. 100 nodes as upstream's
// PreemptionBasic leaves them, no budget. It measures what PostFilter adds
// around the Evaluator on that path.
func BenchmarkPostFilterShortPath(b *testing.B) {
	for _, path := range []string{"not-eligible", "not-helpful"} {
		for _, plugin := range benchPlugins {
			b.Run(fmt.Sprintf("path=%s/plugin=%s", path, plugin), func(b *testing.B) {
				nodes, pods := unbudgetedNodes(100, 4, false)
				victim := pods[0].DeepCopy()
				victim.DeletionTimestamp = &metav1.Time{Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
				victim.Status.Conditions = append(victim.Status.Conditions, v1.PodCondition{
					Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: v1.PodReasonPreemptionByScheduler,
				})
				pods[0] = victim
				p := highPriorityPreemptor()
				m := framework.NewDefaultNodeToStatus() // absent nodes: UnschedulableAndUnresolvable
				want := "Preemption is not helpful"
				if path == "not-eligible" {
					p.Status.NominatedNodeName = victim.Spec.NodeName
					m.Set(victim.Spec.NodeName, fwk.NewStatus(fwk.Unschedulable, "Insufficient cpu"))
					want = "not eligible due to a terminating pod on the nominated node"
				}
				e := buildEnv(b, envSpec{nodes: nodes, pods: pods, served: append(slices.Clone(pods), p)})
				e.ctx = klog.NewContext(e.ctx, logr.Discard())
				var pf fwk.PostFilterPlugin = e.pl
				if plugin != Name {
					pf = upstreamPreemption(b, e)
					// Its pod lister's informer was made after the factory
					// started.
					e.factory.Start(e.ctx.Done())
					e.factory.WaitForCacheSync(e.ctx.Done())
				}
				if _, s := pf.PostFilter(e.ctx, framework.NewCycleState(), p, m); s.Code() != fwk.Unschedulable || !strings.Contains(s.Message(), want) {
					b.Fatalf("want Unschedulable with %q, got %v", want, s)
				}
				b.ResetTimer()
				for b.Loop() {
					pf.PostFilter(e.ctx, framework.NewCycleState(), p, m)
				}
			})
		}
	}
}
