package budget

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	kruisebeta "github.com/budgetguard/budgetguard/apis/kruise/policy/v1beta1"
	"github.com/budgetguard/budgetguard/internal/testobj"
)

// explained is what an Explain case asserts: per covering budget how it
// matched and its own verdict for an eviction, the decisions' reasons, and
// the fixes.
type explained struct {
	Budgets []string
	Evict   Reason
	Delete  Reason
	Fixes   []string
}

func explainedOf(x Explanation) explained {
	e := explained{Evict: x.Evict.Reason(), Delete: x.Delete.Reason(), Fixes: x.Fixes}
	for _, b := range x.Budgets {
		s := b.Ref.String() + " by " + string(b.Match)
		switch {
		case b.Evict.Denial != nil:
			s += " denies " + string(b.Evict.Denial.Reason)
		case b.Evict.Spends:
			s += " spends"
		default:
			s += " free"
		}
		e.Budgets = append(e.Budgets, s)
	}
	return e
}

func TestExplain(t *testing.T) {
	cases := []struct {
		name string
		objs []any
		pod  *testobj.PodWrapper
		want explained
	}{
		{
			name: "exhausted PDB: one more healthy pod",
			objs: []any{webPDB("web", exhausted).Obj()},
			pod:  webPod("a"),
			want: explained{
				Budgets: []string{"pdb shop/web by selector denies InsufficientBudget"},
				Evict:   ReasonInsufficientBudget, Delete: ReasonInsufficientBudget,
				Fixes: []string{"1 more healthy pod under pdb shop/web"},
			},
		},
		{
			name: "overlapping PDBs: remove the overlap",
			objs: []any{webPDB("web", oneLeft).Obj(), webPDB("all", oneLeft).Selector(&metav1.LabelSelector{}).Obj()},
			pod:  webPod("a"),
			want: explained{
				Budgets: []string{"pdb shop/all by {} spends", "pdb shop/web by selector spends"},
				Evict:   ReasonMultiplePDBs, Delete: ReasonMultiplePDBs,
				Fixes: []string{"remove the overlap of pdb shop/all with pdb shop/web: change a selector so that one PodDisruptionBudget covers the pod"},
			},
		},
		{
			name: "crash-looping pod under IfHealthyBudget: AlwaysAllow or more healthy pods",
			objs: []any{webPDB("web", pdbStatus{healthy: 0, desired: 1, allowed: 0}).Obj()},
			pod:  webPod("a").Ready(false),
			want: explained{
				Budgets: []string{"pdb shop/web by selector denies InsufficientBudget"},
				Evict:   ReasonInsufficientBudget, Delete: ReasonInsufficientBudget,
				Fixes: []string{"1 more healthy pod under pdb shop/web", "set unhealthyPodEvictionPolicy: AlwaysAllow on pdb shop/web (the pod is not Ready)"},
			},
		},
		{
			name: "not-ready pod under AlwaysAllow is free",
			objs: []any{webPDB("web", pdbStatus{healthy: 0, desired: 1, allowed: 0}).UnhealthyPodEvictionPolicy(policyv1.AlwaysAllow).Obj()},
			pod:  webPod("a").Ready(false),
			want: explained{Budgets: []string{"pdb shop/web by selector free"}},
		},
		{
			name: "maxUnavailable over bare pods: the PDB expects no pod, more healthy pods would not help",
			objs: []any{webPDB("web", pdbStatus{healthy: 2}).MaxUnavailable(1).ExpectedPods(0).Obj()},
			pod:  webPod("a"),
			want: explained{
				Budgets: []string{"pdb shop/web by selector denies InsufficientBudget"},
				Evict:   ReasonInsufficientBudget, Delete: ReasonInsufficientBudget,
				Fixes: []string{"use an integer minAvailable on pdb shop/web: it expects 0 pods because " + disruptionControllerScaleMsg + ", and the pods have none"},
			},
		},
		{
			name: "maxUnavailable 0: more pods would not help",
			objs: []any{webPDB("web", pdbStatus{healthy: 3, desired: 3}).MaxUnavailable(0).Obj()},
			pod:  webPod("a"),
			want: explained{
				Budgets: []string{"pdb shop/web by selector denies InsufficientBudget"},
				Evict:   ReasonInsufficientBudget, Delete: ReasonInsufficientBudget,
				Fixes: []string{"set maxUnavailable to at least 1 on pdb shop/web: with maxUnavailable 0 more pods would not help"},
			},
		},
		{
			name: "minAvailable 100% on a PUB: more pods would not help",
			objs: []any{pub("guard", pdbStatus{healthy: 3, desired: 3}).MinAvailable(intstr.FromString("100%")).MatchLabels("app", "web").Obj()},
			pod:  webPod("a"),
			want: explained{
				Budgets: []string{"pub shop/guard by selector denies InsufficientBudget"},
				Evict:   ReasonInsufficientBudget, Delete: ReasonInsufficientBudget,
				Fixes: []string{"lower minAvailable on pub shop/guard: 100% of the pods rounds up to all of them, so more pods would not help"},
			},
		},
		{
			name: "stale PDB",
			objs: []any{webPDB("web", oneLeft).Generation(2).ObservedGeneration(1).Obj()},
			pod:  webPod("a"),
			want: explained{
				Budgets: []string{"pdb shop/web by selector denies StaleStatus"},
				Evict:   ReasonStaleStatus, Delete: ReasonStaleStatus,
				Fixes: []string{"wait until the disruption controller has processed generation 2 of pdb shop/web"},
			},
		},
		{
			name: "PUB by related-pub annotation, exhausted: more available pods",
			objs: []any{pub("guard", pdbStatus{healthy: 2, desired: 2, allowed: 0}).Obj()},
			pod:  webPod("a").Annotation(AnnotationRelatedPUB, "guard"),
			want: explained{
				Budgets: []string{"pub shop/guard by related-pub denies InsufficientBudget"},
				Evict:   ReasonInsufficientBudget, Delete: ReasonInsufficientBudget,
				Fixes: []string{"1 more available pod under pub shop/guard"},
			},
		},
		{
			name: "PUB by selector and PUB by targetRef",
			objs: []any{
				pub("sel", pdbStatus{healthy: 3, desired: 2, allowed: 1}).MatchLabels("app", "web").Obj(),
				pub("tgt", pdbStatus{healthy: 3, desired: 2, allowed: 1}).TargetRef("apps/v1", "StatefulSet", "db").Obj(),
				testobj.MakeStatefulSet().Namespace(ns).Name("db").UID("uid-db").Obj(),
			},
			pod:  webPod("a").OwnedBy("apps/v1", "StatefulSet", "db", "uid-db"),
			want: explained{Budgets: []string{"pub shop/sel by selector spends", "pub shop/tgt by targetRef spends"}},
		},
		{
			name: "pending pod ignores budgets",
			objs: []any{webPDB("web", exhausted).Obj()},
			pod:  webPod("a").Phase("Pending"),
			want: explained{Budgets: []string{"pdb shop/web by selector free"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.add(tc.objs...)
			x := h.c.Explain(tc.pod.Obj())
			if diff := cmp.Diff(tc.want, explainedOf(x)); diff != "" {
				t.Errorf("explanation (-want,+got):\n%s", diff)
			}
			// Explain gives the same decisions as Decide.
			for op, got := range map[Operation]Decision{OperationEvict: x.Evict, OperationDelete: x.Delete} {
				if diff := cmp.Diff(h.c.Decide(tc.pod.Obj(), op), got); diff != "" {
					t.Errorf("%s decision differs from Decide (-Decide,+Explain):\n%s", op, diff)
				}
			}
		})
	}
}

func TestExplainCountsInFlight(t *testing.T) {
	h := newHarness(t)
	h.add(webPDB("web", oneLeft).Obj())
	if _, r := h.c.Reserve(webPod("b").Obj(), OperationEvict); r == nil {
		t.Fatal("reserving pod b spent nothing")
	}
	x := h.c.Explain(webPod("a").Obj())
	if got := x.Budgets[0].InFlight; got != 1 {
		t.Errorf("in flight = %d, want 1", got)
	}
	// allowed 1 - in flight 1 leaves 0: one more healthy pod would do.
	want := []string{"1 more healthy pod under pdb shop/web"}
	if diff := cmp.Diff(want, x.Fixes); diff != "" {
		t.Errorf("fixes (-want,+got):\n%s", diff)
	}
}

// TestExplainDecidesDeleteUnderProtectOperations: the DELETE column is
// each budget's answer for a delete, so a PUB that protects only EVICT
// (spec.protectOperations, or its annotation) leaves a delete free while it
// refuses an eviction.
func TestExplainDecidesDeleteUnderProtectOperations(t *testing.T) {
	for name, pub := range map[string]*PUB{
		"spec.protectOperations": betaPUB(t, pub("web", exhausted).MatchLabels("app", "web"), func(s *kruisebeta.PodUnavailableBudgetSpec) {
			s.ProtectOperations = []kruisebeta.PubOperation{kruisebeta.PubEvictOperation}
		}),
		"annotation": betaPUB(t, pub("web", exhausted).MatchLabels("app", "web").Annotation(AnnotationPUBProtectOperations, "EVICT"),
			func(*kruisebeta.PodUnavailableBudgetSpec) {}),
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			h.add(pub)
			x := h.c.Explain(webPod("a").Obj())
			if len(x.Budgets) != 1 {
				t.Fatalf("%d covering budgets, want 1", len(x.Budgets))
			}
			b := x.Budgets[0]
			if b.Delete.Denial != nil || b.Delete.Spends {
				t.Errorf("pub's DELETE verdict %+v, want free", b.Delete)
			}
			if b.Evict.Denial == nil || b.Evict.Denial.Reason != ReasonInsufficientBudget {
				t.Errorf("pub's EVICT verdict %+v, want denied (InsufficientBudget)", b.Evict)
			}
			if !x.Delete.Free() || x.Evict.Allowed {
				t.Errorf("decisions: delete %+v, evict %+v; want the delete free and the eviction denied", x.Delete, x.Evict)
			}
		})
	}
}
