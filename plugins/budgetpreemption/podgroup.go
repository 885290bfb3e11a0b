package budgetpreemption

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	schedulingv1alpha2 "k8s.io/api/scheduling/v1alpha2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1alpha2"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/parallelize"
	"k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/budgetguard/budgetguard/plugins/budget"
)

// Workload-aware (gang) preemption. With the WorkloadAwarePreemption gate,
// a PodGroup that does not fit runs no PostFilter plugin: the scheduler
// calls one PodGroupPostFilter plugin with a function that tries the whole
// group on the snapshot, and the plugin removes pods from that snapshot to
// find the victims. The domain is the whole cluster, and a victim is a unit:
// one pod, or every pod of a PodGroup whose disruptionMode is PodGroup.
//
// BudgetAwarePreemption keeps its promise there as for a pod:
//   - every pod of a unit spends its budgets; a unit is a victim only when
//     its budgets allow all its pods together (Strict), and the victims of
//     one gang preemption are planned, reserved and actuated together, as
//     one candidate ("cluster"): one reservation for the whole group;
//   - units that spend a budget are reprieved before units that spend none;
//   - a refusal names the budget in the PodGroup's event and in the status
//     the scheduler writes into its PodGroupScheduled condition.
//
// Victims are actuated synchronously, inside the cycle, whatever async
// preemption says: the group's pods are not in the queue meanwhile.

var _ framework.PodGroupPostFilterPlugin = &BudgetAwarePreemption{}

// groupDomain is the node name a gang preemption's candidate carries, as
// upstream's does.
const groupDomain = "cluster"

// maxGroupRounds bounds how many times a Strict gang preemption chooses
// again without the units their budgets denied together; each round asks
// the scheduler's pod group algorithm once per candidate unit.
const maxGroupRounds = 4

// groupPreemptor is a PodGroup as the preemption executor sees it.
type groupPreemptor struct {
	pg   *schedulingv1alpha2.PodGroup
	pods []*v1.Pod
	// rep stands for the group where a rule looks at the preemptor's
	// priority (Strict, override, the operation): a member with the
	// group's priority.
	rep *v1.Pod
}

func newGroupPreemptor(pg *schedulingv1alpha2.PodGroup, pods []*v1.Pod) *groupPreemptor {
	rep := pods[0].DeepCopy()
	prio := util.PodGroupPriority(pg)
	rep.Spec.Priority = &prio
	rep.UID = pg.UID
	return &groupPreemptor{pg: pg, pods: pods, rep: rep}
}

func (g *groupPreemptor) GetName() string       { return g.pg.Name }
func (g *groupPreemptor) GetNamespace() string  { return g.pg.Namespace }
func (g *groupPreemptor) UID() types.UID        { return g.pg.UID }
func (g *groupPreemptor) SchedulerName() string { return g.pods[0].Spec.SchedulerName }
func (g *groupPreemptor) Obj() runtime.Object   { return g.pg }
func (g *groupPreemptor) Priority() int32       { return util.PodGroupPriority(g.pg) }
func (g *groupPreemptor) Type() string          { return "podgroup" }
func (g *groupPreemptor) Pods() map[string]*v1.Pod {
	m := make(map[string]*v1.Pod, len(g.pods))
	for _, p := range g.pods {
		m[p.Name] = p
	}
	return m
}

// groupCandidate is the one candidate of a gang preemption.
type groupCandidate struct{ victims *extenderv1.Victims }

func (c *groupCandidate) Victims() *extenderv1.Victims { return c.victims }
func (c *groupCandidate) Name() string                 { return groupDomain }

// victimUnit is what a gang preemption takes or leaves as a whole.
type victimUnit struct {
	pods     []fwk.PodInfo
	priority int32
	group    bool
	start    *metav1.Time
	// d is the unit's decision alone: every pod, in one plan.
	d budget.Decision
	// spends: some pod of the unit spends (or would break) a budget.
	spends bool
}

// moreImportantUnit orders units as upstream's gang preemption does:
// priority, then a PodGroup before a pod, then (pods) the older, (groups)
// the larger, then the older.
func moreImportantUnit(a, b *victimUnit) bool {
	if a.priority != b.priority {
		return a.priority > b.priority
	}
	if a.group != b.group {
		return a.group
	}
	if a.group && len(a.pods) != len(b.pods) {
		return len(a.pods) > len(b.pods)
	}
	return a.start.Before(b.start)
}

// decideUnit decides the unit's pods together, as they would go: pods
// already terminating and expendable pods spend nothing (see reserve).
func (pl *BudgetAwarePreemption) decideUnit(plan *budget.Plan, u *victimUnit) budget.Decision {
	out := budget.Decision{Allowed: true}
	for _, pi := range u.pods {
		p := pi.GetPod()
		if p.DeletionTimestamp != nil || pl.expendable(p) {
			continue
		}
		d := plan.Add(p)
		out.Spends = append(out.Spends, d.Spends...)
		if !d.Allowed && out.Allowed {
			out.Allowed, out.Denials = false, d.Denials
		}
	}
	return out
}

