package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/budgetguard/budgetguard/internal/testenv"
)

// TestPreemptionRefusalClearsNomination: in BestEffort mode the preemptor
// needs two victims under a budget that allows one; the API server refuses
// the second eviction. The scheduler itself then leaves the preemptor with
// no nominatedNodeName and PodScheduled=False, reason Unschedulable, with
// the budget in the message (what cluster-autoscaler scales up for), and
// nothing writes the nomination back.
func TestPreemptionRefusalClearsNomination(t *testing.T) {
	a := refusedByAPIServer(t)
	ns, web := a.ns, a.web
	budgetName := "pdb " + ns + "/web"
	unnominated := func(ctx context.Context) (bool, error) {
		p, err := cp.Client.CoreV1().Pods(ns).Get(ctx, "preemptor", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Spec.NodeName != "" || p.Status.NominatedNodeName != "" {
			return false, nil
		}
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodScheduled {
				return c.Status == v1.ConditionFalse && c.Reason == v1.PodReasonUnschedulable && strings.Contains(c.Message, budgetName), nil
			}
		}
		return false, nil
	}
	testenv.WaitFor(t, testenv.DefaultWait, "the preemptor unnominated and Unschedulable, naming "+budgetName, unnominated)
	testenv.Holds(t, settle, "the preemptor stays unnominated and Unschedulable, naming "+budgetName, unnominated)
	testenv.Holds(t, time.Second, "at most 1 web pod is disrupted", goneAtMost(ns, web, 1))
}
