package budget

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kruisebeta "github.com/budgetguard/budgetguard/apis/kruise/policy/v1beta1"
	"github.com/budgetguard/budgetguard/internal/testobj"
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
		{name: "running pod under exhausted PDB is denied", objs: []any{webPDB("web", exhausted).Obj()},
			pod: webPod("a").Obj(), want: denied(ReasonInsufficientBudget)},
		{name: "terminating pod may go", objs: []any{webPDB("web", exhausted).Obj()},
			pod: webPod("a").Terminating(epoch).Obj(), want: allowedFree},
		{name: "pending pod may go", objs: []any{webPDB("web", exhausted).Obj()},
			pod: webPod("a").Phase(v1.PodPending).Obj(), want: allowedFree},
		{name: "succeeded pod may go", objs: []any{webPDB("web", exhausted).Obj()},
			pod: webPod("a").Phase(v1.PodSucceeded).Obj(), want: allowedFree},
		{name: "failed pod may go even with two PDBs", objs: []any{webPDB("web", exhausted).Obj(), webPDB("all", exhausted).Selector(&metav1.LabelSelector{}).Obj()},
			pod: webPod("a").Phase(v1.PodFailed).Obj(), want: allowedFree},
	})
}

func TestRule2Selectors(t *testing.T) {
	bad := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Bogus", Values: []string{"x"}}}}
	runRuleCases(t, []ruleCase{
		{name: "empty selector covers an unlabeled pod and denies", objs: []any{webPDB("web", exhausted).Selector(&metav1.LabelSelector{}).Obj()},
			pod: testobj.RunningPod(ns, "a").Obj(), want: denied(ReasonInsufficientBudget)},
		{name: "empty selector covers an unlabeled pod and spends", objs: []any{webPDB("web", oneLeft).Selector(&metav1.LabelSelector{}).Obj()},
			pod: testobj.RunningPod(ns, "a").Obj(), want: spendsWeb},
		{name: "nil selector covers nothing", objs: []any{webPDB("web", exhausted).Selector(nil).Obj()},
			pod: webPod("a").Obj(), want: allowedFree},
		{name: "invalid selector covers nothing", objs: []any{webPDB("web", exhausted).Selector(bad).Obj()},
			pod: webPod("a").Obj(), want: allowedFree},
		{name: "selector of another app does not cover", objs: []any{webPDB("web", exhausted).MatchLabels("app", "db").Obj()},
			pod: webPod("a").Obj(), want: allowedFree},
		{name: "matchExpressions selector covers", objs: []any{webPDB("web", exhausted).Selector(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpExists}}}).Obj()},
			pod: webPod("a").Obj(), want: denied(ReasonInsufficientBudget)},
		{name: "two PDBs on one pod deny", objs: []any{webPDB("web", oneLeft).Obj(), webPDB("all", oneLeft).Selector(&metav1.LabelSelector{}).Obj()},
			pod: webPod("a").Obj(), want: denied(ReasonMultiplePDBs), msg: "pod shop/a is covered by 2 PodDisruptionBudgets (pdb shop/all, pdb shop/web); "},
		{name: "PDB in another namespace does not cover", objs: []any{webPDB("web", exhausted).Namespace("other").Obj()},
			pod: webPod("a").Obj(), want: allowedFree},
	})
}