// podGroups is the PodGroup lister, when the gates serve PodGroups.
func (pl *BudgetAwarePreemption) podGroups() schedulinglisters.PodGroupLister {
	if !pl.fts.EnableGenericWorkload || pl.fh.SharedInformerFactory() == nil {
		return nil
	}
	return pl.fh.SharedInformerFactory().Scheduling().V1alpha2().PodGroups().Lister()
}

// victimUnits groups the lower-priority pods of the cluster into units, as
// upstream does, leaving out what budgetguard never takes: pods on a node
// cluster-autoscaler is removing, and pods annotated safe-to-evict "false"
// (when honoured). A PodGroup with such a pod is not taken either.
func (pl *BudgetAwarePreemption) victimUnits(nodes []fwk.NodeInfo, priority int32) []*victimUnit {
	lister := pl.podGroups()
	groups := map[types.UID]*victimUnit{}
	untouchable := map[types.UID]bool{}
	var units []*victimUnit
	for _, n := range nodes {
		removing := budget.NodeBeingRemoved(n.Node())
		for _, pi := range n.GetPods() {
			p := pi.GetPod()
			pg := disruptedAsGroup(p, lister)
			keep := removing || (pl.args.HonorSafeToEvictAnnotation && budget.AutoscalerForbidsEviction(p))
			if pg == nil {
				if keep || corev1helpers.PodPriority(p) >= priority {
					continue
				}
				units = append(units, &victimUnit{pods: []fwk.PodInfo{pi}, priority: corev1helpers.PodPriority(p), start: util.GetPodStartTime(p)})
				continue
			}
			if keep {
				untouchable[pg.UID] = true
			}
			u, ok := groups[pg.UID]
			if !ok {
				u = &victimUnit{priority: util.PodGroupPriority(pg), group: true}
				groups[pg.UID] = u
			}
			u.pods = append(u.pods, pi)
			if t := util.GetPodStartTime(p); u.start == nil || (t != nil && t.Before(u.start)) {
				u.start = t
			}
		}
	}
	for uid, u := range groups {
		if !untouchable[uid] && u.priority < priority {
			units = append(units, u)
		}
	}
	return units
}

// podGroupOf returns p's PodGroup, or nil when it has none or it cannot be
// read.
func (pl *BudgetAwarePreemption) podGroupOf(p *v1.Pod) *schedulingv1alpha2.PodGroup {
	return podGroupFrom(pl.podGroups(), p)
}

func podGroupFrom(lister schedulinglisters.PodGroupLister, p *v1.Pod) *schedulingv1alpha2.PodGroup {
	if lister == nil || p.Spec.SchedulingGroup == nil || p.Spec.SchedulingGroup.PodGroupName == nil {
		return nil
	}
	pg, err := lister.PodGroups(p.Namespace).Get(*p.Spec.SchedulingGroup.PodGroupName)
	if err != nil {
		return nil
	}
	return pg
}

// disruptedAsGroup returns the PodGroup of p when the group is disrupted
// as a whole (disruptionMode PodGroup), else nil.
func disruptedAsGroup(p *v1.Pod, lister schedulinglisters.PodGroupLister) *schedulingv1alpha2.PodGroup {
	pg := podGroupFrom(lister, p)
	if pg == nil {
		return nil
	}
	if m := pg.Spec.DisruptionMode; m == nil || *m != schedulingv1alpha2.DisruptionModePodGroup {
		return nil
	}
	return pg
}

// groupTrial removes and restores units on the snapshot the scheduling
// function reads.
type groupTrial struct {
	logger klog.Logger
	nodes  map[string]fwk.NodeInfo
}

func (t *groupTrial) remove(u *victimUnit) error {
	for _, pi := range u.pods {
		if n := t.nodes[pi.GetPod().Spec.NodeName]; n != nil {
			if err := n.RemovePod(t.logger, pi.GetPod()); err != nil {
				return err
			}
		}
	}
	return nil
}

func (t *groupTrial) restore(u *victimUnit) {
	for _, pi := range u.pods {
		if n := t.nodes[pi.GetPod().Spec.NodeName]; n != nil {
			n.AddPodInfo(pi)
		}
	}
}

