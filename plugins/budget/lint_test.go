package budget

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	kruisepolicy "github.com/openkruise/kruise-api/policy/v1alpha1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	kruisebeta "github.com/budgetguard/budgetguard/apis/kruise/policy/v1beta1"
	"github.com/budgetguard/budgetguard/internal/testobj"
)

// lintOf adds objs to a harness and lints them; it returns each finding as
// "severity code objects".
func lintOf(t *testing.T, objs ...any) []string {
	t.Helper()
	h := newHarness(t)
	var in LintInput
	for _, o := range objs {
		switch o := o.(type) {
		case *v1.Pod:
			in.Pods = append(in.Pods, o)
		case *policyv1.PodDisruptionBudget:
			in.PDBs = append(in.PDBs, o)
			h.add(o)
		case *kruisepolicy.PodUnavailableBudget:
			p, _ := PUBOf(o)
			in.PUBs = append(in.PUBs, p)
			h.add(o)
		case *PUB:
			in.PUBs = append(in.PUBs, o)
			h.add(o)
		default:
			h.add(o)
		}
	}
	var got []string
	for _, f := range h.c.Lint(in) {
		names := make([]string, 0, len(f.Objects))
		for _, o := range f.Objects {
			names = append(names, o.Kind+"/"+o.Name)
		}
		if f.Message == "" || f.Fix == "" {
			t.Errorf("finding %s has no message or no fix: %+v", f.Code, f)
		}
		got = append(got, fmt.Sprintf("%s %s %s", f.Severity, f.Code, strings.Join(names, ",")))
	}
	return got
}