func TestRule3UnhealthyPodEvictionPolicy(t *testing.T) {
	disruptedApp := pdbStatus{healthy: 1, desired: 2, allowed: 0}
	healthyApp := pdbStatus{healthy: 2, desired: 2, allowed: 0}
	runRuleCases(t, []ruleCase{
		{name: "AlwaysAllow lets a not-ready pod go free although the app is disrupted",
			objs: []any{webPDB("web", disruptedApp).UnhealthyPodEvictionPolicy(policyv1.AlwaysAllow).Obj()},
			pod:  webPod("a").Ready(false).Obj(), want: allowedFree},
		{name: "AlwaysAllow still protects a ready pod",
			objs: []any{webPDB("web", disruptedApp).UnhealthyPodEvictionPolicy(policyv1.AlwaysAllow).Obj()},
			pod:  webPod("a").Obj(), want: denied(ReasonInsufficientBudget)},
		{name: "IfHealthyBudget lets a not-ready pod go free when the app is healthy",
			objs: []any{webPDB("web", healthyApp).UnhealthyPodEvictionPolicy(policyv1.IfHealthyBudget).Obj()},
			pod:  webPod("a").Ready(false).Obj(), want: allowedFree},
		{name: "IfHealthyBudget protects a not-ready pod while the app is disrupted",
			objs: []any{webPDB("web", disruptedApp).UnhealthyPodEvictionPolicy(policyv1.IfHealthyBudget).Obj()},
			pod:  webPod("a").Ready(false).Obj(), want: denied(ReasonInsufficientBudget), msg: "not ready and the application is disrupted"},
		{name: "nil policy lets a not-ready pod go free when the app is healthy",
			objs: []any{webPDB("web", healthyApp).Obj()},
			pod:  webPod("a").Ready(false).Obj(), want: allowedFree},
		{name: "nil policy protects a not-ready pod while the app is disrupted",
			objs: []any{webPDB("web", disruptedApp).Obj()},
			pod:  webPod("a").Ready(false).Obj(), want: denied(ReasonInsufficientBudget)},
		{name: "unknown policy refuses a not-ready pod",
			objs: []any{webPDB("web", healthyApp).UnhealthyPodEvictionPolicy("SometimesAllow").Obj()},
			pod:  webPod("a").Ready(false).Obj(), want: denied(ReasonUnknownUnhealthyPodEvictionPolicy), msg: `"SometimesAllow"`},
		{name: "unknown policy does not concern a ready pod",
			objs: []any{webPDB("web", oneLeft).UnhealthyPodEvictionPolicy("SometimesAllow").Obj()},
			pod:  webPod("a").Obj(), want: spendsWeb},
		{name: "healthy >= desired with desired 0 is not free and needs the budget: denied",
			objs: []any{webPDB("web", pdbStatus{healthy: 0, desired: 0, allowed: 0}).Obj()},
			pod:  webPod("a").Ready(false).Obj(), want: denied(ReasonInsufficientBudget)},
		{name: "healthy >= desired with desired 0 is not free and needs the budget: spends",
			objs: []any{webPDB("web", pdbStatus{healthy: 1, desired: 0, allowed: 1}).Obj()},
			pod:  webPod("a").Ready(false).Obj(), want: spendsWeb},
	})
}

func TestRule4StatusChecks(t *testing.T) {
	negative := pdbStatus{healthy: 1, desired: 2, allowed: -1}
	many := make([]string, MaxDisruptedPods+1)
	for i := range many {
		many[i] = fmt.Sprintf("gone-%d", i)
	}
	runRuleCases(t, []ruleCase{
		{name: "budget left: spends", objs: []any{webPDB("web", oneLeft).Obj()},
			pod: webPod("a").Obj(), want: spendsWeb},
		{name: "no budget left: denied with the numbers", objs: []any{webPDB("web", exhausted).Obj()},
			pod: webPod("a").Obj(), want: denied(ReasonInsufficientBudget), msg: "pdb shop/web: 2 healthy, 2 desired, 0 disruptions allowed"},
		{name: "observedGeneration < generation: denied as stale", objs: []any{webPDB("web", oneLeft).Generation(2).Obj()},
			pod: webPod("a").Obj(), want: denied(ReasonStaleStatus), msg: "observedGeneration 1 < generation 2"},
		{name: "stale status does not block a free unhealthy pod", objs: []any{webPDB("web", oneLeft).Generation(2).UnhealthyPodEvictionPolicy(policyv1.AlwaysAllow).Obj()},
			pod: webPod("a").Ready(false).Obj(), want: allowedFree},
		{name: "negative disruptionsAllowed: denied", objs: []any{webPDB("web", negative).Obj()},
			pod: webPod("a").Obj(), want: denied(ReasonNegativeAllowed)},
		{name: "more than 2000 disrupted pods: denied", objs: []any{webPDB("web", oneLeft).Disrupted(epoch, many...).Obj()},
			pod: webPod("a").Obj(), want: denied(ReasonTooManyDisruptedPods)},
		{name: "exactly 2000 disrupted pods: spends", objs: []any{webPDB("web", oneLeft).Disrupted(epoch, many[:MaxDisruptedPods]...).Obj()},
			pod: webPod("a").Obj(), want: spendsWeb},
		{name: "pod already in DisruptedPods: a delete spends nothing new", objs: []any{webPDB("web", exhausted).Disrupted(epoch, "a").Obj()},
			pod: webPod("a").Obj(), op: OperationDelete, want: allowedFree},
		{name: "pod already in DisruptedPods: an eviction is charged again", objs: []any{webPDB("web", exhausted).Disrupted(epoch, "a").Obj()},
			pod: webPod("a").Obj(), op: OperationEvict, want: denied(ReasonInsufficientBudget)},
		{name: "pod already in DisruptedPods: an eviction spends when budget is left", objs: []any{webPDB("web", oneLeft).Disrupted(epoch, "a").Obj()},
			pod: webPod("a").Obj(), op: OperationEvict, want: spendsWeb},
	})
}