// PodGroupPostFilter implements framework.PodGroupPostFilterPlugin: gang
// preemption within every budget (see the top of this file). The scheduler
// backs its snapshot up before the call and restores it after.
func (pl *BudgetAwarePreemption) PodGroupPostFilter(ctx context.Context, pg *schedulingv1alpha2.PodGroup, pods []*v1.Pod, schedule func(context.Context) *fwk.Status) *fwk.Status {
	logger := klog.FromContext(ctx)
	if len(pods) == 0 {
		return fwk.NewStatus(fwk.Unschedulable, "preemption: the pod group has no pod left to schedule")
	}
	g := newGroupPreemptor(pg, pods)
	for _, p := range pods {
		if p.Spec.PreemptionPolicy != nil && *p.Spec.PreemptionPolicy == v1.PreemptNever {
			return fwk.NewStatus(fwk.Unschedulable, "preemption: not eligible due to preemptionPolicy=Never.")
		}
	}
	if !pl.budgets.HasSynced() {
		return pl.groupNotSynced(ctx, g)
	}
	nodeList, err := pl.fh.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return fwk.AsStatus(fmt.Errorf("preemption: list the snapshot's nodes: %w", err))
	}
	t := &groupTrial{logger: logger, nodes: make(map[string]fwk.NodeInfo, len(nodeList))}
	for _, n := range nodeList {
		t.nodes[n.Node().Name] = n
	}
	units := pl.victimUnits(nodeList, g.Priority())
	if len(units) == 0 {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "preemption: no preemption victims found for the pod group")
	}

	strict := pl.strict(g.rep)
	op := pl.operation(g.rep)
	var candidates []*victimUnit
	var blocked *budget.Decision
	for _, u := range units {
		u.d = pl.decideUnit(pl.budgets.NewPlan(op), u)
		u.spends = !u.d.Free()
		if !u.d.Allowed && strict {
			// Its budgets deny it even alone: never a victim.
			if blocked == nil {
				d := u.d
				blocked = &d
			}
			continue
		}
		candidates = append(candidates, u)
	}
	sort.SliceStable(candidates, func(i, j int) bool {
		// Spending units are reprieved first, most important first.
		if candidates[i].spends != candidates[j].spends {
			return candidates[i].spends
		}
		return moreImportantUnit(candidates[i], candidates[j])
	})

	// Each round chooses victims among the candidates; in Strict mode a
	// unit that their budgets deny together leaves the candidates, and the
	// next round chooses again without it.
	var victims []*victimUnit
	rounds := 0
	for {
		var status *fwk.Status
		victims, status, err = pl.chooseUnits(ctx, t, candidates, schedule)
		if err != nil {
			return fwk.AsStatus(err)
		}
		if !status.IsSuccess() {
			if blocked != nil {
				return pl.groupBlocked(ctx, g, *blocked, status)
			}
			return status
		}
		denied, d := pl.deniedTogether(op, victims)
		if len(denied) == 0 || !strict {
			break
		}
		if blocked == nil {
			blocked = &d
		}
		if rounds++; rounds == maxGroupRounds {
			return pl.groupBlocked(ctx, g, *blocked, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("no victims within the budgets after %d tries", rounds)))
		}
		kept := candidates[:0]
		for _, u := range candidates {
			if !slices.Contains(denied, u) {
				kept = append(kept, u)
			}
		}
		candidates = kept
	}

	var out []*v1.Pod
	sort.SliceStable(victims, func(i, j int) bool { return moreImportantUnit(victims[i], victims[j]) })
	for _, u := range victims {
		for _, pi := range u.pods {
			out = append(out, pi.GetPod())
		}
	}
	logger.V(2).Info("Gang preemption chose its victims", "podGroup", klog.KObj(pg), "victims", len(out), "units", len(victims))
	return pl.actuateGroup(ctx, g, &groupCandidate{victims: &extenderv1.Victims{Pods: out}})
}

// chooseUnits removes every candidate, checks that the group fits, and
// reprieves candidates in their order while it still fits. It leaves the
// snapshot as it found it.
func (pl *BudgetAwarePreemption) chooseUnits(ctx context.Context, t *groupTrial, candidates []*victimUnit, schedule func(context.Context) *fwk.Status) ([]*victimUnit, *fwk.Status, error) {
	for _, u := range candidates {
		if err := t.remove(u); err != nil {
			return nil, nil, err
		}
	}
	var victims []*victimUnit
	defer func() {
		for _, u := range victims {
			t.restore(u)
		}
	}()
	if s := schedule(ctx); !s.IsSuccess() {
		victims = candidates
		return nil, s, nil
	}
	for _, u := range candidates {
		t.restore(u)
		if schedule(ctx).IsSuccess() {
			continue
		}
		if err := t.remove(u); err != nil {
			return nil, nil, err
		}
		victims = append(victims, u)
	}
	// No victim at all: the group fits as the cluster is (upstream also
	// succeeds then, and the group is tried again).
	return append([]*victimUnit(nil), victims...), fwk.NewStatus(fwk.Success), nil
}

