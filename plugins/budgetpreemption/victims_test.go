package budgetpreemption

import (
	"flag"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/klog/v2"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/budgetguard/budgetguard/internal/testobj"
)

var victimSeed = flag.Uint64("victim-seed", 20261122, "seed of TestSelectVictimsMatchesOracle")

// Sizes of TestSelectVictimsMatchesOracle.
const (
	oracleCases        = 5000
	oracleNodesPerEnv  = 250
	oracleMaxLower     = 12
	oracleMaxPDBs      = 3
	oracleMaxAllowance = 2
	oraclePreemptorPri = 100
)

// oraclePod is a generated pod as the oracle sees it.
type oraclePod struct {
	name     string
	milliCPU int64
	priority int32
	ready    bool
	pdbs     []int // indices into oracleCase.allowed
}

// oracleCase is one node: pods below and above the preemptor, PDBs with
// their allowances, and the preemptor's request.
type oracleCase struct {
	node      string
	capacity  int64 // milli-CPU
	high      int64 // milli-CPU of pods the preemptor may not preempt
	lower     []oraclePod
	allowed   []int32 // disruptionsAllowed per PDB
	preemptor int64   // milli-CPU
}

func genOracleCase(r *rand.Rand, id int) oracleCase {
	c := oracleCase{node: fmt.Sprintf("n%04d", id)}
	for range r.IntN(oracleMaxPDBs) + 1 {
		c.allowed = append(c.allowed, int32(r.IntN(oracleMaxAllowance+1)))
	}
	for range r.IntN(3) {
		c.high += 100 * int64(1+r.IntN(10))
	}
	var sum int64
	for i := range r.IntN(oracleMaxLower + 1) {
		p := oraclePod{
			name:     fmt.Sprintf("%s-p%02d", c.node, i),
			milliCPU: 100 * int64(1+r.IntN(15)),
			priority: int32(r.IntN(20)),
			ready:    r.IntN(100) < 85,
		}
		switch x := r.IntN(100); {
		case x < 30: // under no budget
		case x < 90 || len(c.allowed) < 2:
			p.pdbs = []int{r.IntN(len(c.allowed))}
		default: // under two PDBs: the Eviction API refuses it
			a := r.IntN(len(c.allowed))
			p.pdbs = []int{a, (a + 1 + r.IntN(len(c.allowed)-1)) % len(c.allowed)}
		}
		sum += p.milliCPU
		c.lower = append(c.lower, p)
	}
	slack := 100 * int64(r.IntN(6))
	c.capacity = c.high + sum + slack
	// More than the free room, and sometimes more than preemption can free.
	c.preemptor = slack + 100*int64(1+r.IntN(int(sum/100)+3))
	return c
}

// objects builds the case's node, pods and PDBs.
func (c oracleCase) objects() (*v1.Node, []*v1.Pod, []*policyv1.PodDisruptionBudget) {
	node := st.MakeNode().Name(c.node).Capacity(map[v1.ResourceName]string{
		v1.ResourceCPU: fmt.Sprintf("%dm", c.capacity), v1.ResourcePods: "110",
	}).Obj()
	var pods []*v1.Pod
	if c.high > 0 {
		pods = append(pods, st.MakePod().Namespace(ns).Name(c.node+"-high").UID(c.node+"-high").Node(c.node).Priority(oraclePreemptorPri*2).
			Req(map[v1.ResourceName]string{v1.ResourceCPU: fmt.Sprintf("%dm", c.high)}).Phase(v1.PodRunning).
			Condition(v1.PodReady, v1.ConditionTrue, "").Obj())
	}
	for _, p := range c.lower {
		status := v1.ConditionTrue
		if !p.ready {
			status = v1.ConditionFalse
		}
		w := st.MakePod().Namespace(ns).Name(p.name).UID(p.name).Node(c.node).Priority(p.priority).
			Req(map[v1.ResourceName]string{v1.ResourceCPU: fmt.Sprintf("%dm", p.milliCPU)}).Phase(v1.PodRunning).
			Condition(v1.PodReady, status, "")
		for _, b := range p.pdbs {
			w = w.Label(fmt.Sprintf("pdb%d", b), c.node)
		}
		pods = append(pods, w.Obj())
	}
	var pdbs []*policyv1.PodDisruptionBudget
	for b, a := range c.allowed {
		// The status counts the Ready pods the PDB covers, as the
		// disruption controller would (the Cache checks it against them).
		var healthy int32
		for _, p := range c.lower {
			if p.ready && slices.Contains(p.pdbs, b) {
				healthy++
			}
		}
		pdbs = append(pdbs, testobj.MakePDB().Namespace(ns).Name(fmt.Sprintf("%s-pdb%d", c.node, b)).Generation(1).
			MatchLabels(fmt.Sprintf("pdb%d", b), c.node).MaxUnavailable(a).Status(healthy, max(healthy-a, 0), a).
			UnhealthyPodEvictionPolicy(policyv1.AlwaysAllow).Obj())
	}
	return node, pods, pdbs
}