func TestRule5PodUnavailableBudgets(t *testing.T) {
	spendsPUB := outcome{Allowed: true, Spends: []string{"pub shop/web"}}
	web := testobj.MakeDeployment().Namespace(ns).Name("web").UID("uid-web").Obj()
	recreatedWeb := testobj.MakeDeployment().Namespace(ns).Name("web").UID("new").Obj()
	webRS := testobj.MakeReplicaSet().Namespace(ns).Name("web-5d8f").UID("uid-web-5d8f").OwnedBy("apps/v1", "Deployment", web.Name, web.UID).Obj()
	db := testobj.MakeStatefulSet().Namespace(ns).Name("db").UID("uid-db").Obj()
	// Unlabeled pods of webRS and of db.
	podOfWebRS := func() *v1.Pod {
		return testobj.RunningPod(ns, "a").OwnedBy("apps/v1", "ReplicaSet", webRS.Name, webRS.UID).Obj()
	}
	podOfDB := func() *v1.Pod {
		return testobj.RunningPod(ns, "a").OwnedBy("apps/v1", "StatefulSet", db.Name, db.UID).Obj()
	}
	runRuleCases(t, []ruleCase{
		{name: "by selector: spends", objs: []any{pub("web", oneLeft).MatchLabels("app", "web").Obj()},
			pod: webPod("a").Obj(), want: spendsPUB},
		{name: "by selector: denied with the numbers", objs: []any{pub("web", exhausted).MatchLabels("app", "web").Obj()},
			pod: webPod("a").Obj(), want: denied(ReasonInsufficientBudget), msg: "pub shop/web: 2 available, 2 desired, 0 unavailable allowed"},
		{name: "nil selector covers nothing", objs: []any{pub("web", exhausted).Obj()},
			pod: webPod("a").Obj(), want: allowedFree},
		{name: "by targetRef through ReplicaSet to Deployment: denied",
			objs: []any{web, webRS, pub("web", exhausted).TargetRef("apps/v1", "Deployment", "web").Obj()},
			pod:  podOfWebRS(), want: denied(ReasonInsufficientBudget)},
		{name: "by targetRef through ReplicaSet to Deployment: spends",
			objs: []any{web, webRS, pub("web", oneLeft).TargetRef("apps/v1", "Deployment", "web").Obj()},
			pod:  podOfWebRS(), want: spendsPUB},
		{name: "by targetRef to a Deployment that was recreated does not cover the old pods",
			objs: []any{recreatedWeb, webRS, pub("web", exhausted).TargetRef("apps/v1", "Deployment", "web").Obj()},
			pod:  podOfWebRS(), want: allowedFree},
		{name: "by targetRef to the direct owner: denied",
			objs: []any{db, pub("web", exhausted).TargetRef("apps/v1", "StatefulSet", "db").Obj()},
			pod:  podOfDB(), want: denied(ReasonInsufficientBudget)},
		{name: "by targetRef to the direct owner of another kind does not cover",
			objs: []any{db, pub("web", exhausted).TargetRef("apps/v1", "Deployment", "db").Obj()},
			pod:  podOfDB(), want: allowedFree},
		{name: "targetRef takes priority over selector",
			objs: []any{pub("web", exhausted).MatchLabels("app", "web").TargetRef("apps/v1", "StatefulSet", "db").Obj()},
			pod:  webPod("a").Obj(), want: allowedFree},
		{name: "by kruise.io/related-pub: denied", objs: []any{pub("web", exhausted).Obj()},
			pod: testobj.RunningPod(ns, "a").Annotation(AnnotationRelatedPUB, "web").Obj(), want: denied(ReasonInsufficientBudget)},
		{name: "by pub.kruise.io/related-pub: denied", objs: []any{pub("web", exhausted).Obj()},
			pod: testobj.RunningPod(ns, "a").Annotation(AnnotationPodRelatedPUB, "web").Obj(), want: denied(ReasonInsufficientBudget)},
		{name: "pub.kruise.io/related-pub wins over kruise.io/related-pub", objs: []any{pub("web", exhausted).Obj(), pub("old", oneLeft).Obj()},
			pod: testobj.RunningPod(ns, "a").Annotation(AnnotationPodRelatedPUB, "web").Annotation(AnnotationRelatedPUB, "old").Obj(), want: denied(ReasonInsufficientBudget)},
		{name: "by kruise.io/related-pub: spends", objs: []any{pub("web", oneLeft).Obj()},
			pod: testobj.RunningPod(ns, "a").Annotation(AnnotationRelatedPUB, "web").Obj(), want: spendsPUB},
		{name: "pub.kruise.io/no-protect exempts the pod", objs: []any{pub("web", exhausted).MatchLabels("app", "web").Obj()},
			pod: webPod("a").Annotation(AnnotationPUBNoProtect, "true").Obj(), want: allowedFree},
		{name: "protect-operations without EVICT lets an eviction go",
			objs: []any{pub("web", exhausted).MatchLabels("app", "web").Annotation(AnnotationPUBProtectOperations, "DELETE,UPDATE").Obj()},
			pod:  webPod("a").Obj(), op: OperationEvict, want: allowedFree},
		{name: "protect-operations with DELETE protects a preemption delete",
			objs: []any{pub("web", exhausted).MatchLabels("app", "web").Annotation(AnnotationPUBProtectOperations, "DELETE,UPDATE").Obj()},
			pod:  webPod("a").Obj(), op: OperationDelete, want: denied(ReasonInsufficientBudget)},
		{name: "protect-operations without DELETE lets a preemption delete go",
			objs: []any{pub("web", exhausted).MatchLabels("app", "web").Annotation(AnnotationPUBProtectOperations, "EVICT").Obj()},
			pod:  webPod("a").Obj(), op: OperationDelete, want: allowedFree},
		{name: "not-ready pod spends nothing", objs: []any{pub("web", exhausted).MatchLabels("app", "web").Obj()},
			pod: webPod("a").Ready(false).Obj(), want: allowedFree},
		{name: "desiredAvailable 0 spends nothing", objs: []any{pub("web", pdbStatus{healthy: 0, desired: 0, allowed: 0}).MatchLabels("app", "web").Obj()},
			pod: webPod("a").Obj(), want: allowedFree},
		{name: "pod in DisruptedPods spends nothing new", objs: []any{pub("web", exhausted).MatchLabels("app", "web").Disrupted(epoch, "a").Obj()},
			pod: webPod("a").Obj(), want: allowedFree},
		{name: "pod in UnavailablePods spends nothing new", objs: []any{pub("web", exhausted).MatchLabels("app", "web").Unavailable(epoch, "a").Obj()},
			pod: webPod("a").Obj(), want: allowedFree},
	})
}

