package sandbox

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kruisebeta "github.com/budgetguard/budgetguard/apis/kruise/policy/v1beta1"
	"github.com/budgetguard/budgetguard/internal/testobj"
)

func TestPUBPodExempt(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"running and ready", webPod("a").Obj(), false},
		{"not ready", webPod("a").Ready(false).Obj(), true},
		{"pending", testobj.MakePod().Namespace(pubTestNamespace).Name("a").Phase(corev1.PodPending).Obj(), true},
		{"terminating", webPod("a").Terminating(now).Obj(), true},
		{"unavailable label", webPod("a").Label("unavailable-pod.kruise.io/upgrade", "true").Obj(), true},
		{"in-place update in its grace period", webPod("a").Container("app", "").Annotation("apps.kruise.io/inplace-update-grace", "{}").Obj(), true},
		{"no-protect true", webPod("a").Annotation(kruisebeta.PodPubNoProtectionAnnotation, "true").Obj(), true},
		{"no-protect 1", webPod("a").Annotation(kruisebeta.PodPubNoProtectionAnnotation, "1").Obj(), true},
		{"no-protect false", webPod("a").Annotation(kruisebeta.PodPubNoProtectionAnnotation, "false").Obj(), false},
		{"no-protect not a bool", webPod("a").Annotation(kruisebeta.PodPubNoProtectionAnnotation, "yes").Obj(), false},
	}
	for _, tc := range tests {
		if got := pubPodExempt(tc.pod); got != tc.want {
			t.Errorf("%s: pubPodExempt = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestPUBProtects(t *testing.T) {
	const (
		del    = kruisebeta.PubDeleteOperation
		update = kruisebeta.PubUpdateOperation
		evict  = kruisebeta.PubEvictOperation
	)
	tests := []struct {
		field      []kruisebeta.PubOperation // spec.protectOperations
		annotation string                    // "" leaves it out
		op         kruisebeta.PubOperation
		want       bool
	}{
		{nil, "", del, true},
		{nil, "", update, true},
		{nil, "", evict, true},
		{nil, "", "RESIZE", false},
		{[]kruisebeta.PubOperation{evict}, "", evict, true},
		{[]kruisebeta.PubOperation{evict}, "", del, false},
		{[]kruisebeta.PubOperation{del}, "EVICT", evict, false}, // the field wins
		{nil, "DELETE", del, true},
		{nil, "DELETE", evict, false},
		{nil, "DELETE,EVICT", evict, true},
		{nil, ",,", evict, true},             // no item listed: the default
		{nil, "DELETE, EVICT", evict, false}, // kruise does not trim
		{nil, "delete", del, false},
	}
	for _, tc := range tests {
		// Built at v1beta1 as it is, without the conversion that would
		// move the annotation into the field.
		pub := &kruisebeta.PodUnavailableBudget{Spec: kruisebeta.PodUnavailableBudgetSpec{ProtectOperations: tc.field}}
		if tc.annotation != "" {
			pub.Annotations = map[string]string{kruisebeta.PubProtectOperationAnnotation: tc.annotation}
		}
		if got := pubProtects(pub, tc.op); got != tc.want {
			t.Errorf("protectOperations %v, annotation %q, operation %s: pubProtects = %v, want %v", tc.field, tc.annotation, tc.op, got, tc.want)
		}
	}
}

func TestPUBAdmitsFree(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name string
		pub  *testobj.PUBWrapper
		op   kruisebeta.PubOperation
		want bool
	}{
		{"no status yet", webPUB(), kruisebeta.PubDeleteOperation, true},
		{"desires none", webPUB().Status(3, 0, 0), kruisebeta.PubDeleteOperation, true},
		{"spends", webPUB().Status(3, 2, 1), kruisebeta.PubDeleteOperation, false},
		{"allows none", webPUB().Status(3, 3, 0), kruisebeta.PubEvictOperation, false},
		{"operation not protected", webPUB().Status(3, 3, 0).Annotation(kruisebeta.PubProtectOperationAnnotation, "DELETE"), kruisebeta.PubEvictOperation, true},
		{"recorded disrupted", webPUB().Status(3, 3, 0).Disrupted(now, "a"), kruisebeta.PubDeleteOperation, true},
		{"recorded unavailable", webPUB().Status(3, 3, 0).Unavailable(now, "a"), kruisebeta.PubEvictOperation, true},
		{"another pod recorded", webPUB().Status(3, 3, 0).Disrupted(now, "b"), kruisebeta.PubDeleteOperation, false},
	}
	for _, tc := range tests {
		if got, err := pubAdmitsFree(betaPUB(t, tc.pub), webPod("a").Obj(), tc.op); err != nil || got != tc.want {
			t.Errorf("%s: pubAdmitsFree = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}

func TestPUBSpend(t *testing.T) {
	now := time.Now()
	at := metav1.NewTime(now)
	earlier := now.Add(-time.Second)
	full := map[string]metav1.Time{}
	for i := range pubMaxUnavailablePods + 1 {
		full[string(rune('a'+i%26))+time.Duration(i).String()] = at
	}
	tests := []struct {
		name          string
		pub           *kruisebeta.PodUnavailableBudget
		op            kruisebeta.PubOperation
		wantForbidden string // the refusal's message, "" for a spend
		want          kruisebeta.PodUnavailableBudgetStatus
	}{{
		name: "delete spends one",
		pub:  betaPUB(t, webPUB().Status(3, 2, 1)),
		op:   kruisebeta.PubDeleteOperation,
		want: kruisebeta.PodUnavailableBudgetStatus{
			CurrentAvailable: 3, DesiredAvailable: 2, UnavailableAllowed: 0, TotalReplicas: 3, ObservedGeneration: 3,
			DisruptedPods: map[string]metav1.Time{"a": at}, UnavailablePods: map[string]metav1.Time{},
		},
	}, {
		name: "evict keeps other entries",
		pub:  betaPUB(t, webPUB().Status(4, 2, 2).Disrupted(earlier, "b")),
		op:   kruisebeta.PubEvictOperation,
		want: kruisebeta.PodUnavailableBudgetStatus{
			CurrentAvailable: 4, DesiredAvailable: 2, UnavailableAllowed: 1, TotalReplicas: 4, ObservedGeneration: 3,
			DisruptedPods:   map[string]metav1.Time{"a": at, "b": metav1.NewTime(earlier)},
			UnavailablePods: map[string]metav1.Time{},
		},
	}, {
		name: "update goes to unavailablePods",
		pub:  betaPUB(t, webPUB().Status(3, 2, 1)),
		op:   kruisebeta.PubUpdateOperation,
		want: kruisebeta.PodUnavailableBudgetStatus{
			CurrentAvailable: 3, DesiredAvailable: 2, UnavailableAllowed: 0, TotalReplicas: 3, ObservedGeneration: 3,
			DisruptedPods: map[string]metav1.Time{}, UnavailablePods: map[string]metav1.Time{"a": at},
		},
	}, {
		name:          "allows none",
		pub:           betaPUB(t, webPUB().Status(3, 3, 0)),
		op:            kruisebeta.PubDeleteOperation,
		wantForbidden: `podunavailablebudget.policy.kruise.io "web" is forbidden: pub unavailable allowed is negative`,
	}, {
		name: "entries full",
		pub: func() *kruisebeta.PodUnavailableBudget {
			p := betaPUB(t, webPUB().Status(3, 2, 1))
			p.Status.DisruptedPods = full
			return p
		}(),
		op:            kruisebeta.PubDeleteOperation,
		wantForbidden: `podunavailablebudget.policy.kruise.io "web" is forbidden: DisruptedPods and UnavailablePods map too big - too many unavailable not confirmed by PUB controller`,
	}}
	for _, tc := range tests {
		before := tc.pub.DeepCopy()
		got, err := pubSpend(tc.pub, "a", tc.op, now)
		if diff := cmp.Diff(before, tc.pub); diff != "" {
			t.Errorf("%s: pubSpend changed its argument (-before,+after):\n%s", tc.name, diff)
		}
		if tc.wantForbidden != "" {
			if !apierrors.IsForbidden(err) || err.Error() != tc.wantForbidden {
				t.Errorf("%s: error = %v, want a Forbidden %q", tc.name, err, tc.wantForbidden)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got.Status); diff != "" {
			t.Errorf("%s: status (-want,+got):\n%s", tc.name, diff)
		}
	}
}

func TestPUBForNewPod(t *testing.T) {
	rs := &pubWorkloadRef{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web"}
	deploy := &pubWorkloadRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}
	pod := webPod("a").Obj()
	tests := []struct {
		name     string
		workload *pubWorkloadRef
		pubs     []*testobj.PUBWrapper
		want     string // "" for none
	}{
		{"selector", nil, []*testobj.PUBWrapper{webPUB().Name("p").MatchLabels("app", "web")}, "p"},
		{"selector does not match", rs, []*testobj.PUBWrapper{webPUB().Name("p").MatchLabels("app", "db")}, ""},
		{"empty selector matches nothing", rs, []*testobj.PUBWrapper{webPUB().Name("p").Selector(&metav1.LabelSelector{})}, ""},
		{"no selector, no targetRef", rs, []*testobj.PUBWrapper{webPUB().Name("p")}, ""},
		{"targetRef", rs, []*testobj.PUBWrapper{webPUB().Name("p").TargetRef("apps/v1", "ReplicaSet", "web")}, "p"},
		{"targetRef, other version", rs, []*testobj.PUBWrapper{webPUB().Name("p").TargetRef("apps/v1beta2", "ReplicaSet", "web")}, "p"},
		{"targetRef names the ReplicaSet of a Deployment", deploy, []*testobj.PUBWrapper{webPUB().Name("p").TargetRef("apps/v1", "ReplicaSet", "web")}, ""},
		{"targetRef wins over its own selector", rs, []*testobj.PUBWrapper{webPUB().Name("p").TargetRef("apps/v1", "ReplicaSet", "db").MatchLabels("app", "web")}, ""},
		{"targetRef without workload: its selector decides", nil, []*testobj.PUBWrapper{webPUB().Name("p").TargetRef("apps/v1", "ReplicaSet", "db").MatchLabels("app", "web")}, "p"},
		{"first of several", rs, []*testobj.PUBWrapper{webPUB().Name("p").MatchLabels("app", "web"), webPUB().Name("q").TargetRef("apps/v1", "ReplicaSet", "web")}, "p"},
	}
	for _, tc := range tests {
		var pubs []*kruisebeta.PodUnavailableBudget
		for _, p := range tc.pubs {
			pubs = append(pubs, betaPUB(t, p))
		}
		got := ""
		if p := pubForNewPod(pod, tc.workload, pubs); p != nil {
			got = p.Name
		}
		if got != tc.want {
			t.Errorf("%s: pubForNewPod = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestRelatedPUBName(t *testing.T) {
	tests := []struct {
		annotations map[string]string
		want        string
	}{
		{nil, ""},
		{map[string]string{pubRelatedAnnotation: "a"}, "a"},
		{map[string]string{pubRelatedAnnotationDeprecated: "b"}, "b"},
		{map[string]string{pubRelatedAnnotation: "a", pubRelatedAnnotationDeprecated: "b"}, "a"},
		{map[string]string{pubRelatedAnnotation: "", pubRelatedAnnotationDeprecated: "b"}, "b"},
	}
	for _, tc := range tests {
		pod := webPod("a").Annotations(tc.annotations).Obj()
		if got := relatedPUBName(pod); got != tc.want {
			t.Errorf("annotations %v: relatedPUBName = %q, want %q", tc.annotations, got, tc.want)
		}
	}
	got := withRelatedPUB(map[string]string{"x": "y"}, "web")
	want := map[string]string{"x": "y", pubRelatedAnnotation: "web", pubRelatedAnnotationDeprecated: "web"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("withRelatedPUB (-want,+got):\n%s", diff)
	}
}

func TestPUBUpdateMayDisrupt(t *testing.T) {
	base := webPod("a").Container("app", "").Obj()
	tests := []struct {
		name string
		edit func(*corev1.Pod)
		want bool
	}{
		{"labels only", func(p *corev1.Pod) { p.Labels["tier"] = "front" }, false},
		{"unavailable label added", func(p *corev1.Pod) { p.Labels["unavailable-pod.kruise.io/x"] = "true" }, true},
		{"image", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "web:2" }, true},
	}
	for _, tc := range tests {
		cur := base.DeepCopy()
		tc.edit(cur)
		if got := pubUpdateMayDisrupt(base, cur); got != tc.want {
			t.Errorf("%s: pubUpdateMayDisrupt = %v, want %v", tc.name, got, tc.want)
		}
	}
}
