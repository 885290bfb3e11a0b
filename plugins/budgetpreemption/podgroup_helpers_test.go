package budgetpreemption

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/tools/events"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/budgetguard/budgetguard/plugins/budget"
)

// gangEnv is env with the GenericWorkload gate, PodGroups in the snapshot
// (so that a PodGroup whose disruptionMode is All is one unit, on whatever
// nodes its pods run), and the plugin's disruptions, events and
// activations recorded instead of sent.
type gangEnv struct {
	*env
	h  *gangHandle
	mu sync.Mutex
	// disrupted are the victims evicted or deleted, by name.
	disrupted []string
	// refuse, when set, is the error the API server answers an eviction
	// or a delete with.
	refuse error
}

func newGangEnv(t *testing.T, args *BudgetAwarePreemptionArgs, nodes []*v1.Node, pods []*v1.Pod, pdbs []*policyv1.PodDisruptionBudget, groups ...*schedulingv1beta1.PodGroup) *gangEnv {
	t.Helper()
	return newGangEnvServing(t, args, nodes, pods, pods, pdbs, groups...)
}

// newGangEnvServing is newGangEnv whose API server (and so the pod lister
// victims are re-read from at reservation) serves served instead of the
// snapshot's pods.
func newGangEnvServing(t *testing.T, args *BudgetAwarePreemptionArgs, nodes []*v1.Node, pods, served []*v1.Pod, pdbs []*policyv1.PodDisruptionBudget, groups ...*schedulingv1beta1.PodGroup) *gangEnv {
	t.Helper()
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.GenericWorkload, true)
	e := buildEnv(t, envSpec{args: args, nodes: nodes, pods: pods, served: served, pdbs: pdbs, groups: groups, gangs: true})
	pl := e.pl
	g := &gangEnv{env: e, h: &gangHandle{Handle: e.fw, rec: &eventLog{}, activated: make(chan map[string]*v1.Pod, 10)}}
	pl.fh = g.h
	record := func(victim *v1.Pod) error {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.refuse != nil {
			return g.refuse
		}
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

// gangHandle records the plugin's events and the pods it activates.
type gangHandle struct {
	fwk.Handle
	rec       *eventLog
	activated chan map[string]*v1.Pod
}

func (h *gangHandle) EventRecorder() events.EventRecorderLogger { return h.rec }
func (h *gangHandle) Activate(_ klog.Logger, pods map[string]*v1.Pod) {
	h.activated <- pods
}

// eventLog records events as "<Kind> <namespace>/<name> <type> <reason>
// <note>", Kind being that of the object the event regards.
type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (l *eventLog) Eventf(regarding, _ runtime.Object, eventtype, reason, _, note string, args ...any) {
	kind := fmt.Sprintf("%T", regarding)
	switch regarding.(type) {
	case *schedulingv1beta1.PodGroup:
		kind = "PodGroup"
	case *v1.Pod:
		kind = "Pod"
	}
	name := ""
	if o, ok := regarding.(interface {
		GetNamespace() string
		GetName() string
	}); ok {
		name = o.GetNamespace() + "/" + o.GetName()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, strings.Join([]string{kind, name, eventtype, reason, fmt.Sprintf(note, args...)}, " "))
}

func (l *eventLog) WithLogger(klog.Logger) events.EventRecorderLogger { return l }

// take returns the events recorded so far, and forgets them.
func (l *eventLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.events
	l.events = nil
	return out
}

// refusalEvent returns the first PreemptionBlockedByBudget event on pg
// that names want, or "" (and the events seen, for the failure message),
// and forgets the events.
func (g *gangEnv) refusalEvent(pg *schedulingv1beta1.PodGroup, want string) (string, []string) {
	evs := g.h.rec.take()
	prefix := "PodGroup " + pg.Namespace + "/" + pg.Name + " " + v1.EventTypeWarning + " " + budget.EventPreemptionBlockedByBudget + " "
	for _, ev := range evs {
		if strings.HasPrefix(ev, prefix) && strings.Contains(ev, want) {
			return ev, evs
		}
	}
	return "", evs
}

// assignment is a ProposedAssignment of the pod group algorithm.
type assignment struct {
	pod   *v1.Pod
	node  string
	state fwk.CycleState
}

func (a *assignment) GetPod() *v1.Pod { return a.pod }
func (a *assignment) GetPodInfo() fwk.PodInfo {
	pi, _ := framework.NewPodInfo(a.pod)
	return pi
}
func (a *assignment) GetNodeName() string           { return a.node }
func (a *assignment) GetCycleState() fwk.CycleState { return a.state }

// fits is the scheduler's pod group algorithm, reduced to CPU: every pod
// of the group on some node of the snapshot as it is (first fit by node
// name, largest first), and where.
func (g *gangEnv) fits(pods []*v1.Pod) fwk.PodGroupSchedulingFunc {
	return func(ctx context.Context) (*fwk.PodGroupAssignments, *fwk.Status) {
		nodes, err := g.snapshot.NodeInfos().List()
		if err != nil {
			return nil, fwk.AsStatus(err)
		}
		nodes = slices.Clone(nodes)
		sort.Slice(nodes, func(i, j int) bool { return nodes[i].Node().Name < nodes[j].Node().Name })
		free := make([]int64, len(nodes))
		for i, n := range nodes {
			free[i] = n.GetAllocatable().GetMilliCPU() - n.GetRequested().GetMilliCPU()
		}
		ordered := slices.Clone(pods)
		cpu := func(p *v1.Pod) int64 { return p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue() }
		sort.SliceStable(ordered, func(i, j int) bool { return cpu(ordered[i]) > cpu(ordered[j]) })
		out := &fwk.PodGroupAssignments{}
		for _, p := range ordered {
			i := slices.IndexFunc(free, func(f int64) bool { return f >= cpu(p) })
			if i < 0 {
				return nil, fwk.NewStatus(fwk.Unschedulable, "the pod group does not fit")
			}
			free[i] -= cpu(p)
			// The pod's cycle state, PreFilter run, as the scheduler's
			// algorithm hands it over.
			state := framework.NewCycleState()
			if _, s, _ := g.fw.RunPreFilterPlugins(ctx, state, p); !s.IsSuccess() {
				return nil, s
			}
			out.ProposedAssignments = append(out.ProposedAssignments, &assignment{pod: p, node: nodes[i].Node().Name, state: state})
		}
		return out, fwk.NewStatus(fwk.Success)
	}
}

// postFilter runs PodGroupPostFilter for the gang pg of members.
func (g *gangEnv) postFilter(pg *schedulingv1beta1.PodGroup, members []*v1.Pod) (*fwk.PodGroupPostFilterResult, *fwk.Status) {
	info := &framework.PodGroupInfo{Namespace: pg.Namespace, Name: pg.Name, Type: fwk.PodGroupKeyType, UnscheduledPods: members, PodGroup: pg}
	return g.pl.PodGroupPostFilter(g.ctx, nil, info, g.fits(members))
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

// nominated returns, for each pod of res, the node it is nominated to.
func nominated(res *fwk.PodGroupPostFilterResult) map[string]string {
	out := map[string]string{}
	if res == nil {
		return out
	}
	for k, n := range res.NominatingInfos {
		out[k.Name] = n.NominatedNodeName
	}
	return out
}

// gang is a PodGroup of n pods of cpu each at priority.
func gang(name string, n int, cpu string, priority int32) (*schedulingv1beta1.PodGroup, []*v1.Pod) {
	pg := st.MakePodGroup().Name(name).Namespace(ns).UID(types.UID("pg-" + name)).Priority(priority).MinCount(int32(n)).Obj()
	var pods []*v1.Pod
	for i := range n {
		name := name + "-" + string(rune('a'+i))
		pods = append(pods, st.MakePod().Namespace(ns).Name(name).UID(name).Priority(priority).PodGroupName(pg.Name).
			Req(map[v1.ResourceName]string{v1.ResourceCPU: cpu}).Obj())
	}
	return pg, pods
}

// victimGroup is a PodGroup disrupted whole (disruptionMode All), of the
// priority of its pods' (0).
func victimGroup(name string) *schedulingv1beta1.PodGroup {
	return st.MakePodGroup().Name(name).Namespace(ns).UID(types.UID("pg-" + name)).MinCount(2).DisruptionModeAll().Obj()
}

// highPod is a running pod of cpu that no gang may preempt.
func highPod(name, nodeName, cpu string) *v1.Pod {
	return st.MakePod().Namespace(ns).Name(name).UID(name).Node(nodeName).Priority(1000).
		Req(map[v1.ResourceName]string{v1.ResourceCPU: cpu}).Phase(v1.PodRunning).Condition(v1.PodReady, v1.ConditionTrue, "").Obj()
}

// keys are the namespace/name keys of pods, as Handle.Activate takes them.
func keys(pods []*v1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	sort.Strings(out)
	return out
}

// victimNames are the names of v's pods, sorted.
func victimNames(v preemption.Victim) []string {
	var out []string
	for _, p := range victimPods(v) {
		out = append(out, p.Name)
	}
	sort.Strings(out)
	return out
}

// asyncPreemption rebuilds g's plugin with asynchronous preemption (its
// disruptions recorded as before), runs PodGroupPostFilter for the gang pg
// of members, and waits for the gang's pods to be activated (what: after
// what).
func (g *gangEnv) asyncPreemption(t *testing.T, pg *schedulingv1beta1.PodGroup, members []*v1.Pod, what string) {
	t.Helper()
	fts := g.pl.fts
	fts.EnableAsyncPreemption = true
	pl := newPlugin(DefaultArgs(), g.h, g.budgets, fts)
	pl.evictPod, pl.deletePod = g.pl.evictPod, g.pl.deletePod
	g.pl = pl
	if _, status := g.postFilter(pg, members); !status.IsSuccess() {
		t.Fatalf("PodGroupPostFilter: %v", status)
	}
	select {
	case got := <-g.h.activated:
		var pods []*v1.Pod
		for _, p := range got {
			pods = append(pods, p)
		}
		if diff := cmp.Diff(keys(members), keys(pods)); diff != "" {
			t.Errorf("activated (-want,+got):\n%s", diff)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the gang's pods were not activated after %s", what)
	}
}
