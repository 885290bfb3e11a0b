package budgetpreemption

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	kruiseclient "github.com/openkruise/kruise-api/client/clientset/versioned"
	v1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	corelisters "k8s.io/client-go/listers/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"

	"github.com/budgetguard/budgetguard/plugins/budget"
)

// Name is the plugin's name in the registry and in configurations.
const Name = "BudgetAwarePreemption"

// deniedWeight scales denied victims above budget-spending ones in the
// number the Evaluator minimises first when it picks a node (see
// SelectVictimsOnNode).
const deniedWeight = 1 << 20

// cacheNotSynced is PostFilter's answer before the budget cache has synced.
const cacheNotSynced = "budget cache not synced; the pod is retried once it is"

// BudgetAwarePreemption is a PostFilter plugin: upstream preemption whose
// victims are chosen and reserved with the shared budget cache.
type BudgetAwarePreemption struct {
	fh      fwk.Handle
	fts     feature.Features
	args    BudgetAwarePreemptionArgs
	budgets *budget.Cache

	Executor  *preemption.Executor
	Evaluator *preemption.Evaluator

	// upstreamPreemptPod is upstream's PreemptPod, for victims that are
	// only in the scheduler's memory.
	upstreamPreemptPod func(ctx context.Context, c preemption.Candidate, preemptor preemption.ExecutorPreemptor, victim *v1.Pod, pluginName string) (bool, error)
	// pods is the scheduler's pod lister, from which victims are re-read
	// when a candidate is reserved (delete.go).
	pods corelisters.PodLister
	// deletePod is deleteVictim (delete with a DisruptionTarget
	// condition), used for Delete actuation and for overriding preemptors.
	deletePod func(ctx context.Context, c preemption.Candidate, preemptor preemption.ExecutorPreemptor, victim *v1.Pod, pluginName string) error
	// kruise writes the record of a PUB disruption into the PUB's status
	// before the victim is disrupted (budget.RecordPUBDisruptions); nil when
	// PUBs are not supported.
	kruise kruiseclient.Interface
	// evictPod is evict: a policy/v1 Eviction of the victim.
	evictPod func(ctx context.Context, c preemption.Candidate, preemptor preemption.ExecutorPreemptor, victim *v1.Pod) error
	// refused remembers the candidates budgets refused (actuation.go).
	refused *refusals

	mu           sync.Mutex
	reservations map[preemption.Candidate]*candidateReservation

	// blocked are the preemptors that budgets blocked, requeued when a
	// budget frees up (requeue.go).
	blocked *blockedPreemptors
	// lifetime is the scheduler's context, which the plugin's own
	// goroutines live in; syncMu guards whether one waits for the budget
	// cache to sync (syncWaiting) and whether a preemptor was turned away
	// since it last looked (syncWanted). See requeueWhenSynced.
	lifetime    context.Context
	syncMu      sync.Mutex
	syncWaiting bool
	syncWanted  bool
}

var (
	_ fwk.PostFilterPlugin  = &BudgetAwarePreemption{}
	_ fwk.PreEnqueuePlugin  = &BudgetAwarePreemption{}
	_ fwk.EnqueueExtensions = &BudgetAwarePreemption{}
	_ preemption.Interface  = &BudgetAwarePreemption{}
	_ fwk.StateData         = &blockRecorder{}
	_ runtime.Object        = &BudgetAwarePreemptionArgs{}
	_ runtime.Object        = &VersionedArgs{}
)

// Name returns the plugin's name.
func (pl *BudgetAwarePreemption) Name() string { return Name }

// New builds the plugin from its arguments, on the budget cache every
// profile of the scheduler shares (sharedcache.go). The first call registers
// the cache's informers on the scheduler's shared informer factory and, when
// the handle has a kubeconfig, on a Kruise factory for PodUnavailableBudgets.
func New(ctx context.Context, obj runtime.Object, fh fwk.Handle) (fwk.Plugin, error) {
	args, err := argsFrom(obj)
	if err != nil {
		return nil, err
	}
	sh, err := budgetsFor(ctx, fh)
	if err != nil {
		return nil, err
	}
	pl := newPlugin(args, fh, sh.cache, feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate))
	pl.kruise = sh.kruiseClient
	pl.lifetime = ctx
	if err := pl.watchBudgetInformers(ctx, fh.SharedInformerFactory()); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	return pl, nil
}