// betaPUB is pub in the v1beta1 shape, with edit applied to its spec.
func betaPUB(t *testing.T, w *testobj.PUBWrapper, edit func(*kruisebeta.PodUnavailableBudgetSpec)) *PUB {
	t.Helper()
	p, err := kruisebeta.FromV1alpha1(w.Obj())
	if err != nil {
		t.Fatal(err)
	}
	edit(&p.Spec)
	return p
}

// TestRule5PodUnavailableBudgetsV1beta1: the fields of v1beta1 decide as
// OpenKruise's webhook reads them (pubcontrol's getPubProtectOperations,
// isPodMatchedIgnoredPubSelector, isPodNoProtection).
func TestRule5PodUnavailableBudgetsV1beta1(t *testing.T) {
	ops := func(o ...kruisebeta.PubOperation) func(*kruisebeta.PodUnavailableBudgetSpec) {
		return func(s *kruisebeta.PodUnavailableBudgetSpec) { s.ProtectOperations = o }
	}
	ignore := func(sel *metav1.LabelSelector) func(*kruisebeta.PodUnavailableBudgetSpec) {
		return func(s *kruisebeta.PodUnavailableBudgetSpec) { s.IgnoredPodSelector = sel }
	}
	web := func() *testobj.PUBWrapper { return pub("web", exhausted).MatchLabels("app", "web") }
	canary := &metav1.LabelSelector{MatchLabels: map[string]string{"track": "canary"}}
	runRuleCases(t, []ruleCase{
		{name: "protectOperations EVICT protects an eviction", objs: []any{betaPUB(t, web(), ops(kruisebeta.PubEvictOperation))},
			pod: webPod("a").Obj(), op: OperationEvict, want: denied(ReasonInsufficientBudget)},
		{name: "protectOperations EVICT lets a preemption delete go", objs: []any{betaPUB(t, web(), ops(kruisebeta.PubEvictOperation))},
			pod: webPod("a").Obj(), op: OperationDelete, want: allowedFree},
		{name: "protectOperations RESIZE alone protects neither", objs: []any{betaPUB(t, web(), ops(kruisebeta.PubResizeOperation))},
			pod: webPod("a").Obj(), op: OperationEvict, want: allowedFree},
		{name: "protectOperations wins over the annotation",
			objs: []any{betaPUB(t, web().Annotation(AnnotationPUBProtectOperations, "EVICT"), ops(kruisebeta.PubDeleteOperation))},
			pod:  webPod("a").Obj(), op: OperationEvict, want: allowedFree},
		{name: "no protectOperations: the annotation decides",
			objs: []any{betaPUB(t, web().Annotation(AnnotationPUBProtectOperations, "EVICT"), ops())},
			pod:  webPod("a").Obj(), op: OperationDelete, want: allowedFree},
		{name: "an annotation that does not parse still protects what it names",
			objs: []any{web().Annotation(AnnotationPUBProtectOperations, "EVICT,KILL").Obj()},
			pod:  webPod("a").Obj(), op: OperationEvict, want: denied(ReasonInsufficientBudget)},
		{name: "ignoredPodSelector exempts the pods it selects", objs: []any{betaPUB(t, web(), ignore(canary))},
			pod: webPod("a").Label("track", "canary").Obj(), want: allowedFree},
		{name: "ignoredPodSelector leaves the others protected", objs: []any{betaPUB(t, web(), ignore(canary))},
			pod: webPod("a").Label("track", "stable").Obj(), want: denied(ReasonInsufficientBudget)},
		{name: "an empty ignoredPodSelector selects nothing", objs: []any{betaPUB(t, web(), ignore(&metav1.LabelSelector{}))},
			pod: webPod("a").Obj(), want: denied(ReasonInsufficientBudget)},
		{name: "an ignoredPodSelector that does not parse refuses, as Kruise's webhook errs",
			objs: []any{betaPUB(t, pub("web", oneLeft).MatchLabels("app", "web"), ignore(&metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "track", Operator: "Near"}}}))},
			pod: webPod("a").Obj(), want: denied(ReasonInvalidPUB), msg: "pub shop/web: spec.ignoredPodSelector"},
		{name: "pub.kruise.io/no-protect is read as a boolean", objs: []any{web().Obj()},
			pod: webPod("a").Annotation(AnnotationPUBNoProtect, "True").Obj(), want: allowedFree},
		{name: "pub.kruise.io/no-protect that is no boolean protects", objs: []any{web().Obj()},
			pod: webPod("a").Annotation(AnnotationPUBNoProtect, "yes").Obj(), want: denied(ReasonInsufficientBudget)},
	})
}

