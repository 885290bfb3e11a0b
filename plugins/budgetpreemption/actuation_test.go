package budgetpreemption

import (
	"context"
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"

	"github.com/budgetguard/budgetguard/plugins/budget"
)

type testCandidate struct {
	name    string
	victims []*v1.Pod
}

func (c *testCandidate) Victims() *extenderv1.Victims { return &extenderv1.Victims{Pods: c.victims} }
func (c *testCandidate) Name() string                 { return c.name }

// testPreemptor is a single-pod preemptor, as the Executor passes it.
type testPreemptor struct{ *v1.Pod }

func (p testPreemptor) UID() types.UID           { return p.Pod.UID }
func (p testPreemptor) SchedulerName() string    { return p.Spec.SchedulerName }
func (p testPreemptor) Obj() runtime.Object      { return p.Pod }
func (p testPreemptor) Pods() map[string]*v1.Pod { return map[string]*v1.Pod{p.Name: p.Pod} }
func (p testPreemptor) Priority() int32          { return *p.Spec.Priority }
func (p testPreemptor) Type() string             { return "pod" }
func (p testPreemptor) GetName() string          { return p.Name }
func (p testPreemptor) GetNamespace() string     { return p.Namespace }

var _ preemption.ExecutorPreemptor = testPreemptor{}

// TestActuationReservesAcrossCycles: the victims of one preemption are
// reserved in the ledger before they are actuated, so the next cycle's
// candidate cannot spend the same budget; a failed actuation gives the
// budget back.
func TestActuationReservesAcrossCycles(t *testing.T) {
	pods := replicas("web", "n1", "web", true, 3, 2, 1, 0)
	args := DefaultArgs()
	args.Actuation = ActuationDelete
	e := newEnv(t, args, []*v1.Node{node("n1")}, pods, []*policyv1.PodDisruptionBudget{appPDB("web", 4, 3, 1).Obj()})
	var deleted []string
	fail := false
	e.pl.deletePod = func(_ context.Context, _ preemption.Candidate, _ preemption.ExecutorPreemptor, victim *v1.Pod, _ string) error {
		if fail {
			return apierrors.NewTooManyRequests("simulated", 10)
		}
		deleted = append(deleted, victim.Name)
		return nil
	}
	first := testPreemptor{preemptor("1", 100)}
	second := testPreemptor{preemptor("1", 100)}
	second.Name, second.Pod.UID = "second", "second"

	// Cycle 1: web-3 within the budget of 1.
	if err := e.pl.preemptPod(e.ctx, &testCandidate{"n1", pods[3:4]}, first, pods[3], Name); err != nil {
		t.Fatalf("first preemption: %v", err)
	}
	if got := e.budgets.InFlight(); got != 1 {
		t.Errorf("ledger holds %d reservations after the first preemption, want 1", got)
	}
	// Cycle 2, before any status update: web-2 would spend the same budget.
	err := e.pl.preemptPod(e.ctx, &testCandidate{"n1", pods[2:3]}, second, pods[2], Name)
	var denied *budget.DeniedError
	if !errors.As(err, &denied) || denied.Decision.Reason() != budget.ReasonInsufficientBudget {
		t.Fatalf("second preemption: error %v, want a DeniedError for InsufficientBudget", err)
	}
	if want := []string{"web-3"}; len(deleted) != 1 || deleted[0] != want[0] {
		t.Errorf("deleted %v, want %v", deleted, want)
	}
}

// TestActuationFailureCancelsReservation: when the API server refuses a
// victim, its reservation is cancelled at once.
func TestActuationFailureCancelsReservation(t *testing.T) {
	pods := replicas("web", "n1", "web", true, 0, 0)
	args := DefaultArgs()
	args.Actuation = ActuationDelete
	e := newEnv(t, args, []*v1.Node{node("n1")}, pods, []*policyv1.PodDisruptionBudget{appPDB("web", 2, 1, 1).Obj()})
	e.pl.deletePod = func(context.Context, preemption.Candidate, preemption.ExecutorPreemptor, *v1.Pod, string) error {
		return apierrors.NewTooManyRequests("simulated", 10)
	}
	p := testPreemptor{preemptor("1", 100)}
	err := e.pl.preemptPod(e.ctx, &testCandidate{"n1", pods[:1]}, p, pods[0], Name)
	if !apierrors.IsTooManyRequests(err) {
		t.Fatalf("error %v, want the 429", err)
	}
	if got := e.budgets.InFlight(); got != 0 {
		t.Errorf("ledger holds %d reservations after the failure, want 0", got)
	}
	if d := e.budgets.Decide(pods[1], budget.OperationDelete); !d.Allowed {
		t.Errorf("budget not given back: %s", d.Message())
	}
}