// argsFrom accepts the internal args (what the scheduler's config loading
// produces), the versioned args, or nil (defaults), and validates them.
func argsFrom(obj runtime.Object) (*BudgetAwarePreemptionArgs, error) {
	var args *BudgetAwarePreemptionArgs
	switch a := obj.(type) {
	case nil:
		args = DefaultArgs()
	case *BudgetAwarePreemptionArgs:
		args = a
	case *VersionedArgs:
		v := a.DeepCopyObject().(*VersionedArgs)
		SetDefaultsBudgetAwarePreemptionArgs(v)
		args = &BudgetAwarePreemptionArgs{}
		convertToInternal(v, args)
	default:
		return nil, fmt.Errorf("want args of type *%s, got %T", Kind, obj)
	}
	if err := ValidateBudgetAwarePreemptionArgs(field.NewPath("pluginConfig").Key(Name).Child("args"), args); err != nil {
		return nil, err
	}
	return args, nil
}

func newPlugin(args *BudgetAwarePreemptionArgs, fh fwk.Handle, c *budget.Cache, fts feature.Features) *BudgetAwarePreemption {
	RegisterMetrics()
	pl := &BudgetAwarePreemption{
		fh:           fh,
		fts:          fts,
		args:         *args,
		budgets:      c,
		reservations: map[preemption.Candidate]*candidateReservation{},
		blocked:      newBlockedPreemptors(),
	}
	pl.Executor = preemption.NewExecutor(fh, fts)
	pl.upstreamPreemptPod = pl.Executor.PreemptPod
	pl.deletePod = pl.deleteVictim
	pl.evictPod = pl.evict
	if f := fh.SharedInformerFactory(); f != nil {
		pl.pods = f.Core().V1().Pods().Lister()
	}
	pl.refused = newRefusals()
	pl.Executor.PreemptPod = pl.preemptPodInMemory
	pl.Evaluator = preemption.NewEvaluator(Name, fh, pl, pl.Executor)
	return pl
}

// overrides reports whether preemptor may break budgets.
func (pl *BudgetAwarePreemption) overrides(preemptor *v1.Pod) bool {
	t := pl.args.OverrideBudgetsAtPriority
	return t != nil && corev1helpers.PodPriority(preemptor) >= *t
}

// strict reports whether denied victims are excluded for preemptor.
func (pl *BudgetAwarePreemption) strict(preemptor *v1.Pod) bool {
	return pl.args.Mode == ModeStrict && !pl.overrides(preemptor)
}

// operation is the budget operation the victims of preemptor undergo: an
// overriding preemptor's are deleted; with Delete actuation, a victim is
// deleted unless it spends a PodDisruptionBudget, and then evicted (see
// deletes); with Evict actuation, evicted.
func (pl *BudgetAwarePreemption) operation(preemptor *v1.Pod) budget.Operation {
	switch {
	case pl.overrides(preemptor):
		return budget.OperationDelete
	case pl.args.Actuation == ActuationDelete:
		return budget.OperationDeleteOrEvict
	}
	return budget.OperationEvict
}

// PostFilter runs preemption for pod.
func (pl *BudgetAwarePreemption) PostFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, m fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	if !pl.budgets.HasSynced() {
		// Right after start, while discovery fails, or while PUB support
		// turns on. Waiting here would hold the whole scheduling loop; the
		// pod is remembered and requeued once the cache has synced.
		return pl.notSynced(ctx, pod)
	}
	rec := &blockRecorder{}
	state.Write(blockKey, rec)
	exp := &expendableRecorder{}
	state.Write(expendableKey, exp)
	// Remembered while it is decided, so that a budget that frees up
	// meanwhile requeues it too.
	pl.blocked.add(pod)
	result, status := pl.Evaluator.Preempt(ctx, state, pod, m)
	denied := deniedAtActuation(status)
	// A preemptor that a budget refused in any way (no candidate because
	// of a budget, victims denied at actuation, a 429 or a refusal it is
	// remembered for) stays remembered, so a budget that frees requeues it.
	if status.IsSuccess() || (rec.summary() == nil && denied == nil && !pl.refused.has(pod.UID)) {
		pl.blocked.forget(pod)
	}
	if !status.IsSuccess() && (rec.isBehind() || behindAtActuation(denied)) {
		pl.retryBehind(pod.UID)
	}
	if status.IsSuccess() && result != nil && result.NominatingInfo != nil {
		pl.reportExpendable(pod, result.NominatedNodeName, exp)
	}
	msg := status.Message()
	// A candidate whose victims the budgets denied at actuation was counted
	// and reported there, once; its preemptor is not counted again here.
	if !status.IsSuccess() && denied == nil {
		if blocked := rec.summary(); blocked != nil {
			reason, message := blocked.decision.Reason(), blocked.decision.Message()
			blockedTotal.WithLabelValues(string(reason)).Inc()
			note := "preemption blocked by disruption budgets on " + budget.Count(blocked.nodes, "node") + ": " + message
			pl.blockedEvent(pod, blocked.decision, note)
			klog.FromContext(ctx).V(2).Info("Preemption blocked by disruption budgets", "pod", klog.KObj(pod), "reason", reason, "message", message)
			if message == "" || !strings.Contains(msg, message) {
				// Upstream's count of node statuses names the budget
				// already when a node's status was the refusal; else
				// (the budget kept the pod out of a node whose status is
				// a filter's, "Insufficient cpu") the note names it.
				msg = appendNote(msg, note)
			}
		}
	}
	if !status.IsSuccess() {
		if r, s := pl.refusal(pod, denied != nil, msg, rec.summary() != nil); s != nil {
			return r, s
		}
	}
	if len(msg) > 0 {
		return result, fwk.NewStatus(status.Code(), "preemption: "+msg)
	}
	return result, status
}

