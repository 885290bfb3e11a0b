package budgetpreemption

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/parallelize"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
	"k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/budgetguard/budgetguard/plugins/budget"
)

// Workload-aware (gang) preemption. With the GenericWorkload gate, a
// PodGroup that does not fit runs no PostFilter plugin: the scheduler calls
// the profile's podGroupPostFilter plugins with a function that tries the
// whole group on the snapshot, and a plugin removes pods from that snapshot
// (through fh.MutableSnapshotSharedLister) to find the victims. The domain
// is the whole cluster, and a victim is a unit (units.go): one pod, or every
// pod of a PodGroup whose disruptionMode is All.
//
// BudgetAwarePreemption keeps its promise there as for a pod:
//   - every pod of a unit spends its budgets; a unit is a victim only when
//     its budgets allow all its pods together (Strict), and the victims of
//     one gang preemption are planned, reserved and actuated together, as
//     one candidate ("cluster"): one reservation for the whole group;
//   - units are reprieved denied first (BestEffort), then those that spend
//     a budget, then those that spend none, each class most important first;
//   - a refusal names the budget in the PodGroup's event and in the status
//     the scheduler writes into the PodGroup's condition.
//
// Victims are actuated synchronously, inside the cycle, whatever async
// preemption says: the group's pods are not in the queue meanwhile.

var _ fwk.PodGroupPostFilterPlugin = &BudgetAwarePreemption{}

// groupDomain is the node name a gang preemption's candidate carries, as
// upstream's does.
const groupDomain = "cluster"

// maxGroupRounds bounds how many times a Strict gang preemption chooses
// again without the units their budgets denied together; each round asks
// the scheduler's pod group algorithm once per candidate unit.
const maxGroupRounds = 4

// groupPrefix begins the messages of a gang preemption's status, as
// upstream's (DefaultPreemption.PodGroupPostFilter) begin; kube-scheduler
// writes them into the group's PodGroupInitiallyScheduled condition.
const groupPrefix = "pod group preemption: "

// groupObject is a PodGroup or a CompositePodGroup.
type groupObject interface {
	runtime.Object
	klog.KMetadata
	GetUID() types.UID
}

// groupPreemptor is a PodGroup (or a CompositePodGroup, whose pods are
// those of its PodGroups) as the preemption executor sees it.
type groupPreemptor struct {
	obj      groupObject
	kind     fwk.EntityKeyType
	priority int32
	// never is the group's preemption policy, resolved as upstream does:
	// the group's own with the PodGroupPreemptionPolicy gate, else any
	// member's Never.
	never bool
	pods  []*v1.Pod
	// rep stands for the group where a rule looks at the preemptor's
	// priority (Strict, override, the operation): a member with the
	// group's priority and the group's UID, under which its refusals are
	// remembered.
	rep *v1.Pod
}

func (pl *BudgetAwarePreemption) newGroupPreemptor(info fwk.PodGroupInfo) *groupPreemptor {
	g := &groupPreemptor{pods: info.GetUnscheduledPods()}
	policy := ""
	if cpg := info.GetCompositePodGroup(); cpg != nil {
		g.obj, g.kind, g.priority = cpg, fwk.CompositePodGroupKeyType, util.CompositePodGroupPriority(cpg)
		if cpg.Spec.PreemptionPolicy != nil {
			policy = string(*cpg.Spec.PreemptionPolicy)
		}
	} else {
		pg := info.GetPodGroup()
		g.obj, g.kind, g.priority = pg, fwk.PodGroupKeyType, util.PodGroupPriority(pg)
		if pg.Spec.PreemptionPolicy != nil {
			policy = string(*pg.Spec.PreemptionPolicy)
		}
	}
	if pl.fts.EnablePodGroupPreemptionPolicy {
		g.never = policy == string(schedulingv1beta1.PreemptNever)
	} else {
		for _, p := range g.pods {
			if p.Spec.PreemptionPolicy != nil && *p.Spec.PreemptionPolicy == v1.PreemptNever {
				g.never = true
			}
		}
	}
	if len(g.pods) > 0 {
		g.rep = g.pods[0].DeepCopy()
		g.rep.Spec.Priority = &g.priority
		g.rep.UID = g.obj.GetUID()
	}
	return g
}