// deniedTogether plans the victims together, the most important last, and
// returns the units the plan denies (none when all are allowed) and the
// first denial.
func (pl *BudgetAwarePreemption) deniedTogether(op budget.Operation, victims []*victimUnit) ([]*victimUnit, budget.Decision) {
	ordered := append([]*victimUnit(nil), victims...)
	sort.SliceStable(ordered, func(i, j int) bool { return moreImportantUnit(ordered[j], ordered[i]) })
	var denied, allowed []*victimUnit
	first := budget.Decision{Allowed: true}
	for _, u := range ordered {
		// A unit joins the plan whole or not at all: decided on a plan of
		// the units allowed so far.
		plan := pl.budgets.NewPlan(op)
		for _, a := range allowed {
			pl.decideUnit(plan, a)
		}
		if d := pl.decideUnit(plan, u); !d.Allowed {
			if len(denied) == 0 {
				first = d
			}
			denied = append(denied, u)
			continue
		}
		allowed = append(allowed, u)
	}
	return denied, first
}

// actuateGroup disrupts the candidate's victims through preemptPod, which
// reserves them all at once and disrupts the risky ones first.
func (pl *BudgetAwarePreemption) actuateGroup(ctx context.Context, g *groupPreemptor, c *groupCandidate) *fwk.Status {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	victims := c.Victims().Pods
	errCh := parallelize.NewResultChannel[error]()
	pl.fh.Parallelizer().Until(ctx, len(victims), func(i int) {
		if victims[i].DeletionTimestamp != nil {
			return
		}
		if err := pl.Executor.PreemptPod(ctx, c, g, victims[i], Name); err != nil {
			errCh.SendWithCancel(err, cancel)
		}
	}, Name)
	err := errCh.Receive()
	if err == nil {
		for _, p := range g.pods {
			pl.blocked.forget(p)
		}
		return nil
	}
	// Refused at actuation: the budgets changed since the victims were
	// chosen, or the API server (or a webhook) refused one. preemptPod
	// named it on the PodGroup; the group is retried when a budget frees.
	for _, p := range g.pods {
		pl.blocked.add(p)
	}
	var de *budget.DeniedError
	if errors.As(err, &de) || budget.RefusedByBudget(err) {
		return fwk.NewStatus(fwk.Unschedulable, "preemption: "+err.Error())
	}
	return fwk.AsStatus(fmt.Errorf("preemption: %w", err))
}

// groupBlocked reports a gang preemption the budgets refused: the event on
// the PodGroup, the metric, and a status that names the budget (the
// scheduler writes it into the PodGroupScheduled condition). The group's
// pods are retried when a budget frees.
func (pl *BudgetAwarePreemption) groupBlocked(ctx context.Context, g *groupPreemptor, d budget.Decision, status *fwk.Status) *fwk.Status {
	for _, p := range g.pods {
		pl.blocked.add(p)
	}
	if statusBehind(d) {
		for _, p := range g.pods {
			pl.retryBehind(p)
		}
	}
	blockedTotal.WithLabelValues(string(d.Reason())).Inc()
	note := "gang preemption blocked by disruption budgets: " + d.Message()
	pl.fh.EventRecorder().Eventf(g.pg, nil, v1.EventTypeWarning, budget.EventPreemptionBlockedByBudget, "Preempting", note)
	klog.FromContext(ctx).V(2).Info("Gang preemption blocked by disruption budgets", "podGroup", klog.KObj(g.pg), "reason", d.Reason(), "message", d.Message())
	msg := strings.TrimSpace(status.Message() + "; " + note)
	return fwk.NewStatus(fwk.Unschedulable, "preemption: "+strings.TrimPrefix(msg, "; "))
}

// groupNotSynced is notSynced for a PodGroup.
func (pl *BudgetAwarePreemption) groupNotSynced(ctx context.Context, g *groupPreemptor) *fwk.Status {
	for _, p := range g.pods {
		pl.blocked.add(p)
	}
	pl.requeueWhenSynced()
	reason, why := pl.budgets.NotSynced()
	if reason == "" {
		return fwk.AsStatus(fmt.Errorf("preemption: %s", cacheNotSynced))
	}
	msg := fmt.Sprintf("budget cache not synced (%s: %s); the pod group is retried once it is", reason, why)
	blockedTotal.WithLabelValues(reasonCacheNotSynced).Inc()
	pl.fh.EventRecorder().Eventf(g.pg, nil, v1.EventTypeWarning, budget.EventPreemptionBlockedByBudget, "Preempting", msg)
	klog.FromContext(ctx).V(2).Info("Gang preemption refused: the budget cache is not synced", "podGroup", klog.KObj(g.pg), "reason", reason, "message", why)
	return fwk.NewStatus(fwk.Unschedulable, "preemption: "+msg)
}
