package budget

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// outcome is what a rules case asserts: allowed or not, which budgets are
// spent, and the reason code of the first denial.
type outcome struct {
	Allowed bool
	Spends  []string
	Reason  Reason
}

func outcomeOf(d Decision) outcome {
	o := outcome{Allowed: d.Allowed, Reason: d.Reason()}
	for _, s := range d.Spends {
		o.Spends = append(o.Spends, s.String())
	}
	return o
}

var (
	allowedFree = outcome{Allowed: true}
	spendsWeb   = outcome{Allowed: true, Spends: []string{"pdb shop/web"}}
)

func denied(r Reason) outcome { return outcome{Reason: r} }

type ruleCase struct {
	name string
	objs []any
	pod  *v1.Pod
	op   Operation // default Evict
	want outcome
	// msg, when set, must appear in the denial message.
	msg string
}

func runRuleCases(t *testing.T, cases []ruleCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.add(tc.objs...)
			op := tc.op
			if op == "" {
				op = OperationEvict
			}
			d := h.c.Decide(tc.pod, op)
			if diff := cmp.Diff(tc.want, outcomeOf(d)); diff != "" {
				t.Errorf("decision (-want,+got):\n%s\nmessage: %s", diff, d.Message())
			}
			if tc.msg != "" && !strings.Contains(d.Message(), tc.msg) {
				t.Errorf("message %q does not contain %q", d.Message(), tc.msg)
			}
			if !d.Allowed && d.Message() == "" {
				t.Errorf("a denial must explain itself")
			}
		})
	}
}

var exhausted = pdbStatus{healthy: 2, desired: 2, allowed: 0}
var oneLeft = pdbStatus{healthy: 3, desired: 2, allowed: 1}

func TestRule1TerminalAndTerminatingPods(t *testing.T) {
	runRuleCases(t, []ruleCase{
		{name: "running pod under exhausted PDB is denied", objs: []any{mkPDB("web", appWeb(), exhausted)},
			pod: mkPod("a"), want: denied(ReasonInsufficientBudget)},
		{name: "terminating pod may go", objs: []any{mkPDB("web", appWeb(), exhausted)},
			pod: mkPod("a", terminating), want: allowedFree},
		{name: "pending pod may go", objs: []any{mkPDB("web", appWeb(), exhausted)},
			pod: mkPod("a", phase(v1.PodPending)), want: allowedFree},
		{name: "succeeded pod may go", objs: []any{mkPDB("web", appWeb(), exhausted)},
			pod: mkPod("a", phase(v1.PodSucceeded)), want: allowedFree},
		{name: "failed pod may go even with two PDBs", objs: []any{mkPDB("web", appWeb(), exhausted), mkPDB("all", &metav1.LabelSelector{}, exhausted)},
			pod: mkPod("a", phase(v1.PodFailed)), want: allowedFree},
	})
}

func TestRule2Selectors(t *testing.T) {
	bad := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Bogus", Values: []string{"x"}}}}
	runRuleCases(t, []ruleCase{
		{name: "empty selector covers an unlabeled pod and denies", objs: []any{mkPDB("web", &metav1.LabelSelector{}, exhausted)},
			pod: mkPod("a", labelsOf()), want: denied(ReasonInsufficientBudget)},
		{name: "empty selector covers an unlabeled pod and spends", objs: []any{mkPDB("web", &metav1.LabelSelector{}, oneLeft)},
			pod: mkPod("a", labelsOf()), want: spendsWeb},
		{name: "nil selector covers nothing", objs: []any{mkPDB("web", nil, exhausted)},
			pod: mkPod("a"), want: allowedFree},
		{name: "invalid selector covers nothing", objs: []any{mkPDB("web", bad, exhausted)},
			pod: mkPod("a"), want: allowedFree},
		{name: "selector of another app does not cover", objs: []any{mkPDB("web", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}, exhausted)},
			pod: mkPod("a"), want: allowedFree},
		{name: "matchExpressions selector covers", objs: []any{mkPDB("web", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpExists}}}, exhausted)},
			pod: mkPod("a"), want: denied(ReasonInsufficientBudget)},
		{name: "two PDBs on one pod deny", objs: []any{mkPDB("web", appWeb(), oneLeft), mkPDB("all", &metav1.LabelSelector{}, oneLeft)},
			pod: mkPod("a"), want: denied(ReasonMultiplePDBs), msg: "2 PodDisruptionBudgets"},
		{name: "PDB in another namespace does not cover", objs: []any{func() *policyv1.PodDisruptionBudget {
			p := mkPDB("web", appWeb(), exhausted)
			p.Namespace = "other"
			return p
		}()}, pod: mkPod("a"), want: allowedFree},
	})
}

