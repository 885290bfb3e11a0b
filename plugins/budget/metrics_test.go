package budget

import (
	"context"
	"strings"
	"testing"

	"k8s.io/component-base/metrics/testutil"
)

func TestGaugesReportLedgerAndBudgetsPerComponent(t *testing.T) {
	cc := newCacheCollector()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	sched := newHarness(t)
	sched.add(webPDB("web", pdbStatus{healthy: 3, desired: 1, allowed: 2}).Obj(),
		webPDB("db", pdbStatus{healthy: 3, desired: 2, allowed: 1}).MatchLabels("app", "db").Obj(),
		pub("web", pdbStatus{healthy: 3, desired: 1, allowed: 2}).MatchLabels("app", "web").Obj())
	if d, r := sched.c.Reserve(webPod("a").Obj(), OperationEvict); !d.Allowed || r == nil {
		t.Fatalf("reserve a: %+v", d)
	}
	desched := newHarness(t)
	desched.add(webPDB("web", pdbStatus{healthy: 3, desired: 2, allowed: 1}).Obj())
	cc.add(ctx, sched.c, "scheduler")
	cc.add(ctx, desched.c, "descheduler")

	want := `
# HELP budgetguard_cache_budgets [ALPHA] Disruption budgets in budgetguard's cache, by kind (PodDisruptionBudget, PodUnavailableBudget).
# TYPE budgetguard_cache_budgets gauge
budgetguard_cache_budgets{component="descheduler",kind="PodDisruptionBudget"} 1
budgetguard_cache_budgets{component="descheduler",kind="PodUnavailableBudget"} 0
budgetguard_cache_budgets{component="scheduler",kind="PodDisruptionBudget"} 2
budgetguard_cache_budgets{component="scheduler",kind="PodUnavailableBudget"} 1
# HELP budgetguard_cache_ledger_reservations [ALPHA] Disruptions budgetguard has started and reserved in its ledger that no budget status counts yet.
# TYPE budgetguard_cache_ledger_reservations gauge
budgetguard_cache_ledger_reservations{component="descheduler"} 0
budgetguard_cache_ledger_reservations{component="scheduler"} 2
`
	// a is covered by pdb web and pub web: one reservation entry per budget.
	if err := testutil.CustomCollectAndCompare(cc, strings.NewReader(want), "budgetguard_cache_budgets", "budgetguard_cache_ledger_reservations"); err != nil {
		t.Fatal(err)
	}
}
