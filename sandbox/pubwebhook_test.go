package sandbox

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	policyv1alpha1 "github.com/openkruise/kruise-api/policy/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
		{"no-protect true", webPod("a").Annotation(policyv1alpha1.PodPubNoProtectionAnnotation, "true").Obj(), true},
		{"no-protect 1", webPod("a").Annotation(policyv1alpha1.PodPubNoProtectionAnnotation, "1").Obj(), true},
		{"no-protect false", webPod("a").Annotation(policyv1alpha1.PodPubNoProtectionAnnotation, "false").Obj(), false},
		{"no-protect not a bool", webPod("a").Annotation(policyv1alpha1.PodPubNoProtectionAnnotation, "yes").Obj(), false},
	}
	for _, tc := range tests {
		if got := pubPodExempt(tc.pod); got != tc.want {
			t.Errorf("%s: pubPodExempt = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestPUBProtects(t *testing.T) {
	const (
		del    = policyv1alpha1.PubDeleteOperation
		update = policyv1alpha1.PubUpdateOperation
		evict  = policyv1alpha1.PubEvictOperation
	)
	tests := []struct {
		annotation string // "" leaves it out
		op         policyv1alpha1.PubOperation
		want       bool
	}{
		{"", del, true},
		{"", update, true},
		{"", evict, true},
		{"", "RESIZE", false},
		{"DELETE", del, true},
		{"DELETE", evict, false},
		{"DELETE,EVICT", evict, true},
		{",,", evict, true},             // no item listed: the default
		{"DELETE, EVICT", evict, false}, // kruise does not trim
		{"delete", del, false},
	}
	for _, tc := range tests {
		pub := webPUB()
		if tc.annotation != "" {
			pub.Annotation(policyv1alpha1.PubProtectOperationAnnotation, tc.annotation)
		}
		if got := pubProtects(pub.Obj(), tc.op); got != tc.want {
			t.Errorf("annotation %q, operation %s: pubProtects = %v, want %v", tc.annotation, tc.op, got, tc.want)
		}
	}
}

func TestPUBAdmitsFree(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name string
		pub  *testobj.PUBWrapper
		op   policyv1alpha1.PubOperation
		want bool
	}{
		{"no status yet", webPUB(), policyv1alpha1.PubDeleteOperation, true},
		{"desires none", webPUB().Status(3, 0, 0), policyv1alpha1.PubDeleteOperation, true},
		{"spends", webPUB().Status(3, 2, 1), policyv1alpha1.PubDeleteOperation, false},
		{"allows none", webPUB().Status(3, 3, 0), policyv1alpha1.PubEvictOperation, false},
		{"operation not protected", webPUB().Status(3, 3, 0).Annotation(policyv1alpha1.PubProtectOperationAnnotation, "DELETE"), policyv1alpha1.PubEvictOperation, true},
		{"recorded disrupted", webPUB().Status(3, 3, 0).Disrupted(now, "a"), policyv1alpha1.PubDeleteOperation, true},
		{"recorded unavailable", webPUB().Status(3, 3, 0).Unavailable(now, "a"), policyv1alpha1.PubEvictOperation, true},
		{"another pod recorded", webPUB().Status(3, 3, 0).Disrupted(now, "b"), policyv1alpha1.PubDeleteOperation, false},
	}
	for _, tc := range tests {
		if got := pubAdmitsFree(tc.pub.Obj(), webPod("a").Obj(), tc.op); got != tc.want {
			t.Errorf("%s: pubAdmitsFree = %v, want %v", tc.name, got, tc.want)
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
		pub           *policyv1alpha1.PodUnavailableBudget
		op            policyv1alpha1.PubOperation
		wantForbidden string // the refusal's message, "" for a spend
		want          policyv1alpha1.PodUnavailableBudgetStatus
	}{{
		name: "delete spends one",
		pub:  webPUB().Status(3, 2, 1).Obj(),
		op:   policyv1alpha1.PubDeleteOperation,
		want: policyv1alpha1.PodUnavailableBudgetStatus{
			CurrentAvailable: 3, DesiredAvailable: 2, UnavailableAllowed: 0, TotalReplicas: 3, ObservedGeneration: 3,
			DisruptedPods: map[string]metav1.Time{"a": at}, UnavailablePods: map[string]metav1.Time{},
		},
	}, {
		name: "evict keeps other entries",
		pub:  webPUB().Status(4, 2, 2).Disrupted(earlier, "b").Obj(),
		op:   policyv1alpha1.PubEvictOperation,
		want: policyv1alpha1.PodUnavailableBudgetStatus{
			CurrentAvailable: 4, DesiredAvailable: 2, UnavailableAllowed: 1, TotalReplicas: 4, ObservedGeneration: 3,
			DisruptedPods:   map[string]metav1.Time{"a": at, "b": metav1.NewTime(earlier)},
			UnavailablePods: map[string]metav1.Time{},
		},
	}, {
		name: "update goes to unavailablePods",
		pub:  webPUB().Status(3, 2, 1).Obj(),
		op:   policyv1alpha1.PubUpdateOperation,
		want: policyv1alpha1.PodUnavailableBudgetStatus{
			CurrentAvailable: 3, DesiredAvailable: 2, UnavailableAllowed: 0, TotalReplicas: 3, ObservedGeneration: 3,
			DisruptedPods: map[string]metav1.Time{}, UnavailablePods: map[string]metav1.Time{"a": at},
		},
	}, {
		name:          "allows none",
		pub:           webPUB().Status(3, 3, 0).Obj(),
		op:            policyv1alpha1.PubDeleteOperation,
		wantForbidden: `podunavailablebudget.policy.kruise.io "web" is forbidden: pub unavailable allowed is negative`,
	}, {
		name: "entries full",
		pub: func() *policyv1alpha1.PodUnavailableBudget {
			p := webPUB().Status(3, 2, 1).Obj()
			p.Status.DisruptedPods = full
			return p
		}(),
		op:            policyv1alpha1.PubDeleteOperation,
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
		var pubs []*policyv1alpha1.PodUnavailableBudget
		for _, p := range tc.pubs {
			pubs = append(pubs, p.Obj())
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