func TestRule3UnhealthyPodEvictionPolicy(t *testing.T) {
	disruptedApp := pdbStatus{healthy: 1, desired: 2, allowed: 0}
	healthyApp := pdbStatus{healthy: 2, desired: 2, allowed: 0}
	runRuleCases(t, []ruleCase{
		{name: "AlwaysAllow lets a not-ready pod go free although the app is disrupted",
			objs: []any{mkPDB("web", appWeb(), disruptedApp, policy(policyv1.AlwaysAllow))},
			pod:  mkPod("a", notReady), want: allowedFree},
		{name: "AlwaysAllow still protects a ready pod",
			objs: []any{mkPDB("web", appWeb(), disruptedApp, policy(policyv1.AlwaysAllow))},
			pod:  mkPod("a"), want: denied(ReasonInsufficientBudget)},
		{name: "IfHealthyBudget lets a not-ready pod go free when the app is healthy",
			objs: []any{mkPDB("web", appWeb(), healthyApp, policy(policyv1.IfHealthyBudget))},
			pod:  mkPod("a", notReady), want: allowedFree},
		{name: "IfHealthyBudget protects a not-ready pod while the app is disrupted",
			objs: []any{mkPDB("web", appWeb(), disruptedApp, policy(policyv1.IfHealthyBudget))},
			pod:  mkPod("a", notReady), want: denied(ReasonInsufficientBudget), msg: "not ready and the application is disrupted"},
		{name: "nil policy lets a not-ready pod go free when the app is healthy",
			objs: []any{mkPDB("web", appWeb(), healthyApp)},
			pod:  mkPod("a", notReady), want: allowedFree},
		{name: "nil policy protects a not-ready pod while the app is disrupted",
			objs: []any{mkPDB("web", appWeb(), disruptedApp)},
			pod:  mkPod("a", notReady), want: denied(ReasonInsufficientBudget)},
		{name: "unknown policy refuses a not-ready pod",
			objs: []any{mkPDB("web", appWeb(), healthyApp, policy("SometimesAllow"))},
			pod:  mkPod("a", notReady), want: denied(ReasonUnknownUnhealthyPodEvictionPolicy), msg: `"SometimesAllow"`},
		{name: "unknown policy does not concern a ready pod",
			objs: []any{mkPDB("web", appWeb(), oneLeft, policy("SometimesAllow"))},
			pod:  mkPod("a"), want: spendsWeb},
		{name: "healthy >= desired with desired 0 is not free and needs the budget: denied",
			objs: []any{mkPDB("web", appWeb(), pdbStatus{healthy: 0, desired: 0, allowed: 0})},
			pod:  mkPod("a", notReady), want: denied(ReasonInsufficientBudget)},
		{name: "healthy >= desired with desired 0 is not free and needs the budget: spends",
			objs: []any{mkPDB("web", appWeb(), pdbStatus{healthy: 1, desired: 0, allowed: 1})},
			pod:  mkPod("a", notReady), want: spendsWeb},
	})
}

func TestRule4StatusChecks(t *testing.T) {
	stale := func(p *policyv1.PodDisruptionBudget) { p.Generation = 2 }
	negative := pdbStatus{healthy: 1, desired: 2, allowed: -1}
	many := make([]string, MaxDisruptedPods+1)
	for i := range many {
		many[i] = fmt.Sprintf("gone-%d", i)
	}
	runRuleCases(t, []ruleCase{
		{name: "budget left: spends", objs: []any{mkPDB("web", appWeb(), oneLeft)},
			pod: mkPod("a"), want: spendsWeb},
		{name: "no budget left: denied with the numbers", objs: []any{mkPDB("web", appWeb(), exhausted)},
			pod: mkPod("a"), want: denied(ReasonInsufficientBudget), msg: "pdb shop/web: 2 healthy, 2 desired, 0 disruptions allowed"},
		{name: "observedGeneration < generation: denied as stale", objs: []any{mkPDB("web", appWeb(), oneLeft, stale)},
			pod: mkPod("a"), want: denied(ReasonStaleStatus), msg: "observedGeneration 1 < generation 2"},
		{name: "stale status does not block a free unhealthy pod", objs: []any{mkPDB("web", appWeb(), oneLeft, stale, policy(policyv1.AlwaysAllow))},
			pod: mkPod("a", notReady), want: allowedFree},
		{name: "negative disruptionsAllowed: denied", objs: []any{mkPDB("web", appWeb(), negative)},
			pod: mkPod("a"), want: denied(ReasonNegativeAllowed)},
		{name: "more than 2000 disrupted pods: denied", objs: []any{mkPDB("web", appWeb(), oneLeft, disrupted(many...))},
			pod: mkPod("a"), want: denied(ReasonTooManyDisruptedPods)},
		{name: "exactly 2000 disrupted pods: spends", objs: []any{mkPDB("web", appWeb(), oneLeft, disrupted(many[:MaxDisruptedPods]...))},
			pod: mkPod("a"), want: spendsWeb},
		{name: "pod already in DisruptedPods: a delete spends nothing new", objs: []any{mkPDB("web", appWeb(), exhausted, disrupted("a"))},
			pod: mkPod("a"), op: OperationDelete, want: allowedFree},
		{name: "pod already in DisruptedPods: an eviction is charged again", objs: []any{mkPDB("web", appWeb(), exhausted, disrupted("a"))},
			pod: mkPod("a"), op: OperationEvict, want: denied(ReasonInsufficientBudget)},
		{name: "pod already in DisruptedPods: an eviction spends when budget is left", objs: []any{mkPDB("web", appWeb(), oneLeft, disrupted("a"))},
			pod: mkPod("a"), op: OperationEvict, want: spendsWeb},
	})
}

