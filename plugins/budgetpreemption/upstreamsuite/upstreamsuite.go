// Package upstreamsuite lets Kubernetes' own preemption test suites run
// against BudgetAwarePreemption: hack/upstream-preemption.sh builds them
// with the in-tree registry's DefaultPreemption entry pointing at one of
// the factories here, which map DefaultPreemptionArgs onto
// BudgetAwarePreemptionArgs and keep the in-tree plugin name. It lives
// outside internal/ because k8s.io/kubernetes' registry imports it then.
package upstreamsuite

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"

	"github.com/budgetguard/budgetguard/plugins/budgetpreemption"
)

// StrictEvict builds BudgetAwarePreemption with its defaults: Strict, Evict.
// Its signature is the in-tree DefaultPreemption factory's.
func StrictEvict(ctx context.Context, obj runtime.Object, fh fwk.Handle, fts feature.Features) (fwk.Plugin, error) {
	return build(ctx, obj, fh, budgetpreemption.ModeStrict, budgetpreemption.ActuationEvict)
}

// BestEffortDelete builds BudgetAwarePreemption in BestEffort mode with
// Delete actuation, the closest to upstream's.
func BestEffortDelete(ctx context.Context, obj runtime.Object, fh fwk.Handle, fts feature.Features) (fwk.Plugin, error) {
	return build(ctx, obj, fh, budgetpreemption.ModeBestEffort, budgetpreemption.ActuationDelete)
}

func build(ctx context.Context, obj runtime.Object, fh fwk.Handle, mode budgetpreemption.Mode, actuation budgetpreemption.Actuation) (fwk.Plugin, error) {
	{
		args := budgetpreemption.DefaultArgs()
		args.Mode, args.Actuation = mode, actuation
		switch a := obj.(type) {
		case nil:
		case *config.DefaultPreemptionArgs:
			args.MinCandidateNodesPercentage = a.MinCandidateNodesPercentage
			args.MinCandidateNodesAbsolute = a.MinCandidateNodesAbsolute
		default:
			return nil, fmt.Errorf("want args of type DefaultPreemptionArgs, got %T", obj)
		}
		pl, err := budgetpreemption.New(ctx, args, fh)
		if err != nil {
			return nil, err
		}
		return &inTreeName{pl.(*budgetpreemption.BudgetAwarePreemption)}, nil
	}
}

// inTreeName is BudgetAwarePreemption under the name the suites configure.
type inTreeName struct {
	*budgetpreemption.BudgetAwarePreemption
}

// Name is DefaultPreemption's.
func (inTreeName) Name() string { return "DefaultPreemption" }
