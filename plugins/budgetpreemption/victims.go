package budgetpreemption

import (
	"context"
	"slices"

	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/budgetguard/budgetguard/plugins/budget"
)

// maxSearchEvaluations bounds the filter evaluations the Strict victim search
// spends on one node. It only matters on nodes with very many spending pods;
// past it the search keeps the best set found so far, or finds none. It is a
// variable so that tests can lower it.
var maxSearchEvaluations = 2000

// nodeTrial removes and adds pods on a copy of a node and asks the filter
// plugins whether the preemptor fits there, counting the evaluations.
type nodeTrial struct {
	pl        *BudgetAwarePreemption
	ctx       context.Context
	state     fwk.CycleState
	preemptor *v1.Pod
	nodeInfo  fwk.NodeInfo
	logger    klog.Logger
	evals     int
}

// remove takes the pods of v off the trial: off the node when they run on
// it; a group's pods on other nodes only through the PreFilter extensions,
// with their own node, as upstream does (their NodeInfo is shared, and the
// filters run on this node only).
func (t *nodeTrial) remove(v *preemption.DomainVictim) error {
	for _, pi := range v.Pods() {
		p := pi.GetPod()
		ni := unitNode(v, t.nodeInfo, p)
		if ni == t.nodeInfo {
			if err := t.nodeInfo.RemovePod(t.logger, p); err != nil {
				return err
			}
		}
		if ni == nil {
			continue
		}
		if s := t.pl.fh.RunPreFilterExtensionRemovePod(t.ctx, t.state, t.preemptor, pi, ni); !s.IsSuccess() {
			return s.AsError()
		}
	}
	return nil
}

// add puts the pods of v back, as remove took them.
func (t *nodeTrial) add(v *preemption.DomainVictim) error {
	for _, pi := range v.Pods() {
		ni := unitNode(v, t.nodeInfo, pi.GetPod())
		if ni == t.nodeInfo {
			t.nodeInfo.AddPodInfo(pi)
		}
		if ni == nil {
			continue
		}
		if s := t.pl.fh.RunPreFilterExtensionAddPod(t.ctx, t.state, t.preemptor, pi, ni); !s.IsSuccess() {
			return s.AsError()
		}
	}
	return nil
}

// fits runs the filter plugins, nominated pods included.
func (t *nodeTrial) fits() *fwk.Status {
	t.evals++
	return t.pl.fh.RunFilterPluginsWithNominatedPods(t.ctx, t.state, t.preemptor, t.nodeInfo)
}

// victimSearch chooses, in Strict mode, which of the spending pods of a node
// are victims. Every potential victim has been removed from the node, and
// the preemptor fits. It is a depth-first branch and bound over the spending
// pods in reprieve order: each pod is first kept (when the preemptor still
// fits with it and the undecided pods removed), then taken as a victim (when
// the plan of the victims so far allows it too). Free pods stay removed, as
// they may always go. The first complete set found is upstream's greedy
// reprieve when the budgets allow it; from then on the search looks only for
// sets with fewer victims, so the set it returns has the fewest spending
// victims and, among those, reprieves the most important pods first. Like
// upstream's reprieve, it assumes that removing pods never stops the
// preemptor from fitting, so a victim needs no filter evaluation.
type victimSearch struct {
	*nodeTrial
	op    budget.Operation
	pods  []potentialVictim // the spending pods, in reprieve order
	path  []int             // the victims of the current branch (indices in pods)
	best  []int             // the victims of the best set found
	found bool
	// limited is set when the search stopped at maxSearchEvaluations.
	limited bool
	// denial is the first plan denial met: what kept a victim out.
	denial *budget.Decision
}

// run searches from the root; it returns the first error of the framework.
func (s *victimSearch) run() error { return s.visit(0) }

// planFor returns a plan with the pods at idx added in order and their
// decisions, or the first decision that denies one.
func (s *victimSearch) planFor(idx []int) (*budget.Plan, []budget.Decision, *budget.Decision) {
	plan := s.pl.budgets.NewPlan(s.op)
	ds := make([]budget.Decision, 0, len(idx))
	for _, i := range idx {
		d := s.pl.addVictim(plan, s.pods[i].v)
		if !d.Allowed {
			return plan, ds, &d
		}
		ds = append(ds, d)
	}
	return plan, ds, nil
}