// notSynced is PostFilter's answer while the budget cache is not synced:
// Unschedulable at once, naming the fault, with an event and the metric; the
// pod is requeued once the cache has synced.
func (pl *BudgetAwarePreemption) notSynced(ctx context.Context, pod *v1.Pod) (*fwk.PostFilterResult, *fwk.Status) {
	pl.blocked.add(pod)
	pl.requeueWhenSynced()
	reason, why := pl.budgets.NotSynced()
	if reason == "" {
		// Synced meanwhile: retry at once.
		pl.blocked.forget(pod)
		return nil, fwk.AsStatus(fmt.Errorf("preemption: %s", cacheNotSynced))
	}
	msg := fmt.Sprintf("budget cache not synced (%s: %s); the pod is retried once it is", reason, why)
	blockedTotal.WithLabelValues(reasonCacheNotSynced).Inc()
	pl.blockedEvent(pod, budget.Decision{}, msg)
	klog.FromContext(ctx).V(2).Info("Preemption refused: the budget cache is not synced", "pod", klog.KObj(pod), "reason", reason, "message", why)
	return nil, fwk.NewStatus(fwk.Unschedulable, "preemption: "+msg)
}

// blockedEvent records EventPreemptionBlockedByBudget on regarding (the
// preemptor or its PodGroup) with note, and the first budget that refused d
// as the related object, so that the events library keeps one series per
// budget instead of folding a refusal into an earlier one's note (see
// budget.Cache.EventRelated). A refusal by no budget (the cache not synced)
// has no related object.
func (pl *BudgetAwarePreemption) blockedEvent(regarding runtime.Object, d budget.Decision, note string) {
	var related runtime.Object
	if ref, ok := d.FirstDenied(); ok {
		related = pl.budgets.EventRelated(ref)
	}
	pl.fh.EventRecorder().Eventf(regarding, related, v1.EventTypeWarning, budget.EventPreemptionBlockedByBudget, "Preempting", note)
}

// reasonCacheNotSynced labels preemptions refused because the budget cache
// was not synced, as the evictor's refusals are labelled.
const reasonCacheNotSynced = "CacheNotSynced"

// PreEnqueue keeps a preemptor out of the scheduling cycle while its
// asynchronous preemption runs, as DefaultPreemption does.
func (pl *BudgetAwarePreemption) PreEnqueue(_ context.Context, p *v1.Pod) *fwk.Status {
	if pl.fts.EnableAsyncPreemption && pl.Executor.IsPodRunningPreemption(p.GetUID()) {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "waiting for the preemption for this pod to be finished")
	}
	return nil
}

// EventsToRegister registers pod deletion for the PreEnqueue gate; the hint
// always skips, leaving requeueing to the plugins that rejected the pod.
// Budget changes are not registered here: the queue never asks a PostFilter
// plugin's hints, so the plugin activates the preemptors that budgets
// blocked itself (requeue.go).
func (pl *BudgetAwarePreemption) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	if !pl.fts.EnableAsyncPreemption {
		return nil, nil
	}
	return []fwk.ClusterEventWithHint{{
		Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Delete},
		QueueingHintFn: func(klog.Logger, *v1.Pod, any, any) (fwk.QueueingHint, error) {
			return fwk.QueueSkip, nil
		},
	}}, nil
}