func TestRule5PodUnavailableBudgets(t *testing.T) {
	pubOK := pdbStatus{healthy: 3, desired: 2, allowed: 1}
	pubNone := pdbStatus{healthy: 2, desired: 2, allowed: 0}
	spendsPUB := outcome{Allowed: true, Spends: []string{"pub shop/web"}}
	runRuleCases(t, []ruleCase{
		{name: "by selector: spends", objs: []any{mkPUB("web", pubOK, pubSelector(appWeb()))},
			pod: mkPod("a"), want: spendsPUB},
		{name: "by selector: denied with the numbers", objs: []any{mkPUB("web", pubNone, pubSelector(appWeb()))},
			pod: mkPod("a"), want: denied(ReasonInsufficientBudget), msg: "pub shop/web: 2 available, 2 desired, 0 unavailable allowed"},
		{name: "nil selector covers nothing", objs: []any{mkPUB("web", pubNone)},
			pod: mkPod("a"), want: allowedFree},
		{name: "by targetRef through ReplicaSet to Deployment: denied",
			objs: []any{deployment("web"), replicaSet("web-5d8f", "web"), mkPUB("web", pubNone, pubTarget("apps/v1", "Deployment", "web"))},
			pod:  mkPod("a", labelsOf(), ownedBy("apps/v1", "ReplicaSet", "web-5d8f")), want: denied(ReasonInsufficientBudget)},
		{name: "by targetRef through ReplicaSet to Deployment: spends",
			objs: []any{deployment("web"), replicaSet("web-5d8f", "web"), mkPUB("web", pubOK, pubTarget("apps/v1", "Deployment", "web"))},
			pod:  mkPod("a", labelsOf(), ownedBy("apps/v1", "ReplicaSet", "web-5d8f")), want: spendsPUB},
		{name: "by targetRef to a Deployment that was recreated does not cover the old pods",
			objs: []any{func() any { d := deployment("web"); d.UID = "new"; return d }(), replicaSet("web-5d8f", "web"), mkPUB("web", pubNone, pubTarget("apps/v1", "Deployment", "web"))},
			pod:  mkPod("a", labelsOf(), ownedBy("apps/v1", "ReplicaSet", "web-5d8f")), want: allowedFree},
		{name: "by targetRef to the direct owner: denied",
			objs: []any{statefulSet("db"), mkPUB("web", pubNone, pubTarget("apps/v1", "StatefulSet", "db"))},
			pod:  mkPod("a", labelsOf(), ownedBy("apps/v1", "StatefulSet", "db")), want: denied(ReasonInsufficientBudget)},
		{name: "by targetRef to the direct owner of another kind does not cover",
			objs: []any{statefulSet("db"), mkPUB("web", pubNone, pubTarget("apps/v1", "Deployment", "db"))},
			pod:  mkPod("a", labelsOf(), ownedBy("apps/v1", "StatefulSet", "db")), want: allowedFree},
		{name: "targetRef takes priority over selector",
			objs: []any{mkPUB("web", pubNone, pubSelector(appWeb()), pubTarget("apps/v1", "StatefulSet", "db"))},
			pod:  mkPod("a"), want: allowedFree},
		{name: "by kruise.io/related-pub: denied", objs: []any{mkPUB("web", pubNone)},
			pod: mkPod("a", labelsOf(), annotate(AnnotationRelatedPUB, "web")), want: denied(ReasonInsufficientBudget)},
		{name: "by kruise.io/related-pub: spends", objs: []any{mkPUB("web", pubOK)},
			pod: mkPod("a", labelsOf(), annotate(AnnotationRelatedPUB, "web")), want: spendsPUB},
		{name: "pub.kruise.io/no-protect exempts the pod", objs: []any{mkPUB("web", pubNone, pubSelector(appWeb()))},
			pod: mkPod("a", annotate(AnnotationPUBNoProtect, "true")), want: allowedFree},
		{name: "protect-operations without EVICT lets an eviction go",
			objs: []any{mkPUB("web", pubNone, pubSelector(appWeb()), pubAnnotate(AnnotationPUBProtectOperations, "DELETE,UPDATE"))},
			pod:  mkPod("a"), op: OperationEvict, want: allowedFree},
		{name: "protect-operations with DELETE protects a preemption delete",
			objs: []any{mkPUB("web", pubNone, pubSelector(appWeb()), pubAnnotate(AnnotationPUBProtectOperations, "DELETE,UPDATE"))},
			pod:  mkPod("a"), op: OperationDelete, want: denied(ReasonInsufficientBudget)},
		{name: "protect-operations without DELETE lets a preemption delete go",
			objs: []any{mkPUB("web", pubNone, pubSelector(appWeb()), pubAnnotate(AnnotationPUBProtectOperations, "EVICT"))},
			pod:  mkPod("a"), op: OperationDelete, want: allowedFree},
		{name: "not-ready pod spends nothing", objs: []any{mkPUB("web", pubNone, pubSelector(appWeb()))},
			pod: mkPod("a", notReady), want: allowedFree},
		{name: "desiredAvailable 0 spends nothing", objs: []any{mkPUB("web", pdbStatus{healthy: 0, desired: 0, allowed: 0}, pubSelector(appWeb()))},
			pod: mkPod("a"), want: allowedFree},
		{name: "pod in DisruptedPods spends nothing new", objs: []any{mkPUB("web", pubNone, pubSelector(appWeb()), pubRecorded("a", ""))},
			pod: mkPod("a"), want: allowedFree},
		{name: "pod in UnavailablePods spends nothing new", objs: []any{mkPUB("web", pubNone, pubSelector(appWeb()), pubRecorded("", "a"))},
			pod: mkPod("a"), want: allowedFree},
	})
}