// allowed reports whether the budgets allow the victims of the current
// branch together, and remembers the first denial.
func (s *victimSearch) allowed() bool {
	plan := s.pl.budgets.NewPlan(s.op)
	for _, i := range s.path {
		if d := s.pl.addVictim(plan, s.pods[i].v); !d.Allowed {
			if s.denial == nil {
				s.denial = &d
			}
			return false
		}
	}
	return true
}

func (s *victimSearch) record() {
	s.best = append(s.best[:0], s.path...)
	s.found = true
}

// lastVictim reports whether the current branch may take no further victim:
// only a set with fewer victims than the best one is worth finding.
func (s *victimSearch) lastVictim() bool {
	return s.found && len(s.path)+1 >= len(s.best)
}

// visit decides pods[i:], the pods before i decided as s.path says. On entry
// and on return the undecided pods are off the node and the preemptor fits.
func (s *victimSearch) visit(i int) error {
	if i == len(s.pods) {
		s.record()
		return nil
	}
	if s.evals >= maxSearchEvaluations {
		s.limited = true
		return nil
	}
	if s.lastVictim() {
		// Keep every remaining pod, or nothing better lies below.
		fits, err := s.restFits(i)
		if fits {
			s.record()
		}
		return err
	}

	// Keep pods[i].
	if err := s.add(s.pods[i].v); err != nil {
		return err
	}
	if s.fits().IsSuccess() {
		if err := s.visit(i + 1); err != nil {
			return err
		}
	}
	if err := s.remove(s.pods[i].v); err != nil {
		return err
	}
	if s.limited || s.lastVictim() {
		return nil
	}

	// Take pods[i] as a victim, if the budgets allow it with the others.
	s.path = append(s.path, i)
	defer func() { s.path = s.path[:len(s.path)-1] }()
	if s.lastVictim() && i+1 < len(s.pods) {
		// Every remaining pod must stay: check the room before the budgets.
		if s.evals >= maxSearchEvaluations {
			s.limited = true
			return nil
		}
		if fits, err := s.restFits(i + 1); !fits || err != nil {
			return err
		}
		if s.allowed() {
			s.record()
		}
		return nil
	}
	if !s.allowed() {
		return nil
	}
	return s.visit(i + 1)
}

// restFits reports whether the preemptor fits with pods[i:] kept too.
func (s *victimSearch) restFits(i int) (bool, error) {
	for _, pv := range s.pods[i:] {
		if err := s.add(pv.v); err != nil {
			return false, err
		}
	}
	fits := s.fits().IsSuccess()
	for _, pv := range s.pods[i:] {
		if err := s.remove(pv.v); err != nil {
			return false, err
		}
	}
	return fits, nil
}

// selectWithinBudgets is SelectVictimsOnNode's Strict mode, once every
// potential victim (ordered for reprieve: spending, then free) is off the
// node and the preemptor fits. It returns the victims and the number that
// spend a budget; when no set of victims is allowed, it records the denial
// that blocked them in rec.
func (pl *BudgetAwarePreemption) selectWithinBudgets(t *nodeTrial, op budget.Operation, potential []potentialVictim, rec *blockRecorder) ([]*v1.Pod, int, *fwk.Status) {
	split := len(potential)
	for i, pv := range potential {
		if pv.class == classFree {
			split = i
			break
		}
	}
	spending, free := potential[:split], potential[split:]
	blocked := func(d *budget.Decision) ([]*v1.Pod, int, *fwk.Status) {
		if d == nil {
			return nil, 0, fwk.NewStatus(fwk.Unschedulable, msgNoSetWithinBudgets)
		}
		rec.add(*d)
		return nil, 0, fwk.NewStatus(fwk.Unschedulable, msgExceedsBudget+d.Message())
	}

	s := &victimSearch{nodeTrial: t, op: op, pods: spending}
	t.evals = 0 // the bound counts the search's own evaluations
	if err := s.run(); err != nil {
		return nil, 0, fwk.AsStatus(err)
	}
	if s.limited {
		t.logger.V(4).Info("Victim search stopped at its bound; keeping the best set found so far",
			"pod", klog.KObj(t.preemptor), "node", klog.KObj(t.nodeInfo.Node()), "spendingPods", len(spending), "evaluations", t.evals, "found", s.found)
	}
	if !s.found {
		// s.denial is nil only when the bound stopped the search first.
		return blocked(s.denial)
	}

	// Put back the spending pods the best set keeps, then reprieve free pods
	// greedily, most important first, as upstream does.
	isVictim := make([]bool, len(spending))
	for _, i := range s.best {
		isVictim[i] = true
	}
	for i, pv := range spending {
		if !isVictim[i] {
			if err := t.add(pv.v); err != nil {
				return nil, 0, fwk.AsStatus(err)
			}
		}
	}
	plan, ds, denied := s.planFor(s.best)
	if denied != nil {
		// The budgets changed under the search.
		return blocked(denied)
	}
	nSpending := 0
	for _, d := range ds {
		if len(d.Spends) > 0 {
			nSpending++
		}
	}
	out := make([]*v1.Pod, 0, len(s.best)+len(free))
	for _, i := range s.best {
		out = append(out, victimPods(spending[i].v)...)
	}
	for _, pv := range free {
		if err := t.add(pv.v); err != nil {
			return nil, 0, fwk.AsStatus(err)
		}
		if t.fits().IsSuccess() {
			continue
		}
		if err := t.remove(pv.v); err != nil {
			return nil, 0, fwk.AsStatus(err)
		}
		if pv.expendable {
			out = append(out, victimPods(pv.v)...)
			continue
		}
		d := s.pl.addVictim(plan, pv.v)
		if !d.Allowed {
			return blocked(&d)
		}
		if len(d.Spends) > 0 {
			nSpending++
		}
		out = append(out, victimPods(pv.v)...)
	}
	return out, nSpending, fwk.NewStatus(fwk.Success)
}

