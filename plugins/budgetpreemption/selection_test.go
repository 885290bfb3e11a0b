package budgetpreemption

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	clientsetfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	internalqueue "k8s.io/kubernetes/pkg/scheduler/backend/queue"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"
	"k8s.io/utils/ptr"

	"github.com/budgetguard/budgetguard/internal/testobj"
	"github.com/budgetguard/budgetguard/plugins/budget"
)

const ns = "shop"

// env is a scheduler framework with NodeResourcesFit, a fake clientset and
// the plugin on a budget cache fed by the framework's informers.
type env struct {
	ctx      context.Context
	fw       framework.Framework
	pl       *BudgetAwarePreemption
	budgets  *budget.Cache
	snapshot *internalcache.Snapshot
	factory  informers.SharedInformerFactory
}

func newEnv(t testing.TB, args *BudgetAwarePreemptionArgs, nodes []*v1.Node, pods []*v1.Pod, pdbs []*policyv1.PodDisruptionBudget) *env {
	t.Helper()
	return buildEnv(t, envSpec{args: args, nodes: nodes, pods: pods, pdbs: pdbs})
}

// envSpec is what buildEnv builds the plugin on: the pod tests' newEnv and
// the gang tests' newGangEnv alike.
type envSpec struct {
	args  *BudgetAwarePreemptionArgs
	nodes []*v1.Node
	// pods are the snapshot's pods; served, when set, the API server's
	// (from which victims are re-read at reservation) in their place.
	pods, served []*v1.Pod
	pdbs         []*policyv1.PodDisruptionBudget
	// groups are PodGroups, in the API server and the snapshot; with
	// gangs the plugin runs with the GenericWorkload gate (the caller
	// sets the process's gate).
	groups []*schedulingv1beta1.PodGroup
	gangs  bool
}

func buildEnv(t testing.TB, s envSpec) *env {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)

	served := s.served
	if served == nil {
		served = s.pods
	}
	var objs []runtime.Object
	for _, p := range served {
		objs = append(objs, p)
	}
	for _, n := range s.nodes {
		objs = append(objs, n)
	}
	for _, p := range s.pdbs {
		objs = append(objs, p)
	}
	for _, g := range s.groups {
		objs = append(objs, g)
	}
	cs := clientsetfake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(cs, 0)
	snapshot := internalcache.NewSnapshot(s.pods, s.nodes)
	var fts feature.Features
	if s.gangs {
		snapshot = internalcache.NewTestSnapshotWithPodGroups(s.pods, s.nodes, s.groups)
		fts.EnableGenericWorkload = true
	}
	fw := newFramework(ctx, t, cs, factory, snapshot)
	bc, err := budget.New(ctx, factory, budget.Options{})
	if err != nil {
		t.Fatal(err)
	}
	args := s.args
	if args == nil {
		args = DefaultArgs()
	}
	pl := newPlugin(args, fw, bc, fts)
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	if !bc.WaitForCacheSync(ctx) {
		t.Fatal("budget cache did not sync")
	}
	return &env{ctx: ctx, fw: fw, pl: pl, budgets: bc, snapshot: snapshot, factory: factory}
}

