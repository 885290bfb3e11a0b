package budgetpreemption

import (
	"context"
	"errors"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// groupTrial removes and puts back units on the scheduler's mutable
// snapshot, which the pod group's scheduling function reads, and reprieves
// them as upstream's gang preemption does (preemption.PodGroupEvaluator):
// the scheduling function runs once, with every candidate off the
// snapshot, and a unit is reprieved when every pod of the group still
// passes the filters on the node it was planned on.
type groupTrial struct {
	pl     *BudgetAwarePreemption
	logger klog.Logger
	snap   fwk.MutableSnapshotSharedLister
	// planned are the assignments of the last fitting run, the group's
	// pods that got a node.
	planned []fwk.ProposedAssignment
}

func (t *groupTrial) remove(u *victimUnit) error {
	for _, pi := range u.v.Pods() {
		if err := t.snap.RemovePod(t.logger, pi.GetPod(), pi.GetPod().Spec.NodeName); err != nil {
			return err
		}
	}
	return nil
}

func (t *groupTrial) restore(u *victimUnit) error {
	for _, pi := range u.v.Pods() {
		if err := t.snap.AddPod(pi, pi.GetPod().Spec.NodeName); err != nil {
			return err
		}
	}
	return nil
}

// fits runs the scheduling function on the snapshot as it is, and keeps
// the assignments it proposes when the group fits.
func (t *groupTrial) fits(ctx context.Context, schedule fwk.PodGroupSchedulingFunc) *fwk.Status {
	a, s := schedule(ctx)
	if !s.IsSuccess() {
		return s
	}
	t.planned = t.planned[:0]
	if a != nil {
		for _, pa := range a.ProposedAssignments {
			if pa.GetNodeName() != "" {
				t.planned = append(t.planned, pa)
			}
		}
	}
	return s
}

// node returns the snapshot's NodeInfo of name.
func (t *groupTrial) node(name string) (fwk.NodeInfo, error) {
	ni, err := t.snap.NodeInfos().Get(name)
	if err == nil && ni == nil {
		err = errors.New("node " + name + " is not in the snapshot")
	}
	return ni, err
}

// prefilter tells the PreFilter extensions of every planned pod's cycle
// state that u's pods came back (add) or went again.
func (t *groupTrial) prefilter(ctx context.Context, u *victimUnit, add bool) error {
	fh := t.pl.fh
	for _, pi := range u.v.Pods() {
		ni, err := t.node(pi.GetPod().Spec.NodeName)
		if err != nil {
			return err
		}
		for _, a := range t.planned {
			var s *fwk.Status
			if add {
				s = fh.RunPreFilterExtensionAddPod(ctx, a.GetCycleState(), a.GetPod(), pi, ni)
			} else {
				s = fh.RunPreFilterExtensionRemovePod(ctx, a.GetCycleState(), a.GetPod(), pi, ni)
			}
			if !s.IsSuccess() {
				return s.AsError()
			}
		}
	}
	return nil
}

// reprieve puts u back and keeps it when every planned pod still passes
// the filters on its planned node, the pods planned before it assumed
// there as the scheduling function had them; otherwise it takes u off
// again. It reports whether u stays.
func (t *groupTrial) reprieve(ctx context.Context, u *victimUnit) (bool, error) {
	if err := t.restore(u); err != nil {
		return false, err
	}
	if err := t.prefilter(ctx, u, true); err != nil {
		return false, err
	}
	fits, err := t.plannedFit(ctx)
	if err != nil || fits {
		return fits, err
	}
	if err := t.remove(u); err != nil {
		return false, err
	}
	return false, t.prefilter(ctx, u, false)
}

// plannedFit runs the filters for every planned pod on its node, assuming
// (and reserving) each after it passes, and takes them all back after.
func (t *groupTrial) plannedFit(ctx context.Context) (fits bool, err error) {
	fh := t.pl.fh
	var assumed []fwk.ProposedAssignment
	defer func() {
		for i := len(assumed) - 1; i >= 0; i-- {
			a := assumed[i]
			fh.RunReservePluginsUnreserve(ctx, a.GetCycleState(), a.GetPod(), a.GetNodeName())
			if rerr := t.snap.RemovePod(t.logger, a.GetPod(), a.GetNodeName()); rerr != nil && err == nil {
				err = rerr
			}
		}
	}()
	for _, a := range t.planned {
		ni, err := t.node(a.GetNodeName())
		if err != nil {
			return false, err
		}
		if !fh.RunFilterPluginsWithNominatedPods(ctx, a.GetCycleState(), a.GetPod(), ni).IsSuccess() {
			return false, nil
		}
		if err := t.snap.AddPod(a.GetPodInfo(), a.GetNodeName()); err != nil {
			return false, err
		}
		assumed = append(assumed, a)
		fh.RunReservePluginsReserve(ctx, a.GetCycleState(), a.GetPod(), a.GetNodeName())
	}
	return true, nil
}

// nominations are the nodes the last fitting run proposed for the group's
// pods.
func (t *groupTrial) nominations() *fwk.PodGroupPostFilterResult {
	n := make(map[types.NamespacedName]*fwk.NominatingInfo, len(t.planned))
	for _, a := range t.planned {
		p := a.GetPod()
		n[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = &fwk.NominatingInfo{NominatingMode: fwk.ModeOverride, NominatedNodeName: a.GetNodeName()}
	}
	return &fwk.PodGroupPostFilterResult{NominatingInfos: n}
}

// chooseUnits removes every candidate, runs the scheduling function once,
// and reprieves candidates in their order where the group's planned pods
// still fit. It leaves the snapshot as it found it; t keeps the plan.
func (pl *BudgetAwarePreemption) chooseUnits(ctx context.Context, t *groupTrial, candidates []*victimUnit, schedule fwk.PodGroupSchedulingFunc) (victims []*victimUnit, _ *fwk.Status, err error) {
	for _, u := range candidates {
		if err := t.remove(u); err != nil {
			return nil, nil, err
		}
	}
	off := candidates
	defer func() {
		for _, u := range off {
			if rerr := t.restore(u); rerr != nil && err == nil {
				err = rerr
			}
		}
	}()
	if s := t.fits(ctx, schedule); !s.IsSuccess() {
		return nil, s, nil
	}
	off = nil
	for i, u := range candidates {
		stays, err := t.reprieve(ctx, u)
		if err != nil {
			// Off the snapshot: the victims so far and the candidates not
			// tried yet (u's state is unknown: it is left to EndMutations).
			off = append(victims, candidates[i+1:]...)
			return nil, nil, err
		}
		if !stays {
			victims = append(victims, u)
		}
	}
	off = victims
	// No victim at all: the group fits as the cluster is (upstream also
	// succeeds then, and the group is tried again).
	return append([]*victimUnit(nil), victims...), fwk.NewStatus(fwk.Success), nil
}