func TestRule6EveryBudgetMustAllow(t *testing.T) {
	runRuleCases(t, []ruleCase{
		{name: "PDB and PUB both allow: both spent",
			objs: []any{webPDB("web", oneLeft).Obj(), pub("web", oneLeft).MatchLabels("app", "web").Obj()},
			pod:  webPod("a").Obj(), want: outcome{Allowed: true, Spends: []string{"pdb shop/web", "pub shop/web"}}},
		{name: "PDB allows, PUB denies: denied, naming the PUB",
			objs: []any{webPDB("web", oneLeft).Obj(), pub("web", exhausted).MatchLabels("app", "web").Obj()},
			pod:  webPod("a").Obj(), want: denied(ReasonInsufficientBudget), msg: "pub shop/web"},
		{name: "PDB denies, PUB allows: denied, naming the PDB",
			objs: []any{webPDB("web", exhausted).Obj(), pub("web", oneLeft).MatchLabels("app", "web").Obj()},
			pod:  webPod("a").Obj(), want: denied(ReasonInsufficientBudget), msg: "pdb shop/web"},
	})
}

// Preemption's Delete actuation evicts a pod whose disruption spends a PDB
// and deletes any other: its PUBs are decided under the operation it
// undergoes, which OpenKruise's webhook then sees.
func TestDeleteOrEvictDecidesPUBsUnderTheOperationThePodUndergoes(t *testing.T) {
	evictOnly := func() *testobj.PUBWrapper {
		return pub("web", exhausted).MatchLabels("app", "web").Annotation(AnnotationPUBProtectOperations, "EVICT")
	}
	deleteOnly := pub("web", exhausted).MatchLabels("app", "web").Annotation(AnnotationPUBProtectOperations, "DELETE")
	runRuleCases(t, []ruleCase{
		{name: "spends a PDB: evicted, so an EVICT-only PUB protects it",
			objs: []any{webPDB("web", oneLeft).Obj(), evictOnly().Obj()},
			pod:  webPod("a").Obj(), op: OperationDeleteOrEvict, want: denied(ReasonInsufficientBudget), msg: "pub shop/web"},
		{name: "spends a PDB: evicted, so a DELETE-only PUB lets it go",
			objs: []any{webPDB("web", oneLeft).Obj(), deleteOnly.Obj()},
			pod:  webPod("a").Obj(), op: OperationDeleteOrEvict, want: outcome{Allowed: true, Spends: []string{"pdb shop/web"}}},
		{name: "no PDB: deleted, which an EVICT-only PUB does not protect",
			objs: []any{evictOnly().Obj()},
			pod:  webPod("a").Obj(), op: OperationDeleteOrEvict, want: allowedFree},
	})
}

