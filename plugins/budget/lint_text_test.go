package budget

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestLintText checks the sentences of findings a person reads: numbers in
// agreement with their nouns, budgets named one way ("pdb shop/web"), a {}
// selector said in words, and a fix about the field the budget sets.
func TestLintText(t *testing.T) {
	cases := []struct {
		name          string
		objs          []any
		code          FindingCode
		message, fix  string
		notInMessages []string
	}{
		{name: "one pod under two PDBs",
			objs:    []any{webPDB("web", oneLeft).Obj(), webPDB("all", oneLeft).Selector(&metav1.LabelSelector{}).Obj(), webPod("a").Obj()},
			code:    FindingMultiplePDBs,
			message: "1 pod is covered by 2 PodDisruptionBudgets (pdb shop/all, pdb shop/web); the Eviction API answers 500 for it"},
		{name: "three pods under two PDBs",
			objs:    []any{webPDB("web", oneLeft).Obj(), webPDB("all", oneLeft).Selector(&metav1.LabelSelector{}).Obj(), webPod("a").Obj(), webPod("b").Obj(), webPod("c").Obj()},
			code:    FindingMultiplePDBs,
			message: "3 pods are covered by 2 PodDisruptionBudgets (pdb shop/all, pdb shop/web); the Eviction API answers 500 for every one of them"},
		{name: "one pod under two PUBs",
			objs:    []any{pub("one", oneLeft).MatchLabels("app", "web").Obj(), pub("two", oneLeft).MatchLabels("app", "web").Obj(), webPod("a").Obj()},
			code:    FindingMultiplePUBs,
			message: "1 pod is covered by 2 PodUnavailableBudgets (pub shop/one, pub shop/two)"},
		{name: "one pod under a PDB and a PUB",
			objs:    []any{webPDB("web", oneLeft).Obj(), pub("guard", oneLeft).MatchLabels("app", "web").MinAvailable(intstr.FromInt32(2)).Obj(), webPod("a").Obj()},
			code:    FindingPDBAndPUB,
			message: "1 pod is covered by a PodDisruptionBudget and a PodUnavailableBudget (pdb shop/web, pub shop/guard)"},
		{name: "one pod with an old annotation",
			objs:    []any{pub("guard", oneLeft).MatchLabels("app", "web").Obj(), webPod("a").Annotation(AnnotationPUBNoProtect, "true").Obj()},
			code:    FindingDeprecatedAnnotation,
			message: "1 pod under pub shop/guard carries annotations OpenKruise has replaced"},
		{name: "maxUnavailable 0",
			objs:          []any{webPDB("web", exhausted).MaxUnavailable(0).Obj(), webPod("a").OwnedBy("apps/v1", "ReplicaSet", "web-1", "uid-rs").Obj()},
			code:          FindingNeverAllows,
			message:       "pdb shop/web: maxUnavailable is 0, over 1 pod: it never allows a disruption",
			fix:           "set maxUnavailable to at least 1 (or, as a percentage, above 0%)",
			notInMessages: []string{"minAvailable"}},
		{name: "minAvailable equal to the pods",
			objs:    []any{webPDB("web", exhausted).Obj(), webPod("a").Obj(), webPod("b").Obj()},
			code:    FindingNeverAllows,
			message: "pdb shop/web: minAvailable 2 is at least the number of pods, over 2 pods: it never allows a disruption",
			fix:     "lower minAvailable below the number of pods (2)"},
		{name: "minAvailable 90% of 3 pods",
			objs: []any{webPDB("web", exhausted).MinAvailableValue(intstr.FromString("90%")).Obj(),
				webPod("a").OwnedBy("apps/v1", "ReplicaSet", "web-1", "uid-rs").Obj(), webPod("b").OwnedBy("apps/v1", "ReplicaSet", "web-1", "uid-rs").Obj(),
				webPod("c").OwnedBy("apps/v1", "ReplicaSet", "web-1", "uid-rs").Obj()},
			code: FindingNeverAllows,
			fix:  "lower minAvailable below the number of pods (3; a percentage rounds up to whole pods)"},
		{name: "a {} selector in a namespace without pods",
			objs:    []any{webPDB("all", oneLeft).Selector(&metav1.LabelSelector{}).Obj()},
			code:    FindingSelectsNoPods,
			message: "pdb shop/all: its selector {} selects every pod of the namespace, and the namespace has none",
			fix:     "nothing, if the namespace's pods are still to come; else delete the PDB"},
		{name: "a selector that matches no pod",
			objs:    []any{webPDB("web", oneLeft).Obj(), webPod("x").Label("app", "other").Obj()},
			code:    FindingSelectsNoPods,
			message: `pdb shop/web: selector "app=web" matches no pod`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			var in LintInput
			for _, o := range tc.objs {
				switch o := o.(type) {
				case *v1.Pod:
					in.Pods = append(in.Pods, o)
				case *policyv1.PodDisruptionBudget:
					in.PDBs = append(in.PDBs, o)
					h.add(o)
				default:
					p, ok := PUBOf(o)
					if !ok {
						t.Fatalf("%T is not a PUB", o)
					}
					in.PUBs = append(in.PUBs, p)
					h.add(o)
				}
			}
			var found *Finding
			for _, f := range h.c.Lint(in) {
				if f.Code == tc.code {
					found = &f
					break
				}
			}
			if found == nil {
				t.Fatalf("no %s finding in %+v", tc.code, h.c.Lint(in))
			}
			if !strings.HasPrefix(found.Message, tc.message) {
				t.Errorf("message %q, want it to start %q", found.Message, tc.message)
			}
			if tc.fix != "" && found.Fix != tc.fix {
				t.Errorf("fix %q, want %q", found.Fix, tc.fix)
			}
			for _, s := range tc.notInMessages {
				if strings.Contains(found.Message+" "+found.Fix, s) {
					t.Errorf("message or fix mentions %q: %q / %q", s, found.Message, found.Fix)
				}
			}
		})
	}
}