// victimClass orders potential victims for reprieve: the classes reprieved
// first are the ones most likely to stay.
type victimClass int

const (
	classDenied victimClass = iota // the budget denies it (BestEffort or override only)
	classSpends                    // allowed, spends a budget
	classFree                      // allowed, spends nothing
)

type potentialVictim struct {
	// v is the unit: a pod, or a PodGroup disrupted whole (units.go).
	v     *preemption.DomainVictim
	class victimClass
	d     budget.Decision
	// expendable is set for a unit of pods below
	// expendablePodsPriorityCutoff that a budget covers: it is free here,
	// and kept out of every budget plan.
	expendable bool
}

// SelectVictimsOnNode implements preemption.Interface. Like upstream it
// removes every lower-priority pod, checks that the preemptor fits, and
// reprieves as many pods as it can, most important first; but:
//   - a node cluster-autoscaler is draining (ToBeDeletedByClusterAutoscaler)
//     is never a candidate, whatever the preemptor tolerates;
//   - pods annotated safe-to-evict "false" are never victims (when honoured);
//   - in Strict mode, a pod its budget denies is never a victim, and the
//     victims are chosen so that every budget allows them together: when
//     such a set exists, one with the fewest spending victims is found
//     (see victimSearch); a node with none is not a candidate, and its
//     budgets are blamed only when they kept the preemptor out (see blame);
//   - victims that spend a budget are reprieved before victims that spend
//     none, so free victims (pods under no budget, unhealthy pods under
//     AlwaysAllow) are preferred;
//   - the returned count is denied*2^20 + spending victims, which the
//     Evaluator minimises first when it picks a node.
//
// On a node where no budget covers any potential victim, none of this
// changes the outcome, and it takes upstream's reprieve without deciding
// (reprieveUnbudgeted).
//
// The units are upstream's (preemption.Evaluator.GetVictimsOnNode): with the
// GenericWorkload gate, a PodGroup disrupted whole is one unit, its pods on
// other nodes included, and all its pods are decided together.
func (pl *BudgetAwarePreemption) SelectVictimsOnNode(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo, units []*preemption.DomainVictim, _ []*policy.PodDisruptionBudget) ([]*v1.Pod, int, *fwk.Status) {
	if budget.NodeBeingRemoved(nodeInfo.Node()) {
		// Victims here would make room on a node that is going away.
		return nil, 0, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msgNodeBeingRemoved)
	}
	if s := pl.refusedOn(pod, nodeInfo.Node().Name, pl.operation(pod), recorderFrom(state)); s != nil {
		return nil, 0, s
	}
	if unbudgeted, ok := pl.unbudgetedVictims(pod, units); ok {
		// No budget has a say on this node: upstream's reprieve, which is
		// what the rules above come to here (see reprieveUnbudgeted).
		t := nodeTrial{pl: pl, ctx: ctx, state: state, preemptor: pod, nodeInfo: nodeInfo, logger: klog.FromContext(ctx)}
		return t.reprieveUnbudgeted(unbudgeted)
	}
	return pl.selectDeciding(ctx, state, pod, nodeInfo, units)
}