func TestBothDenialsAreReported(t *testing.T) {
	h := newHarness(t)
	h.add(webPDB("web", exhausted).Obj(), pub("web", pdbStatus{2, 2, 0}).MatchLabels("app", "web").Obj())
	d := h.c.Decide(webPod("a").Obj(), OperationEvict)
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
		p := webPod("a")
		if tc.set {
			p.Annotation(AnnotationSafeToEvict, tc.value)
		}
		if got := AutoscalerForbidsEviction(p.Obj()); got != tc.want {
			t.Errorf("safe-to-evict=%q (set=%v): got %v, want %v", tc.value, tc.set, got, tc.want)
		}
	}
}

// TestRefusalSeparatesPlanFromInFlight checks the sentence of an
// insufficient budget: disruptions already started (reservations in the
// ledger) are "in flight"; earlier victims of the same plan are not, and
// the sentence says how many disruptions the plan needs.
func TestRefusalSeparatesPlanFromInFlight(t *testing.T) {
	tests := []struct {
		name     string
		pdb      pdbStatus
		pub      bool // a PUB with the same numbers in place of the PDB
		reserved []string
		planned  []string
		want     string
	}{
		{
			name:    "a plan of two under a budget of one",
			pdb:     pdbStatus{healthy: 4, desired: 3, allowed: 1},
			planned: []string{"a"},
			want:    "pdb shop/web: 4 healthy, 3 desired, 1 disruption allowed; needs 2 (this pod and 1 other of the same disruption)",
		},
		{
			name:     "another disruption in flight, alone",
			pdb:      pdbStatus{healthy: 4, desired: 3, allowed: 1},
			reserved: []string{"x"},
			want:     "pdb shop/web: 4 healthy, 3 desired, 1 disruption allowed, 1 in flight",
		},
		{
			name:     "another disruption in flight and a plan of three",
			pdb:      pdbStatus{healthy: 5, desired: 2, allowed: 3},
			reserved: []string{"x"},
			planned:  []string{"a", "b"},
			want:     "pdb shop/web: 5 healthy, 2 desired, 3 disruptions allowed, 1 in flight; needs 3 (this pod and 2 others of the same disruption)",
		},
		{
			name:    "a PUB: a plan of two under a budget of one",
			pdb:     pdbStatus{healthy: 4, desired: 3, allowed: 1},
			pub:     true,
			planned: []string{"a"},
			want:    "pub shop/web: 4 available, 3 desired, 1 unavailable allowed; needs 2 (this pod and 1 other of the same disruption)",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			if tc.pub {
				h.add(pub("web", tc.pdb).MatchLabels("app", "web").Obj())
			} else {
				h.add(webPDB("web", tc.pdb).Obj())
			}
			for _, name := range tc.reserved {
				if d, r := h.c.Reserve(webPod(name).Obj(), OperationEvict); !d.Allowed || r == nil {
					t.Fatalf("reserve %s: %s", name, d.Message())
				}
			}
			p := h.c.NewPlan(OperationEvict)
			for _, name := range tc.planned {
				mustAllow(t, p.Add(webPod(name).Obj()))
			}
			d := p.Add(webPod("last").Obj())
			mustDeny(t, d, ReasonInsufficientBudget)
			if diff := cmp.Diff(tc.want, d.Message()); diff != "" {
				t.Errorf("message (-want,+got):\n%s", diff)
			}
		})
	}
}