// units returns the potential victims on ni as the Evaluator hands them to
// SelectVictimsOnNode.
func (e *env) units(t testing.TB, ni fwk.NodeInfo) []*preemption.DomainVictim {
	t.Helper()
	vs, err := e.pl.Evaluator.GetVictimsOnNode(e.ctx, ni)
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

// newFramework builds a scheduler framework with NodeResourcesFit on cs and
// factory, as a profile of kube-scheduler is; opts add to its options.
func newFramework(ctx context.Context, t testing.TB, cs *clientsetfake.Clientset, factory informers.SharedInformerFactory, snapshot *internalcache.Snapshot, opts ...frameworkruntime.Option) framework.Framework {
	t.Helper()
	fw, err := tf.NewFramework(ctx, []tf.RegisterPluginFunc{
		tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
		tf.RegisterPluginAsExtensions(noderesources.Name, frameworkruntime.FactoryAdapter(feature.Features{}, noderesources.NewFit), "Filter", "PreFilter"),
		tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
	}, "", append([]frameworkruntime.Option{
		frameworkruntime.WithClientSet(cs),
		frameworkruntime.WithEventRecorder(&events.FakeRecorder{}),
		frameworkruntime.WithInformerFactory(factory),
		frameworkruntime.WithPodNominator(internalqueue.NewSchedulingQueue(nil, factory)),
		frameworkruntime.WithSnapshotSharedLister(snapshot),
		frameworkruntime.WithMutableSnapshotLister(snapshot),
		frameworkruntime.WithLogger(klog.FromContext(ctx)),
		frameworkruntime.WithWaitingPods(frameworkruntime.NewWaitingPodsMap()),
		frameworkruntime.WithPodsInPreBind(frameworkruntime.NewPodsInPreBindMap()),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return fw
}

// preFilter runs the PreFilter plugins for preemptor, and returns the cycle
// state and the snapshot's nodes.
func (e *env) preFilter(t testing.TB, preemptor *v1.Pod) (*framework.CycleState, []fwk.NodeInfo) {
	t.Helper()
	state := framework.NewCycleState()
	if _, s, _ := e.fw.RunPreFilterPlugins(e.ctx, state, preemptor); !s.IsSuccess() {
		t.Fatalf("PreFilter: %v", s)
	}
	nodeInfos, err := e.snapshot.NodeInfos().List()
	if err != nil {
		t.Fatal(err)
	}
	return state, nodeInfos
}

// preempt runs the dry run on every node and the Evaluator's choice. It
// returns the victims per candidate node (sorted names) and the chosen node.
func (e *env) preempt(t *testing.T, preemptor *v1.Pod) (map[string][]string, string) {
	t.Helper()
	state, nodeInfos := e.preFilter(t, preemptor)
	candidates, _, _ := e.pl.Evaluator.DryRunPreemption(e.ctx, state, preemptor, nodeInfos, nil, 0, int32(len(nodeInfos)))
	got := victimsByNode(candidates)
	best := ""
	if c := e.pl.Evaluator.SelectCandidate(e.ctx, candidates); c != nil {
		best = c.Name()
	}
	return got, best
}

// victimsByNode returns the victims of each candidate by node, as sorted
// names.
func victimsByNode(candidates []preemption.Candidate) map[string][]string {
	got := map[string][]string{}
	for _, c := range candidates {
		var names []string
		for _, p := range c.Victims().Pods {
			names = append(names, p.Name)
		}
		sort.Strings(names)
		got[c.Name()] = names
	}
	return got
}

func node(name string) *v1.Node {
	return st.MakeNode().Name(name).Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "4", v1.ResourcePods: "110"}).Obj()
}

// pod is a running 1-CPU pod on nodeName, Ready unless ready is false.
func pod(name, nodeName, app string, priority int32, ready bool) *st.PodWrapper {
	status := v1.ConditionTrue
	if !ready {
		status = v1.ConditionFalse
	}
	w := st.MakePod().Namespace(ns).Name(name).UID(name).Node(nodeName).Priority(priority).
		Req(map[v1.ResourceName]string{v1.ResourceCPU: "1"}).Phase(v1.PodRunning).
		Condition(v1.PodReady, status, "")
	if app != "" {
		w = w.Label("app", app)
	}
	return w
}

func preemptor(cpu string, priority int32) *v1.Pod {
	return st.MakePod().Namespace(ns).Name("preemptor").UID("preemptor").Priority(priority).
		Req(map[v1.ResourceName]string{v1.ResourceCPU: cpu}).Obj()
}

// replicas are running 1-CPU pods <prefix>-0, <prefix>-1, ... of app on
// nodeName, one a priority, Ready unless ready is false.
func replicas(prefix, nodeName, app string, ready bool, priorities ...int32) []*v1.Pod {
	var out []*v1.Pod
	for i, p := range priorities {
		out = append(out, pod(fmt.Sprintf("%s-%d", prefix, i), nodeName, app, p, ready).Obj())
	}
	return out
}

// appPDB is a PDB on app with maxUnavailable healthy-desired and an
// up-to-date status.
func appPDB(app string, healthy, desired, allowed int32) *testobj.PDBWrapper {
	return testobj.MakePDB().Namespace(ns).Name(app).Generation(1).MatchLabels("app", app).MaxUnavailable(healthy-desired).Status(healthy, desired, allowed)
}

func TestSelectVictims(t *testing.T) {
	strict := DefaultArgs()
	bestEffort := DefaultArgs()
	bestEffort.Mode = ModeBestEffort
	ignoreSafeToEvict := DefaultArgs()
	ignoreSafeToEvict.HonorSafeToEvictAnnotation = false
	override := DefaultArgs()
	override.OverrideBudgetsAtPriority = ptr.To[int32](1000)

	// The anchor scenario (docs/design.md, The anchor scenario): 4 Ready pods
	// under maxUnavailable 1 fill a 4-CPU node; the preemptor needs 2 CPU.
	anchorPods := func() []*v1.Pod { return replicas("web", "n1", "web", true, 3, 2, 1, 0) }
	anchorPDB := []*policyv1.PodDisruptionBudget{appPDB("web", 4, 3, 1).Obj()}
	// Two Ready and two not-ready pods of web.
	unhealthyPods := func() []*v1.Pod {
		return slices.Concat(replicas("web", "n1", "web", true, 0, 0), []*v1.Pod{
			pod("web-2", "n1", "web", 50, false).Obj(), pod("web-3", "n1", "web", 50, false).Obj(),
		})
	}
	// Two pods annotated safe-to-evict "false" below two batch pods.
	keepPods := func() []*v1.Pod {
		return slices.Concat([]*v1.Pod{
			pod("keep-0", "n1", "", 0, true).Annotation(budget.AnnotationSafeToEvict, "false").Obj(),
			pod("keep-1", "n1", "", 0, true).Annotation(budget.AnnotationSafeToEvict, "false").Obj(),
		}, replicas("batch", "n1", "", true, 50, 50))
	}
	n1 := func() []*v1.Node { return []*v1.Node{node("n1")} }

	tests := []struct {
		name      string
		args      *BudgetAwarePreemptionArgs
		nodes     []*v1.Node
		pods      []*v1.Pod
		pdbs      []*policyv1.PodDisruptionBudget
		preemptor *v1.Pod
		// reserve is reserved in the ledger before the dry run.
		reserve  []*v1.Pod
		want     map[string][]string
		wantBest string
	}{
		{
			name: "strict: a node that needs two victims of a budget of one is not a candidate",
			args: strict, nodes: n1(), pods: anchorPods(), pdbs: anchorPDB,
			preemptor: preemptor("2", 100),
			want:      map[string][]string{},
		},
		{
			// Reprieving the most important pod first (b-0) leaves a-0 and
			// a-1, which budget a cannot both spare; a-0 with b-0 spends
			// each budget once, as upstream's filterPodsWithPDBViolation
			// would accept.
			name: "strict: victims are chosen that every budget allows together",
			args: strict, nodes: n1(),
			pods: slices.Concat(replicas("a", "n1", "a", true, 0, 1), replicas("b", "n1", "b", true, 10),
				[]*v1.Pod{pod("system", "n1", "", 200, true).Obj()}),
			pdbs:      []*policyv1.PodDisruptionBudget{appPDB("a", 2, 1, 1).Obj(), appPDB("b", 1, 0, 1).Obj()},
			preemptor: preemptor("2", 100),
			want:      map[string][]string{"n1": {"a-0", "b-0"}}, wantBest: "n1",
		},
		{
			name: "strict: one victim within the budget is chosen",
			args: strict, nodes: n1(), pods: anchorPods(), pdbs: anchorPDB,
			preemptor: preemptor("1", 100),
			want:      map[string][]string{"n1": {"web-3"}}, wantBest: "n1",
		},
		{
			name: "strict: a disruption in flight in the ledger spends the budget",
			args: strict, nodes: n1(), pods: anchorPods(), pdbs: anchorPDB,
			preemptor: preemptor("1", 100),
			// A pod of the same application on another node, whose
			// disruption is in flight.
			reserve: []*v1.Pod{pod("web-9", "elsewhere", "web", 0, true).Obj()},
			want:    map[string][]string{},
		},
		{
			name: "best effort: the node is a candidate and the overspend is counted",
			args: bestEffort, nodes: n1(), pods: anchorPods(), pdbs: anchorPDB,
			preemptor: preemptor("2", 100),
			want:      map[string][]string{"n1": {"web-2", "web-3"}}, wantBest: "n1",
		},
		{
			// Upstream's TestPDBInPreemption, "A node with fewer PDB
			// violating pods is preferred": the budget allows every
			// victim on either node, so upstream counts no violation
			// anywhere and takes the node whose most important victim
			// is least important (n3), though it has more victims that
			// spend the budget. BestEffort keeps that order.
			name: "best effort: upstream's order among nodes within the budget",
			args: bestEffort, nodes: []*v1.Node{node("n2"), node("n3")},
			pods:      slices.Concat(replicas("two", "n2", "web", true, 0, 50), replicas("three", "n3", "web", true, 0, 0, 0)),
			pdbs:      []*policyv1.PodDisruptionBudget{appPDB("web", 5, 2, 3).Obj()},
			preemptor: preemptor("4", 100),
			want:      map[string][]string{"n2": {"two-0", "two-1"}, "n3": {"three-0", "three-1", "three-2"}}, wantBest: "n3",
		},
		{
			// Strict prefers fewer victims that spend a budget (docs/design.md,
			// Candidate selection), before upstream's order.
			name: "strict: fewer budget-spending victims first",
			args: strict, nodes: []*v1.Node{node("n2"), node("n3")},
			pods:      slices.Concat(replicas("two", "n2", "web", true, 0, 50), replicas("three", "n3", "web", true, 0, 0, 0)),
			pdbs:      []*policyv1.PodDisruptionBudget{appPDB("web", 5, 2, 3).Obj()},
			preemptor: preemptor("4", 100),
			want:      map[string][]string{"n2": {"two-0", "two-1"}, "n3": {"three-0", "three-1", "three-2"}}, wantBest: "n2",
		},
		{
			name: "override: a preemptor at the threshold may break the budget",
			args: override, nodes: n1(), pods: anchorPods(), pdbs: anchorPDB,
			preemptor: preemptor("2", 1000),
			want:      map[string][]string{"n1": {"web-2", "web-3"}}, wantBest: "n1",
		},
		{
			name: "override: a preemptor below the threshold may not",
			args: override, nodes: n1(), pods: anchorPods(), pdbs: anchorPDB,
			preemptor: preemptor("2", 999),
			want:      map[string][]string{},
		},
		{
			name: "strict: a denied pod is never a victim, even of the lowest priority",
			args: strict, nodes: n1(),
			pods:      slices.Concat(replicas("db", "n1", "db", true, 0, 0), replicas("batch", "n1", "", true, 50, 50)),
			pdbs:      []*policyv1.PodDisruptionBudget{appPDB("db", 2, 2, 0).Obj()},
			preemptor: preemptor("2", 100),
			want:      map[string][]string{"n1": {"batch-0", "batch-1"}}, wantBest: "n1",
		},
		{
			name: "victims that spend no budget are preferred to lower-priority ones that spend some",
			args: strict, nodes: n1(),
			pods:      slices.Concat(replicas("web", "n1", "web", true, 0, 0), replicas("batch", "n1", "", true, 50, 50)),
			pdbs:      []*policyv1.PodDisruptionBudget{appPDB("web", 2, 0, 2).Obj()},
			preemptor: preemptor("2", 100),
			want:      map[string][]string{"n1": {"batch-0", "batch-1"}}, wantBest: "n1",
		},
		{
			name: "unhealthy pods under AlwaysAllow spend nothing and are preferred",
			args: strict, nodes: n1(), pods: unhealthyPods(),
			pdbs:      []*policyv1.PodDisruptionBudget{appPDB("web", 2, 2, 0).UnhealthyPodEvictionPolicy(policyv1.AlwaysAllow).Obj()},
			preemptor: preemptor("2", 100),
			want:      map[string][]string{"n1": {"web-2", "web-3"}}, wantBest: "n1",
		},
		{
			name: "unhealthy pods under IfHealthyBudget with no healthy margin are protected",
			args: strict, nodes: n1(), pods: unhealthyPods(),
			pdbs:      []*policyv1.PodDisruptionBudget{appPDB("web", 2, 3, 0).UnhealthyPodEvictionPolicy(policyv1.IfHealthyBudget).Obj()},
			preemptor: preemptor("2", 100),
			want:      map[string][]string{},
		},
		{
			name:      "a node whose victims spend no budget is chosen over one whose victims spend some",
			args:      strict,
			nodes:     []*v1.Node{node("n1"), node("n2")},
			pods:      slices.Concat(anchorPods(), replicas("batch", "n2", "", true, 13, 12, 11, 10)),
			pdbs:      []*policyv1.PodDisruptionBudget{appPDB("web", 4, 0, 4).Obj()},
			preemptor: preemptor("1", 100),
			want:      map[string][]string{"n1": {"web-3"}, "n2": {"batch-3"}}, wantBest: "n2",
		},
		{
			name: "safe-to-evict false is never a victim",
			args: strict, nodes: n1(), pods: keepPods(),
			preemptor: preemptor("2", 100),
			want:      map[string][]string{"n1": {"batch-0", "batch-1"}}, wantBest: "n1",
		},
		{
			name: "safe-to-evict false may be a victim when the annotation is not honoured",
			args: ignoreSafeToEvict, nodes: n1(), pods: keepPods(),
			preemptor: preemptor("2", 100),
			want:      map[string][]string{"n1": {"keep-0", "keep-1"}}, wantBest: "n1",
		},
		{
			name: "a pod under two PDBs is denied, as by the Eviction API",
			args: strict, nodes: n1(), pods: replicas("web", "n1", "web", true, 0, 0, 0, 0),
			pdbs: []*policyv1.PodDisruptionBudget{
				appPDB("web", 4, 0, 4).Obj(),
				appPDB("web", 4, 0, 4).Name("all").Selector(&metav1.LabelSelector{}).Obj(),
			},
			preemptor: preemptor("1", 100),
			want:      map[string][]string{},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.args, tc.nodes, tc.pods, tc.pdbs)
			for _, p := range tc.reserve {
				if d, r := e.budgets.Reserve(p, budget.OperationEvict); !d.Allowed || r == nil {
					t.Fatalf("reserving %s: allowed=%v, reservation %v: %s", p.Name, d.Allowed, r, d.Message())
				}
			}
			got, best := e.preempt(t, tc.preemptor)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("victims per candidate node (-want,+got):\n%s", diff)
			}
			if best != tc.wantBest {
				t.Errorf("chosen node = %q, want %q", best, tc.wantBest)
			}
		})
	}
}