// selectDeciding is SelectVictimsOnNode on a node it may take victims on
// where a budget covers a potential victim: each is decided, and the rules
// of SelectVictimsOnNode applied.
func (pl *BudgetAwarePreemption) selectDeciding(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo, units []*preemption.DomainVictim) ([]*v1.Pod, int, *fwk.Status) {
	strict := pl.strict(pod)
	op := pl.operation(pod)
	rec := recorderFrom(state)
	t := &nodeTrial{pl: pl, ctx: ctx, state: state, preemptor: pod, nodeInfo: nodeInfo, logger: klog.FromContext(ctx)}

	var potential, protected []potentialVictim
	prio := corev1helpers.PodPriority(pod)
	for _, v := range units {
		if !pl.mayTake(prio, v) {
			continue
		}
		var d budget.Decision
		expendable := pl.victimExpendable(v)
		if expendable {
			// Decided with its pods in the plan, to know whether a budget
			// covers them.
			plan := pl.budgets.NewPlan(op)
			for _, p := range victimPods(v) {
				dp := plan.Add(p)
				d.Spends = append(d.Spends, dp.Spends...)
				d.Denials = append(d.Denials, dp.Denials...)
			}
			d.Allowed = len(d.Denials) == 0
		} else {
			d = pl.decideVictim(v, op)
		}
		pv := potentialVictim{v: v, d: d, class: classFree}
		if expendable && !d.Free() {
			// Cluster-autoscaler assumes this pod may be preempted and will
			// not scale up for the preemptor: it goes, whatever its budget.
			pv.expendable = true
			decisionsTotal.WithLabelValues("expendable", "").Inc()
			potential = append(potential, pv)
			continue
		}
		switch {
		case !d.Allowed:
			decisionsTotal.WithLabelValues("denied", string(d.Reason())).Inc()
			if strict {
				protected = append(protected, pv)
				continue
			}
			pv.class = classDenied
		case len(d.Spends) > 0:
			decisionsTotal.WithLabelValues("spends", "").Inc()
			pv.class = classSpends
		default:
			decisionsTotal.WithLabelValues("free", "").Inc()
		}
		potential = append(potential, pv)
	}
	for _, pv := range potential {
		if err := t.remove(pv.v); err != nil {
			return nil, 0, fwk.AsStatus(err)
		}
	}
	if len(potential) == 0 {
		if len(protected) == 0 {
			return nil, 0, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "No preemption victims found for incoming pod")
		}
		d, err := t.blame(protected)
		if err != nil {
			return nil, 0, fwk.AsStatus(err)
		}
		if d == nil {
			return nil, 0, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msgNoFitWithoutAll)
		}
		rec.add(*d)
		return nil, 0, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msgAllProtected+d.Message())
	}
	if s := t.fits(); !s.IsSuccess() {
		if len(protected) > 0 {
			d, err := t.blame(protected)
			if err != nil {
				return nil, 0, fwk.AsStatus(err)
			}
			if d != nil {
				rec.add(*d)
			}
		}
		return nil, 0, s
	}

	sort.SliceStable(potential, func(i, j int) bool {
		if potential[i].class != potential[j].class {
			return potential[i].class < potential[j].class
		}
		return preemption.MoreImportantVictim(potential[i].v, potential[j].v)
	})
	var out []*v1.Pod
	var denied, spending int
	if strict {
		var s *fwk.Status
		if out, spending, s = pl.selectWithinBudgets(t, op, potential, rec); !s.IsSuccess() {
			return nil, 0, s
		}
	} else {
		var err error
		if out, denied, spending, err = pl.reprieveGreedily(t, op, potential); err != nil {
			return nil, 0, fwk.AsStatus(err)
		}
	}
	sortVictims(out, potential)
	expendableFrom(state).add(nodeInfo.Node().Name, out, potential)
	return out, denied*deniedWeight + spending, fwk.NewStatus(fwk.Success)
}

// reprieveGreedily is SelectVictimsOnNode's BestEffort mode (and an
// overriding preemptor's): upstream's reprieve, most important first, with
// the victims' budgets counted together afterwards. It returns the victims
// and how many of them their budgets deny and how many spend one.
func (pl *BudgetAwarePreemption) reprieveGreedily(t *nodeTrial, op budget.Operation, potential []potentialVictim) ([]*v1.Pod, int, int, error) {
	var victims []potentialVictim
	for _, pv := range potential {
		if err := t.add(pv.v); err != nil {
			return nil, 0, 0, err
		}
		if t.fits().IsSuccess() {
			continue
		}
		if err := t.remove(pv.v); err != nil {
			return nil, 0, 0, err
		}
		victims = append(victims, pv)
	}

	// The victims together: a plan spends budgets cumulatively.
	plan := pl.budgets.NewPlan(op)
	denied, spending := 0, 0
	out := make([]*v1.Pod, 0, len(victims))
	for _, pv := range victims {
		out = append(out, victimPods(pv.v)...)
		if pv.expendable {
			continue
		}
		d := pl.addVictim(plan, pv.v)
		switch {
		case !d.Allowed:
			denied++
		case len(d.Spends) > 0:
			spending++
		}
	}
	return out, denied, spending, nil
}

// sortVictims orders victims most important first, by their units in
// potential (upstream's order of victims); a group's pods stay together.
func sortVictims(victims []*v1.Pod, potential []potentialVictim) {
	unitOf := make(map[types.UID]*preemption.DomainVictim, len(victims))
	for _, pv := range potential {
		for _, pi := range pv.v.Pods() {
			unitOf[pi.GetPod().UID] = pv.v
		}
	}
	sort.SliceStable(victims, func(i, j int) bool {
		a, b := unitOf[victims[i].UID], unitOf[victims[j].UID]
		return a != b && a != nil && b != nil && preemption.MoreImportantVictim(a, b)
	})
}
