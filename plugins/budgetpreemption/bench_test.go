package budgetpreemption

import (
	"fmt"
	"testing"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultpreemption"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
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

// benchmarkVictimSelection times what PostFilter does before actuation:
// the dry run on every node and the choice of a candidate.
func benchmarkVictimSelection(b *testing.B, upstream bool) {
	nodes, pods, pdbs := benchSnapshot()
	e := newEnv(b, nil, nodes, pods, pdbs)
	// Upstream logs every victim at V(5); the test logger would print it.
	e.ctx = klog.NewContext(e.ctx, logr.Discard())
	ev := e.pl.Evaluator
	if upstream {
		dp, err := defaultpreemption.New(e.ctx, &schedconfig.DefaultPreemptionArgs{
			MinCandidateNodesPercentage: DefaultMinCandidateNodesPercentage,
			MinCandidateNodesAbsolute:   DefaultMinCandidateNodesAbsolute,
		}, e.fw, feature.Features{})
		if err != nil {
			b.Fatal(err)
		}
		ev = dp.Evaluator
	}
	preemptor := preemptor("2", 100)
	state, nodeInfos := e.preFilter(b, preemptor)
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
	b.Run("BudgetAwarePreemption", func(b *testing.B) { benchmarkVictimSelection(b, false) })
	b.Run("DefaultPreemption", func(b *testing.B) { benchmarkVictimSelection(b, true) })
}