func (g *groupPreemptor) GetName() string       { return g.obj.GetName() }
func (g *groupPreemptor) GetNamespace() string  { return g.obj.GetNamespace() }
func (g *groupPreemptor) UID() types.UID        { return g.obj.GetUID() }
func (g *groupPreemptor) SchedulerName() string { return g.pods[0].Spec.SchedulerName }
func (g *groupPreemptor) Obj() runtime.Object   { return g.obj }
func (g *groupPreemptor) Priority() int32       { return g.priority }
func (g *groupPreemptor) Type() string          { return string(g.kind) }
func (g *groupPreemptor) Pods() map[string]*v1.Pod {
	m := make(map[string]*v1.Pod, len(g.pods))
	for _, p := range g.pods {
		m[p.Name] = p
	}
	return m
}

// groupCandidate is the one candidate of a gang preemption.
type groupCandidate struct {
	victims *extenderv1.Victims
	groups  int
}

func (c *groupCandidate) Victims() *extenderv1.Victims { return c.victims }
func (c *groupCandidate) Name() string                 { return groupDomain }
func (c *groupCandidate) NumPodGroupDisruptions() int  { return c.groups }

// victimUnit is a unit a gang preemption takes or leaves as a whole.
type victimUnit struct {
	v *preemption.DomainVictim
	// d is the unit's decision alone: every pod, in one plan.
	d     budget.Decision
	class victimClass
}

// clusterUnits returns the units of the whole cluster that a preemptor of
// priority may take, each once: upstream's units node by node
// (preemption.Evaluator.GetVictimsOnNode), a group's found on each of its
// nodes.
func (pl *BudgetAwarePreemption) clusterUnits(ctx context.Context, nodes []fwk.NodeInfo, priority int32) ([]*preemption.DomainVictim, error) {
	seen := map[types.UID]bool{}
	var units []*preemption.DomainVictim
	for _, n := range nodes {
		vs, err := pl.Evaluator.GetVictimsOnNode(ctx, n)
		if err != nil {
			return nil, err
		}
		for _, v := range vs {
			// A unit's pods are its own: any one of them names it.
			key := v.Pods()[0].GetPod().UID
			for _, pi := range v.Pods()[1:] {
				if uid := pi.GetPod().UID; uid < key {
					key = uid
				}
			}
			if seen[key] {
				continue
			}
			seen[key] = true
			if pl.mayTake(priority, v) {
				units = append(units, v)
			}
		}
	}
	return units, nil
}