// blame returns the denial to report for a node that is no candidate in
// Strict mode because of its denied pods, with every allowed victim off the
// node; nil when no budget kept the preemptor out. A budget is blamed only
// when removing the pods it protects (those whose every denial names it)
// would have let the preemptor fit: the first such budget, in the order the
// denied pods are met. When no single budget's pods would do but all the
// denied pods together would, the budgets kept the preemptor out together,
// and the decision returned carries a denial of each. When the preemptor
// does not fit even with every denied pod removed, nothing is blamed. The
// node is left as it was found.
func (t *nodeTrial) blame(denied []potentialVictim) (*budget.Decision, error) {
	var refs []budget.BudgetRef
	seen := map[budget.BudgetRef]bool{}
	for _, pv := range denied {
		for _, den := range pv.d.Denials {
			for _, ref := range den.Budgets {
				if !seen[ref] {
					seen[ref] = true
					refs = append(refs, ref)
				}
			}
		}
	}
	for _, ref := range refs {
		var pods []potentialVictim
		for _, pv := range denied {
			if protectsOnly(pv.d, ref) {
				pods = append(pods, pv)
			}
		}
		if len(pods) == 0 {
			continue
		}
		fits, err := t.fitsWithout(pods)
		if err != nil || fits {
			d := pods[0].d
			return &d, err
		}
	}
	fits, err := t.fitsWithout(denied)
	if err != nil || !fits {
		return nil, err
	}
	together := budget.Decision{}
	for _, ref := range refs {
		if den, ok := denialOf(denied, ref); ok {
			together.Denials = append(together.Denials, den)
		}
	}
	return &together, nil
}

// protectsOnly reports whether every denial of d names ref: whether the pod
// could go if ref allowed it.
func protectsOnly(d budget.Decision, ref budget.BudgetRef) bool {
	if len(d.Denials) == 0 {
		return false
	}
	for _, den := range d.Denials {
		if !slices.Contains(den.Budgets, ref) {
			return false
		}
	}
	return true
}

// denialOf returns the first denial among denied that names ref.
func denialOf(denied []potentialVictim, ref budget.BudgetRef) (budget.Denial, bool) {
	for _, pv := range denied {
		for _, den := range pv.d.Denials {
			if slices.Contains(den.Budgets, ref) {
				return den, true
			}
		}
	}
	return budget.Denial{}, false
}

// fitsWithout reports whether the preemptor fits with pods removed too,
// and puts them back.
func (t *nodeTrial) fitsWithout(pods []potentialVictim) (bool, error) {
	for _, pv := range pods {
		if err := t.remove(pv.v); err != nil {
			return false, err
		}
	}
	fits := t.fits().IsSuccess()
	for _, pv := range pods {
		if err := t.add(pv.v); err != nil {
			return false, err
		}
	}
	return fits, nil
}