// judge says whether the victims (a bit mask over c.lower) free enough room
// and are allowed by every budget together, and how many spend a budget:
// a ready pod under one PDB spends it; a pod under no PDB, or not ready
// (every PDB here is AlwaysAllow), spends nothing; a pod under two PDBs is
// never allowed.
func (c oracleCase) judge(mask uint32) (fits, allowed bool, spending int) {
	used := c.high + c.preemptor
	spent := make([]int32, len(c.allowed))
	allowed = true
	for i, p := range c.lower {
		if mask&(1<<i) == 0 {
			used += p.milliCPU
			continue
		}
		switch {
		case len(p.pdbs) > 1:
			allowed = false
		case len(p.pdbs) == 1 && p.ready:
			spent[p.pdbs[0]]++
			spending++
		}
	}
	for b, n := range spent {
		if n > c.allowed[b] {
			allowed = false
		}
	}
	return used <= c.capacity, allowed, spending
}

// oracle enumerates every set of victims: whether an allowed set that frees
// enough room exists, and the fewest spending victims of one.
func (c oracleCase) oracle() (exists bool, minSpending int) {
	minSpending = len(c.lower) + 1
	for mask := range uint32(1) << len(c.lower) {
		if fits, allowed, spending := c.judge(mask); fits && allowed {
			exists = true
			minSpending = min(minSpending, spending)
		}
	}
	return exists, minSpending
}

// TestSelectVictimsMatchesOracle compares Strict SelectVictimsOnNode with a
// brute-force oracle on random CPU-only nodes: whether an allowed set of
// victims exists (always the same answer), whether the returned set is
// allowed and frees enough room (always), and whether it has the fewest
// spending victims (at least 99% of cases).
func TestSelectVictimsMatchesOracle(t *testing.T) {
	seed := *victimSeed
	t.Logf("seed %d (change it with -victim-seed)", seed)
	r := rand.New(rand.NewPCG(seed, seed))

	var existAgree, valid, optimal, found, withSpending int
	for start := 0; start < oracleCases; start += oracleNodesPerEnv {
		var cases []oracleCase
		var nodes []*v1.Node
		var pods []*v1.Pod
		var pdbs []*policyv1.PodDisruptionBudget
		for id := start; id < min(start+oracleNodesPerEnv, oracleCases); id++ {
			c := genOracleCase(r, id)
			n, ps, bs := c.objects()
			cases = append(cases, c)
			nodes = append(nodes, n)
			pods = append(pods, ps...)
			pdbs = append(pdbs, bs...)
		}
		e := newEnv(t, nil, nodes, pods, pdbs)
		e.ctx = klog.NewContext(e.ctx, logr.Discard())
		for _, c := range cases {
			preemptor := st.MakePod().Namespace(ns).Name(c.node + "-preemptor").UID(c.node + "-preemptor").Priority(oraclePreemptorPri).
				Req(map[v1.ResourceName]string{v1.ResourceCPU: fmt.Sprintf("%dm", c.preemptor)}).Obj()
			state, _ := e.preFilter(t, preemptor)
			ni, err := e.snapshot.NodeInfos().Get(c.node)
			if err != nil {
				t.Fatal(err)
			}
			victims, count, status := e.pl.SelectVictimsOnNode(e.ctx, state.Clone(), preemptor, ni.Snapshot(), e.units(t, ni), nil)

			exists, minSpending := c.oracle()
			if exists == status.IsSuccess() {
				existAgree++
			} else {
				t.Errorf("%s: oracle says a set exists: %v (fewest spending victims %d); SelectVictimsOnNode: %v, %v\n%+v",
					c.node, exists, minSpending, status, podNames(victims), c)
			}
			if !status.IsSuccess() {
				continue
			}
			found++
			var mask uint32
			index := map[string]int{}
			for i, p := range c.lower {
				index[p.name] = i
			}
			for _, v := range victims {
				i, ok := index[v.Name]
				if !ok {
					t.Fatalf("%s: victim %s is not a lower-priority pod of the node", c.node, v.Name)
				}
				mask |= 1 << i
			}
			fits, allowed, spending := c.judge(mask)
			if fits && allowed && bits.OnesCount32(mask) == len(victims) {
				valid++
			} else {
				t.Errorf("%s: victims %v: fit %v, allowed by the budgets %v\n%+v", c.node, podNames(victims), fits, allowed, c)
			}
			if count != spending {
				t.Errorf("%s: count %d, want %d spending victims", c.node, count, spending)
			}
			if spending > 0 || minSpending > 0 {
				withSpending++
			}
			if exists && spending <= minSpending {
				optimal++
			} else {
				t.Logf("%s: %d spending victims %v, the oracle needs %d", c.node, spending, podNames(victims), minSpending)
			}
		}
	}
	pct := func(n, of int) float64 { return 100 * float64(n) / float64(max(of, 1)) }
	t.Logf("%d cases: existence agrees in %d (%.2f%%); %d sets returned (%d need a spending victim): %d allowed and fitting (%.2f%%), %d with the fewest spending victims (%.2f%%)",
		oracleCases, existAgree, pct(existAgree, oracleCases), found, withSpending, valid, pct(valid, found), optimal, pct(optimal, found))
	if pct(optimal, found) < 99 {
		t.Errorf("the fewest spending victims in %.2f%% of the sets returned, want at least 99%%", pct(optimal, found))
	}
}