// PodGroupPostFilter implements fwk.PodGroupPostFilterPlugin: gang
// preemption within every budget (see the top of this file). Changes to the
// snapshot are made in a mutation session, which restores it at the end.
func (pl *BudgetAwarePreemption) PodGroupPostFilter(ctx context.Context, _ fwk.PodGroupCycleState, pgInfo fwk.PodGroupInfo, schedule fwk.PodGroupSchedulingFunc) (res *fwk.PodGroupPostFilterResult, status *fwk.Status) {
	logger := klog.FromContext(ctx)
	g := pl.newGroupPreemptor(pgInfo)
	if len(g.pods) == 0 {
		return nil, fwk.NewStatus(fwk.Unschedulable, groupPrefix+"the pod group has no pod left to schedule")
	}
	pods := g.pods
	if g.never {
		return nil, fwk.NewStatus(fwk.Unschedulable, groupPrefix+"not eligible due to preemptionPolicy=Never.")
	}
	if !pl.budgets.HasSynced() {
		return nil, pl.groupNotSynced(ctx, g)
	}
	snap := pl.fh.MutableSnapshotSharedLister()
	if err := snap.StartMutations(); err != nil {
		return nil, fwk.AsStatus(fmt.Errorf(groupPrefix+"start the snapshot's mutations: %w", err))
	}
	defer func() {
		if err := snap.EndMutations(); err != nil {
			res, status = nil, fwk.AsStatus(fmt.Errorf(groupPrefix+"end the snapshot's mutations: %w", err))
		}
	}()
	nodeList, err := snap.NodeInfos().List()
	if err != nil {
		return nil, fwk.AsStatus(fmt.Errorf(groupPrefix+"list the snapshot's nodes: %w", err))
	}
	if pl.ongoingGroupPreemption(g, snap) {
		n := map[types.NamespacedName]*fwk.NominatingInfo{}
		for _, p := range pods {
			n[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = &fwk.NominatingInfo{NominatingMode: fwk.ModeOverride, NominatedNodeName: p.Status.NominatedNodeName}
		}
		return &fwk.PodGroupPostFilterResult{NominatingInfos: n}, fwk.NewStatus(fwk.Success, groupPrefix+"ongoing preemption on nominated nodes")
	}
	all, err := pl.clusterUnits(ctx, nodeList, g.Priority())
	if err != nil {
		return nil, fwk.AsStatus(fmt.Errorf(groupPrefix+"%w", err))
	}
	if len(all) == 0 {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, groupPrefix+"no preemption victims found for the pod group")
	}
	if s := pl.groupRefused(ctx, g); s != nil {
		return nil, s
	}
	t := &groupTrial{pl: pl, logger: logger, snap: snap}

	strict := pl.strict(g.rep)
	op := pl.operation(g.rep)
	var candidates []*victimUnit
	var blocked *budget.Decision
	for _, v := range all {
		u := &victimUnit{v: v, d: pl.decideVictim(v, op), class: classFree}
		switch {
		case !u.d.Allowed && strict:
			// Its budgets deny it even alone: never a victim.
			if blocked == nil {
				d := u.d
				blocked = &d
			}
			continue
		case !u.d.Allowed:
			u.class = classDenied
		case !u.d.Free():
			u.class = classSpends
		}
		candidates = append(candidates, u)
	}
	sort.SliceStable(candidates, func(i, j int) bool {
		// Denied units are reprieved first, then spending ones, each
		// class most important first: as the pod path and upstream's
		// reprieve of PDB-violating victims.
		if candidates[i].class != candidates[j].class {
			return candidates[i].class < candidates[j].class
		}
		return preemption.MoreImportantVictim(candidates[i].v, candidates[j].v)
	})

	// Each round chooses victims among the candidates; in Strict mode a
	// unit that their budgets deny together leaves the candidates, and the
	// next round chooses again without it.
	var victims []*victimUnit
	rounds := 0
	for {
		var s *fwk.Status
		victims, s, err = pl.chooseUnits(ctx, t, candidates, schedule)
		if err != nil {
			return nil, fwk.AsStatus(err)
		}
		if !s.IsSuccess() {
			if blocked != nil {
				return nil, pl.groupBlocked(ctx, g, *blocked, s)
			}
			return nil, s
		}
		denied, d := pl.deniedTogether(op, victims)
		if len(denied) == 0 || !strict {
			break
		}
		if blocked == nil {
			blocked = &d
		}
		if rounds++; rounds == maxGroupRounds {
			return nil, pl.groupBlocked(ctx, g, *blocked, fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("no victims within the budgets after %d tries", rounds)))
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
	groups := 0
	sort.SliceStable(victims, func(i, j int) bool { return preemption.MoreImportantVictim(victims[i].v, victims[j].v) })
	for _, u := range victims {
		if u.v.IsGroup() && len(u.v.Pods()) > 1 {
			groups++
		}
		out = append(out, victimPods(u.v)...)
	}
	logger.V(2).Info("Gang preemption chose its victims", "podGroup", klog.KObj(g.obj), "victims", len(out), "units", len(victims))
	if s := pl.actuateGroup(ctx, g, &groupCandidate{victims: &extenderv1.Victims{Pods: out}, groups: groups}); !s.IsSuccess() {
		return nil, s
	}
	return t.nominations(), fwk.NewStatus(fwk.Success, groupPrefix+fmt.Sprintf("found a placement for podgroup, preempting %d victims", len(out)))
}

// compositeGroups is the snapshot's CompositePodGroup lister with the
// CompositePodGroup gate, else nil (as upstream's evaluators hold it).
func (pl *BudgetAwarePreemption) compositeGroups(snap fwk.SharedLister) fwk.CompositePodGroupLister {
	if !pl.fts.EnableCompositePodGroup {
		return nil
	}
	return snap.CompositePodGroups()
}

// ongoingGroupPreemption reports, as upstream, whether a lower-priority pod
// on a node the group's pods are nominated to is terminating by a
// disruption (this plugin's evictions included): the group waits for it.
func (pl *BudgetAwarePreemption) ongoingGroupPreemption(g *groupPreemptor, snap fwk.SharedLister) bool {
	nominated := map[string]bool{}
	for _, p := range g.pods {
		if p.Status.NominatedNodeName != "" {
			nominated[p.Status.NominatedNodeName] = true
		}
	}
	for name := range nominated {
		ni, err := snap.NodeInfos().Get(name)
		if err != nil || ni == nil {
			continue
		}
		for _, pi := range ni.GetPods() {
			p := pi.GetPod()
			if preemption.GetPodPriority(p, snap.PodGroups(), pl.compositeGroups(snap)) < g.Priority() && terminatingByDisruption(p) {
				return true
			}
		}
	}
	return false
}

// deniedTogether plans the victims together, the most important last, and
// returns the units the plan denies (none when all are allowed) and the
// first denial.
func (pl *BudgetAwarePreemption) deniedTogether(op budget.Operation, victims []*victimUnit) ([]*victimUnit, budget.Decision) {
	ordered := append([]*victimUnit(nil), victims...)
	sort.SliceStable(ordered, func(i, j int) bool { return preemption.MoreImportantVictim(ordered[j].v, ordered[i].v) })
	var denied, allowed []*victimUnit
	first := budget.Decision{Allowed: true}
	for _, u := range ordered {
		// A unit joins the plan whole or not at all: decided on a plan of
		// the units allowed so far.
		plan := pl.budgets.NewPlan(op)
		for _, a := range allowed {
			pl.addVictim(plan, a.v)
		}
		if d := pl.addVictim(plan, u.v); !d.Allowed {
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

// groupRefused is refusedOn for a gang: while the refusal of the group's
// last preemption (remembered under the PodGroup's UID) still holds, the
// group preempts nothing, and the status names the budget.
func (pl *BudgetAwarePreemption) groupRefused(ctx context.Context, g *groupPreemptor) *fwk.Status {
	f, d, holds := pl.refusalHolds(g.UID(), groupDomain, pl.operation(g.rep))
	if !holds {
		return nil
	}
	pl.blocked.addGroup(g.UID(), g.pods)
	if !d.Allowed {
		return pl.groupBlocked(ctx, g, d, fwk.NewStatus(fwk.Unschedulable, "the pod group's last preemption was refused by a disruption budget: "+f.err.Error()))
	}
	return fwk.NewStatus(fwk.Unschedulable, groupPrefix+"the pod group's last preemption was refused by a disruption budget: "+f.err.Error())
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
		if _, err := pl.Executor.PreemptPod(ctx, c, g, victims[i], Name); err != nil {
			errCh.SendWithCancel(err, cancel)
		}
	}, Name)
	err := errCh.Receive()
	if err == nil {
		pl.blocked.forgetGroup(g.UID(), g.pods)
		return nil
	}
	// Refused at actuation: the budgets changed since the victims were
	// chosen, or the API server (or a webhook) refused one. preemptPod
	// named it on the PodGroup and remembered the refusal under the
	// PodGroup's UID; the group is retried when a budget frees, when the
	// refusal runs out, or in a second when a budget's status was behind.
	pl.blocked.addGroup(g.UID(), g.pods)
	var de *budget.DeniedError
	if errors.As(err, &de) && statusBehind(de.Decision) {
		pl.retryBehind(g.UID())
	}
	if errors.As(err, &de) || budget.RefusedByBudget(err) {
		return fwk.NewStatus(fwk.Unschedulable, groupPrefix+err.Error())
	}
	return fwk.AsStatus(fmt.Errorf(groupPrefix+"%w", err))
}

// groupBlocked reports a gang preemption the budgets refused: the event on
// the PodGroup, the metric, and a status that names the budget (the
// scheduler writes it into the PodGroup's condition). The group's pods are
// retried when a budget frees.
func (pl *BudgetAwarePreemption) groupBlocked(ctx context.Context, g *groupPreemptor, d budget.Decision, status *fwk.Status) *fwk.Status {
	pl.blocked.addGroup(g.UID(), g.pods)
	if statusBehind(d) {
		pl.retryBehind(g.UID())
	}
	blockedTotal.WithLabelValues(string(d.Reason())).Inc()
	note := "gang preemption blocked by disruption budgets: " + d.Message()
	pl.blockedEvent(g.obj, d, note)
	klog.FromContext(ctx).V(2).Info("Gang preemption blocked by disruption budgets", "podGroup", klog.KObj(g.obj), "reason", d.Reason(), "message", d.Message())
	return fwk.NewStatus(fwk.Unschedulable, groupPrefix+appendNote(status.Message(), note))
}

// groupNotSynced is notSynced for a PodGroup.
func (pl *BudgetAwarePreemption) groupNotSynced(ctx context.Context, g *groupPreemptor) *fwk.Status {
	pl.blocked.addGroup(g.UID(), g.pods)
	pl.requeueWhenSynced()
	reason, why := pl.budgets.NotSynced()
	if reason == "" {
		return fwk.AsStatus(fmt.Errorf(groupPrefix+"%s", cacheNotSynced))
	}
	msg := fmt.Sprintf("budget cache not synced (%s: %s); the pod group is retried once it is", reason, why)
	blockedTotal.WithLabelValues(reasonCacheNotSynced).Inc()
	pl.blockedEvent(g.obj, budget.Decision{}, msg)
	klog.FromContext(ctx).V(2).Info("Gang preemption refused: the budget cache is not synced", "podGroup", klog.KObj(g.obj), "reason", reason, "message", why)
	return fwk.NewStatus(fwk.Unschedulable, groupPrefix+msg)
}
