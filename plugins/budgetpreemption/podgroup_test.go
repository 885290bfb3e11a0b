package budgetpreemption

import (
	"context"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1alpha2 "k8s.io/api/scheduling/v1alpha2"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	clientsetfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/budgetguard/budgetguard/plugins/budget"
)

// gangEnv is env with PodGroups served and the plugin's disruptions
// recorded instead of sent.
type gangEnv struct {
	*env
	rec *events.FakeRecorder
	mu  sync.Mutex
	// disrupted are the victims evicted or deleted, by name.
	disrupted []string
}

func newGangEnv(t *testing.T, args *BudgetAwarePreemptionArgs, nodes []*v1.Node, pods []*v1.Pod, pdbs []*policyv1.PodDisruptionBudget, groups ...*schedulingv1alpha2.PodGroup) *gangEnv {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	var objs []runtime.Object
	for _, p := range pods {
		objs = append(objs, p)
	}
	for _, n := range nodes {
		objs = append(objs, n)
	}
	for _, p := range pdbs {
		objs = append(objs, p)
	}
	for _, g := range groups {
		objs = append(objs, g)
	}
	cs := clientsetfake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(cs, 0)
	snapshot := internalcache.NewSnapshot(pods, nodes)
	fw := newFramework(ctx, t, cs, factory, snapshot)
	bc, err := budget.New(ctx, factory, budget.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if args == nil {
		args = DefaultArgs()
	}
	pl := newPlugin(args, fw, bc, feature.Features{EnableGenericWorkload: true, EnableWorkloadAwarePreemption: true})
	pl.podGroups()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	if !bc.WaitForCacheSync(ctx) {
		t.Fatal("budget cache did not sync")
	}
	g := &gangEnv{env: &env{ctx: ctx, fw: fw, pl: pl, budgets: bc, snapshot: snapshot}, rec: events.NewFakeRecorder(20)}
	pl.fh = &recorderHandle{Handle: fw, rec: g.rec}
	record := func(victim *v1.Pod) error {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.disrupted = append(g.disrupted, victim.Name)
		return nil
	}
	pl.evictPod = func(_ context.Context, _ preemption.Candidate, _ preemption.ExecutorPreemptor, victim *v1.Pod) error {
		return record(victim)
	}
	pl.deletePod = func(_ context.Context, _ preemption.Candidate, _ preemption.ExecutorPreemptor, victim *v1.Pod, _ string) error {
		return record(victim)
	}
	return g
}

// fits is the scheduler's pod group algorithm, reduced to CPU: every pod
// of the group on some node of the snapshot (first fit, largest first).
func (g *gangEnv) fits(pods []*v1.Pod) func(context.Context) *fwk.Status {
	return func(context.Context) *fwk.Status {
		nodes, err := g.snapshot.NodeInfos().List()
		if err != nil {
			return fwk.AsStatus(err)
		}
		free := make([]int64, len(nodes))
		for i, n := range nodes {
			free[i] = n.GetAllocatable().GetMilliCPU() - n.GetRequested().GetMilliCPU()
		}
		reqs := make([]int64, 0, len(pods))
		for _, p := range pods {
			reqs = append(reqs, p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue())
		}
		sort.Slice(reqs, func(i, j int) bool { return reqs[i] > reqs[j] })
		for _, r := range reqs {
			i := slices.IndexFunc(free, func(f int64) bool { return f >= r })
			if i < 0 {
				return fwk.NewStatus(fwk.Unschedulable, "the pod group does not fit")
			}
			free[i] -= r
		}
		return nil
	}
}

// forget removes pods from the snapshot, as the next cycle's snapshot no
// longer has victims that went.
func (g *gangEnv) forget(t *testing.T, names ...string) {
	t.Helper()
	nodes, err := g.snapshot.NodeInfos().List()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		var gone []*v1.Pod
		for _, pi := range n.GetPods() {
			if slices.Contains(names, pi.GetPod().Name) {
				gone = append(gone, pi.GetPod())
			}
		}
		for _, p := range gone {
			if err := n.RemovePod(ktesting.NewLogger(t, ktesting.NewConfig()), p); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func (g *gangEnv) disruptedPods() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := slices.Clone(g.disrupted)
	sort.Strings(out)
	return out
}

// gang is a PodGroup of n pods of cpu each at priority.
func gang(name string, n int, cpu string, priority int32) (*schedulingv1alpha2.PodGroup, []*v1.Pod) {
	pg := st.MakePodGroup().Name(name).Namespace(ns).UID(types.UID("pg-" + name)).Priority(priority).MinCount(int32(n)).Obj()
	var pods []*v1.Pod
	for i := range n {
		name := name + "-" + string(rune('a'+i))
		pods = append(pods, st.MakePod().Namespace(ns).Name(name).UID(name).Priority(priority).PodGroupName(pg.Name).
			Req(map[v1.ResourceName]string{v1.ResourceCPU: cpu}).Obj())
	}
	return pg, pods
}

// highPod is a running pod of cpu that no gang may preempt.
func highPod(name, nodeName, cpu string) *v1.Pod {
	return st.MakePod().Namespace(ns).Name(name).UID(name).Node(nodeName).Priority(1000).
		Req(map[v1.ResourceName]string{v1.ResourceCPU: cpu}).Phase(v1.PodRunning).Condition(v1.PodReady, v1.ConditionTrue, "").Obj()
}

// event returns the first event recorded, or "".
func (g *gangEnv) event() string {
	select {
	case ev := <-g.rec.Events:
		return ev
	default:
		return ""
	}
}

func TestPodGroupPostFilter(t *testing.T) {
	bestEffort := DefaultArgs()
	bestEffort.Mode = ModeBestEffort
	tests := []struct {
		name   string
		args   *BudgetAwarePreemptionArgs
		nodes  []*v1.Node
		pods   []*v1.Pod
		pdbs   []*policyv1.PodDisruptionBudget
		groups []*schedulingv1alpha2.PodGroup
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
			groups:  []*schedulingv1alpha2.PodGroup{st.MakePodGroup().Name("train").Namespace(ns).UID("pg-train").MinCount(2).DisruptionMode(schedulingv1alpha2.DisruptionModePodGroup).Obj()},
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
			groups:  []*schedulingv1alpha2.PodGroup{st.MakePodGroup().Name("train").Namespace(ns).UID("pg-train").MinCount(2).DisruptionMode(schedulingv1alpha2.DisruptionModePodGroup).Obj()},
			members: 1, cpu: "1",
			want: []string{"train-0", "train-1"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pg, members := gang("gang", tc.members, tc.cpu, 100)
			g := newGangEnv(t, tc.args, tc.nodes, tc.pods, tc.pdbs, append(tc.groups, pg)...)
			status := g.pl.PodGroupPostFilter(g.ctx, pg, members, g.fits(members))
			if tc.blockedBy != "" {
				if status.IsSuccess() || !strings.Contains(status.Message(), tc.blockedBy) {
					t.Errorf("status %v; want a refusal naming %s", status, tc.blockedBy)
				}
				if ev := g.event(); !strings.Contains(ev, budget.EventPreemptionBlockedByBudget) || !strings.Contains(ev, tc.blockedBy) {
					t.Errorf("event %q; want %s naming %s", ev, budget.EventPreemptionBlockedByBudget, tc.blockedBy)
				}
			} else if !status.IsSuccess() {
				t.Fatalf("PodGroupPostFilter: %v", status)
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
	if s := g.pl.PodGroupPostFilter(g.ctx, pg1, members1, g.fits(members1)); !s.IsSuccess() {
		t.Fatalf("first gang: %v", s)
	}
	first := g.disruptedPods()
	if len(first) != 2 {
		t.Fatalf("first gang disrupted %v, want 2 victims", first)
	}
	// Its victims are going: the snapshot no longer has them, but the
	// PDB's status has not counted them yet.
	g.forget(t, first...)
	s := g.pl.PodGroupPostFilter(g.ctx, pg2, members2, g.fits(members2))
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
	if s := g.pl.PodGroupPostFilter(g.ctx, pg, members, g.fits(members)); s.IsSuccess() {
		t.Errorf("a gang with preemptionPolicy Never preempted")
	}
	if got := g.disruptedPods(); len(got) != 0 {
		t.Errorf("disrupted %v", got)
	}
}

// A pod of a PodGroup preempts pod by pod only where DefaultPreemption
// would: not with workload-aware preemption (the group preempts as a
// whole), nor with topology-aware scheduling when its group has scheduling
// constraints; with topology-aware scheduling and no constraints, it does.
func TestPostFilterPodOfAPodGroup(t *testing.T) {
	constrained := st.MakePodGroup().Name("placed").Namespace(ns).UID("pg-placed").MinCount(1).TopologyKey("zone").Obj()
	free := st.MakePodGroup().Name("free").Namespace(ns).UID("pg-free").MinCount(1).Obj()
	member := func(group string) *v1.Pod {
		return st.MakePod().Namespace(ns).Name("m-" + group).UID("m-" + group).Priority(100).PodGroupName(group).
			Req(map[v1.ResourceName]string{v1.ResourceCPU: "1"}).Obj()
	}
	tests := []struct {
		name      string
		fts       feature.Features
		group     string
		preempts  bool
		wantInMsg string
	}{
		{name: "workload-aware preemption", fts: feature.Features{EnableGenericWorkload: true, EnableWorkloadAwarePreemption: true}, group: "free", wantInMsg: "workload aware preemption"},
		{name: "topology-aware, constrained group", fts: feature.Features{EnableGenericWorkload: true, EnableTopologyAwareWorkloadScheduling: true}, group: "placed", wantInMsg: "placement-based"},
		{name: "topology-aware, unconstrained group", fts: feature.Features{EnableGenericWorkload: true, EnableTopologyAwareWorkloadScheduling: true}, group: "free", preempts: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := member(tc.group)
			g := newGangEnv(t, nil, []*v1.Node{node("n1")}, append(replicas("batch", "n1", "", true, 0, 0, 0, 0), p), nil, constrained, free)
			g.pl.fts = tc.fts
			state, _ := g.preFilter(t, p)
			m := framework.NewDefaultNodeToStatus()
			m.Set("n1", fwk.NewStatus(fwk.Unschedulable, "Insufficient cpu"))
			_, status := g.pl.PostFilter(g.ctx, state, p, m)
			if tc.preempts {
				if !status.IsSuccess() {
					t.Errorf("PostFilter: %v; want a preemption", status)
				}
				return
			}
			if status.IsSuccess() || !strings.Contains(status.Message(), tc.wantInMsg) {
				t.Errorf("PostFilter: %v; want a refusal saying %q", status, tc.wantInMsg)
			}
		})
	}
}