func podNames(pods []*v1.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

// TestVictimSearchBound checks what the Strict search does when it reaches
// maxSearchEvaluations: it keeps the best set found so far (the greedy
// reprieve is found first), or, with none found, the node is not a
// candidate, as before the search existed.
func TestVictimSearchBound(t *testing.T) {
	// The example of TestSelectVictims: the greedy reprieve (b-0 kept) is
	// denied, and a-0 with b-0 is found on the fifth evaluation.
	abPods := func() []*v1.Pod {
		return slices.Concat(replicas("a", "n1", "a", true, 0, 1), replicas("b", "n1", "b", true, 10),
			[]*v1.Pod{pod("system", "n1", "", 200, true).Obj()})
	}
	abPDBs := []*policyv1.PodDisruptionBudget{appPDB("a", 2, 1, 1).Obj(), appPDB("b", 1, 0, 1).Obj()}
	// A 4-CPU pod of web is more important than four 1-CPU pods of web:
	// the greedy reprieve keeps it and takes two small pods; one victim,
	// the big pod, is better.
	bigPods := func() []*v1.Pod {
		return slices.Concat([]*v1.Pod{
			st.MakePod().Namespace(ns).Name("big").UID("big").Node("n1").Priority(50).Label("app", "web").
				Req(map[v1.ResourceName]string{v1.ResourceCPU: "2"}).Phase(v1.PodRunning).Condition(v1.PodReady, v1.ConditionTrue, "").Obj(),
		}, replicas("web", "n1", "web", true, 0, 0))
	}
	bigPDB := []*policyv1.PodDisruptionBudget{appPDB("web", 3, 1, 2).Obj()}

	tests := []struct {
		name  string
		limit int
		pods  []*v1.Pod
		pdbs  []*policyv1.PodDisruptionBudget
		want  map[string][]string
	}{
		{name: "a set beyond the bound is not found", limit: 2, pods: abPods(), pdbs: abPDBs, want: map[string][]string{}},
		{name: "a set within the bound is found", limit: 5, pods: abPods(), pdbs: abPDBs, want: map[string][]string{"n1": {"a-0", "b-0"}}},
		{name: "the bound keeps the greedy set", limit: 3, pods: bigPods(), pdbs: bigPDB, want: map[string][]string{"n1": {"web-0", "web-1"}}},
		{name: "past the greedy set, fewer spending victims", limit: 2000, pods: bigPods(), pdbs: bigPDB, want: map[string][]string{"n1": {"big"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer func(old int) { maxSearchEvaluations = old }(maxSearchEvaluations)
			maxSearchEvaluations = tc.limit
			e := newEnv(t, nil, []*v1.Node{node("n1")}, tc.pods, tc.pdbs)
			got, _ := e.preempt(t, preemptor("2", 100))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("victims per candidate node (-want,+got):\n%s", diff)
			}
		})
	}
}