func TestLint(t *testing.T) {
	rsPod := func(name string) *testobj.PodWrapper {
		return webPod(name).OwnedBy("apps/v1", "ReplicaSet", "web-1", "uid-rs")
	}
	cases := []struct {
		name string
		objs []any
		want []string
	}{
		{name: "clean: one PDB, enough pods",
			objs: []any{webPDB("web", oneLeft).Obj(), webPod("a").Obj(), webPod("b").Obj(), webPod("c").Obj()}},
		{name: "overlapping pair of PDBs",
			objs: []any{webPDB("web", oneLeft).Obj(), webPDB("all", oneLeft).Selector(&metav1.LabelSelector{}).Obj(), webPod("a").Obj(), webPod("b").Obj(), webPod("c").Obj()},
			want: []string{"error MultiplePDBs PodDisruptionBudget/all,PodDisruptionBudget/web,Pod/a,Pod/b,Pod/c"}},
		{name: "minAvailable equal to the pods",
			objs: []any{webPDB("web", exhausted).Obj(), webPod("a").Obj(), webPod("b").Obj()},
			want: []string{"error NeverAllowsDisruption PodDisruptionBudget/web"}},
		{name: "maxUnavailable 0% over a ReplicaSet's pods",
			objs: []any{webPDB("web", exhausted).MaxUnavailableValue(intstr.FromString("0%")).Obj(), rsPod("a").Obj()},
			want: []string{"error NeverAllowsDisruption PodDisruptionBudget/web"}},
		{name: "minAvailable 90% of 3 pods rounds up to 3",
			objs: []any{webPDB("web", exhausted).MinAvailableValue(intstr.FromString("90%")).Obj(), rsPod("a").Obj(), rsPod("b").Obj(), rsPod("c").Obj()},
			want: []string{"error NeverAllowsDisruption PodDisruptionBudget/web"}},
		{name: "maxUnavailable over bare pods",
			objs: []any{webPDB("web", oneLeft).MaxUnavailable(1).Obj(), webPod("a").Obj()},
			want: []string{"error NoScalableController PodDisruptionBudget/web,Pod/a"}},
		{name: "maxUnavailable over a custom controller's pods",
			objs: []any{webPDB("web", oneLeft).MaxUnavailable(1).Obj(), webPod("a").OwnedBy("example.com/v1", "Widget", "w", "uid-w").Obj()},
			want: []string{"warning NoScalableController PodDisruptionBudget/web,Pod/a"}},
		{name: "role-level PDB over two workloads with maxUnavailable is clean",
			objs: []any{webPDB("role", oneLeft).MaxUnavailable(1).Obj(), rsPod("a").Obj(),
				webPod("b").OwnedBy("apps/v1", "StatefulSet", "db", "uid-db").Obj()}},
		{name: "selector matches no pod",
			objs: []any{webPDB("web", oneLeft).Obj(), testobj.RunningPod(ns, "x").Label("app", "other").Obj()},
			want: []string{"warning SelectsNoPods PodDisruptionBudget/web"}},
		{name: "nil selector",
			objs: []any{webPDB("web", oneLeft).Selector(nil).Obj(), webPod("a").Obj()},
			want: []string{"warning NilSelector PodDisruptionBudget/web"}},
		{name: "invalid selector",
			objs: []any{webPDB("web", oneLeft).Selector(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}}).Obj(), webPod("a").Obj()},
			want: []string{"error InvalidSelector PodDisruptionBudget/web"}},
		{name: "crash-looping pods under IfHealthyBudget",
			objs: []any{webPDB("web", pdbStatus{healthy: 0, desired: 1}).Obj(), webPod("a").Ready(false).Obj(), webPod("b").Ready(false).Obj()},
			want: []string{"warning UnhealthyPodsBlock PodDisruptionBudget/web,Pod/a,Pod/b"}},
		{name: "crash-looping pods under AlwaysAllow are clean",
			objs: []any{webPDB("web", pdbStatus{healthy: 0, desired: 1}).UnhealthyPodEvictionPolicy(policyv1.AlwaysAllow).Obj(), webPod("a").Ready(false).Obj(), webPod("b").Ready(false).Obj()}},
		{name: "stale PDB",
			objs: []any{webPDB("web", oneLeft).Generation(3).ObservedGeneration(2).Obj(), webPod("a").Obj(), webPod("b").Obj(), webPod("c").Obj()},
			want: []string{"warning StaleStatus PodDisruptionBudget/web"}},
		{name: "a PDB and a PUB over one pod, alike",
			objs: []any{webPDB("web", oneLeft).Obj(), pub("guard", oneLeft).MatchLabels("app", "web").MinAvailable(intstr.FromInt32(2)).Obj(), webPod("a").Obj(), webPod("b").Obj(), webPod("c").Obj()},
			want: []string{"warning PDBAndPUB PodDisruptionBudget/web,PodUnavailableBudget/guard,Pod/a,Pod/b,Pod/c"}},
		{name: "a PDB and a PUB over one pod, with other thresholds",
			objs: []any{webPDB("web", oneLeft).Obj(), pub("guard", oneLeft).MatchLabels("app", "web").MaxUnavailable(intstr.FromInt32(2)).Obj(), webPod("a").Obj(), webPod("b").Obj(), webPod("c").Obj()},
			want: []string{"warning PDBAndPUBDisagree PodDisruptionBudget/web,PodUnavailableBudget/guard,Pod/a,Pod/b,Pod/c"}},
		{name: "a PDB and a PUB over one pod, the PUB ignoring one",
			objs: []any{webPDB("web", oneLeft).Obj(), betaPUB(t, pub("guard", oneLeft).MatchLabels("app", "web").MinAvailable(intstr.FromInt32(2)),
				func(s *kruisebeta.PodUnavailableBudgetSpec) {
					s.IgnoredPodSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"track": "canary"}}
				}), webPod("a").Label("track", "canary").Obj(), webPod("b").Obj(), webPod("c").Obj()},
			want: []string{"warning PDBAndPUBDisagree PodDisruptionBudget/web,PodUnavailableBudget/guard,Pod/a,Pod/b,Pod/c"}},
		{name: "two PUBs over one pod",
			objs: []any{pub("one", oneLeft).MatchLabels("app", "web").Obj(), pub("two", oneLeft).Obj(), webPod("a").Annotation(AnnotationRelatedPUB, "two").Obj()},
			want: []string{"warning DeprecatedAnnotation PodUnavailableBudget/two,Pod/a", "warning MultiplePUBs PodUnavailableBudget/one,PodUnavailableBudget/two,Pod/a", "warning NilSelector PodUnavailableBudget/two"}},
		{name: "a PUB written for an older OpenKruise",
			objs: []any{pub("guard", oneLeft).MatchLabels("app", "web").Annotation(AnnotationPUBProtectOperations, "DELETE").Obj(), webPod("a").Obj()},
			want: []string{"warning DeprecatedAnnotation PodUnavailableBudget/guard"}},
		{name: "pods opting out with the old annotation",
			objs: []any{pub("guard", oneLeft).MatchLabels("app", "web").Obj(), webPod("a").Annotation(AnnotationPUBNoProtect, "true").Obj(),
				webPod("b").Annotation(AnnotationPodRelatedPUB, "guard").Annotation(AnnotationRelatedPUB, "guard").Obj()},
			want: []string{"warning DeprecatedAnnotation PodUnavailableBudget/guard,Pod/a"}},
		{name: "PUB without selector or targetRef, PUB that covers nothing",
			objs: []any{pub("none", oneLeft).Obj(), pub("empty", oneLeft).MatchLabels("app", "db").Obj(), webPod("a").Obj()},
			want: []string{"warning NilSelector PodUnavailableBudget/none", "warning SelectsNoPods PodUnavailableBudget/empty"}},
		{name: "more than five pods are counted, not named",
			objs: []any{webPDB("web", oneLeft).Obj(), webPDB("all", oneLeft).Selector(&metav1.LabelSelector{}).Obj(),
				webPod("a").Obj(), webPod("b").Obj(), webPod("c").Obj(), webPod("d").Obj(), webPod("e").Obj(), webPod("f").Obj()},
			want: []string{"error MultiplePDBs PodDisruptionBudget/all,PodDisruptionBudget/web,Pod/a,Pod/b,Pod/c,Pod/d,Pod/e"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, lintOf(t, tc.objs...)); diff != "" {
				t.Errorf("findings (-want,+got):\n%s", diff)
			}
		})
	}
}