// TestPostFilterBlockedNamesBudget checks that when budgets block every
// candidate, PostFilter's status and the preemptor's event name the budget
// and its numbers. The preemptor needs two victims under a budget that
// allows one: the first victim is not "in flight" (nothing is being
// disrupted); the sentence says the preemption needs 2.
func TestPostFilterBlockedNamesBudget(t *testing.T) {
	p := preemptor("2", 100)
	pods := append(replicas("web", "n1", "web", true, 0, 0, 0, 0), p)
	e := newEnv(t, nil, []*v1.Node{node("n1")}, pods, []*policyv1.PodDisruptionBudget{appPDB("web", 4, 3, 1).Obj()})
	rec := events.NewFakeRecorder(10)
	e.pl.fh = &recorderHandle{Handle: e.fw, rec: rec}

	state, _ := e.preFilter(t, p)
	m := framework.NewDefaultNodeToStatus()
	m.Set("n1", fwk.NewStatus(fwk.Unschedulable, "Insufficient cpu"))
	_, status := e.pl.PostFilter(e.ctx, state, p, m)
	if status.IsSuccess() {
		t.Fatalf("PostFilter succeeded; want it blocked by the budget")
	}
	const want, numbers = "pdb shop/web", "4 healthy, 3 desired, 1 disruption allowed; needs 2"
	if msg := status.Message(); !strings.Contains(msg, want+": "+numbers) || strings.Contains(msg, "in flight") {
		t.Errorf("status %q does not name %q, or counts the candidate's own victims as in flight", msg, want+": "+numbers)
	}
	select {
	case ev := <-rec.Events:
		if !strings.Contains(ev, "PreemptionBlockedByBudget") || !strings.Contains(ev, want+": "+numbers) {
			t.Errorf("event %q does not name the budget and its numbers", ev)
		}
	default:
		t.Errorf("no event recorded on the preemptor")
	}
}

type recorderHandle struct {
	fwk.Handle
	rec events.EventRecorderLogger
}

func (h *recorderHandle) EventRecorder() events.EventRecorderLogger { return h.rec }