func TestRule6EveryBudgetMustAllow(t *testing.T) {
	pubOK := pdbStatus{healthy: 3, desired: 2, allowed: 1}
	pubNone := pdbStatus{healthy: 2, desired: 2, allowed: 0}
	runRuleCases(t, []ruleCase{
		{name: "PDB and PUB both allow: both spent",
			objs: []any{mkPDB("web", appWeb(), oneLeft), mkPUB("web", pubOK, pubSelector(appWeb()))},
			pod:  mkPod("a"), want: outcome{Allowed: true, Spends: []string{"pdb shop/web", "pub shop/web"}}},
		{name: "PDB allows, PUB denies: denied, naming the PUB",
			objs: []any{mkPDB("web", appWeb(), oneLeft), mkPUB("web", pubNone, pubSelector(appWeb()))},
			pod:  mkPod("a"), want: denied(ReasonInsufficientBudget), msg: "pub shop/web"},
		{name: "PDB denies, PUB allows: denied, naming the PDB",
			objs: []any{mkPDB("web", appWeb(), exhausted), mkPUB("web", pubOK, pubSelector(appWeb()))},
			pod:  mkPod("a"), want: denied(ReasonInsufficientBudget), msg: "pdb shop/web"},
	})
}

func TestBothDenialsAreReported(t *testing.T) {
	h := newHarness(t)
	h.add(mkPDB("web", appWeb(), exhausted), mkPUB("web", pdbStatus{2, 2, 0}, pubSelector(appWeb())))
	d := h.c.Decide(mkPod("a"), OperationEvict)
	if len(d.Denials) != 2 {
		t.Fatalf("want a denial from the PDB and one from the PUB, got %v", d.Denials)
	}
}

func TestAutoscalerForbidsEviction(t *testing.T) {
	for _, tc := range []struct {
		value string
		set   bool
		want  bool
	}{{"false", true, true}, {"true", true, false}, {"", false, false}, {"False", true, false}} {
		p := mkPod("a")
		if tc.set {
			annotate(AnnotationSafeToEvict, tc.value)(p)
		}
		if got := AutoscalerForbidsEviction(p); got != tc.want {
			t.Errorf("safe-to-evict=%q (set=%v): got %v, want %v", tc.value, tc.set, got, tc.want)
		}
	}
}
