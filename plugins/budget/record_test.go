package budget

import (
	"context"
	"errors"
	"testing"
	"time"

	kruisefake "github.com/openkruise/kruise-api/client/clientset/versioned/fake"
	kruisepolicy "github.com/openkruise/kruise-api/policy/v1alpha1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	clienttesting "k8s.io/client-go/testing"

	"github.com/budgetguard/budgetguard/internal/testobj"
)

// TestRecordPUBDisruption follows OpenKruise's webhook protocol: the first
// disruption the PUB allows is recorded in status.disruptedPods with
// unavailableAllowed taken down by one, in one status update; the next one,
// which the PUB no longer allows, is refused and writes nothing; a pod
// already recorded needs no second record; a conflict re-reads and decides
// again on the new status.
func TestRecordPUBDisruption(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	// base is PUB shop/web: 3 available, 2 desired, 1 unavailable allowed.
	base := func() *kruisepolicy.PodUnavailableBudget {
		return testobj.MakePUB().Namespace("shop").Name("web").Generation(1).MatchLabels("app", "web").
			MaxUnavailable(intstr.FromInt32(1)).Status(3, 2, 1).Obj()
	}
	pod := func(name string) *v1.Pod {
		return testobj.MakePod().Namespace("shop").Name(name).Label("app", "web").Running().Obj()
	}
	client := kruisefake.NewSimpleClientset(base())
	updates := 0
	client.PrependReactor("update", "podunavailablebudgets", func(clienttesting.Action) (bool, runtime.Object, error) {
		updates++
		return false, nil, nil
	})
	get := func() *kruisepolicy.PodUnavailableBudget {
		t.Helper()
		got, err := client.PolicyV1alpha1().PodUnavailableBudgets("shop").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}

	if rec, err := RecordPUBDisruption(ctx, PUBStatusClientV1alpha1(client), "shop", "web", pod("web-0"), OperationDelete, now); err != nil || rec == nil {
		t.Fatalf("record web-0: %+v, %v; want the record", rec, err)
	}
	st := get().Status
	if _, ok := st.DisruptedPods["web-0"]; !ok || st.UnavailableAllowed != 0 || updates != 1 {
		t.Fatalf("after web-0: disruptedPods %v, unavailableAllowed %d, %d updates; want web-0 recorded, 0 allowed, 1 update", st.DisruptedPods, st.UnavailableAllowed, updates)
	}

	_, err := RecordPUBDisruption(ctx, PUBStatusClientV1alpha1(client), "shop", "web", pod("web-1"), OperationDelete, now)
	var de *DeniedError
	if !errors.As(err, &de) || de.Decision.Reason() != ReasonInsufficientBudget {
		t.Fatalf("record web-1: %v, want the PUB's InsufficientBudget refusal", err)
	}
	if rec, err := RecordPUBDisruption(ctx, PUBStatusClientV1alpha1(client), "shop", "web", pod("web-0"), OperationDelete, now); err != nil || rec != nil || updates != 1 {
		t.Fatalf("record web-0 again: %+v, %v after %d updates, want no record, nil and no second update", rec, err, updates)
	}

	// Another writer recorded web-2 between our read and our write: the
	// conflict makes us read again, and the PUB has nothing left for web-3.
	fresh := kruisefake.NewSimpleClientset(base())
	conflicted := false
	fresh.PrependReactor("update", "podunavailablebudgets", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if conflicted {
			return false, nil, nil
		}
		conflicted = true
		other := base()
		other.Status.DisruptedPods = map[string]metav1.Time{"web-2": metav1.NewTime(now)}
		other.Status.UnavailableAllowed = 0
		if err := fresh.Tracker().Update(schema.GroupVersionResource{Group: "policy.kruise.io", Version: "v1alpha1", Resource: "podunavailablebudgets"}, other, "shop"); err != nil {
			t.Fatal(err)
		}
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "podunavailablebudgets"}, "web", errors.New("the object has been modified"))
	})
	_, err = RecordPUBDisruption(ctx, PUBStatusClientV1alpha1(fresh), "shop", "web", pod("web-3"), OperationDelete, now)
	if !errors.As(err, &de) {
		t.Fatalf("record web-3 after a conflicting record of web-2: %v, want a refusal decided on the new status", err)
	}
}

// TestUndoPUBRecords: a disruption the API server then refused is taken
// back from the PUB's status, so the pod, which stays, is not free to take
// later under rule 5 (found by TestPromiseAllActors: a preemption aborted
// after the record, and a later one deleted the Ready pod as already
// counted). unavailableAllowed is not raised: the PUB's controller
// recomputes it. An entry written since by someone else (another time) is
// left alone.
func TestUndoPUBRecords(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 22, 12, 0, 0, 500, time.UTC)
	client := kruisefake.NewSimpleClientset(
		testobj.MakePUB().Namespace("shop").Name("a").Generation(1).MatchLabels("app", "web").MaxUnavailable(intstr.FromInt32(1)).Status(3, 2, 1).Obj(),
		testobj.MakePUB().Namespace("shop").Name("b").Generation(1).MatchLabels("app", "web").MaxUnavailable(intstr.FromInt32(1)).Status(3, 2, 1).Obj())
	web0 := testobj.MakePod().Namespace("shop").Name("web-0").Label("app", "web").Running().Obj()
	d := Decision{Allowed: true, Spends: []BudgetRef{{Kind: KindPUB, Namespace: "shop", Name: "a"}, {Kind: KindPUB, Namespace: "shop", Name: "b"}}}
	recs, err := RecordPUBDisruptions(ctx, PUBStatusClientV1alpha1(client), d, web0, OperationDelete, now)
	if err != nil || len(recs) != 2 {
		t.Fatalf("RecordPUBDisruptions = %+v, %v; want two records", recs, err)
	}
	get := func(name string) kruisepolicy.PodUnavailableBudgetStatus {
		t.Helper()
		got, err := client.PolicyV1alpha1().PodUnavailableBudgets("shop").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got.Status
	}
	// Someone else recorded web-0 in b since, at another time.
	other := get("b")
	pubB, _ := client.PolicyV1alpha1().PodUnavailableBudgets("shop").Get(ctx, "b", metav1.GetOptions{})
	pubB.Status = other
	pubB.Status.DisruptedPods = map[string]metav1.Time{"web-0": metav1.NewTime(now.Add(time.Minute)).Rfc3339Copy()}
	if _, err := client.PolicyV1alpha1().PodUnavailableBudgets("shop").UpdateStatus(ctx, pubB, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	if err := UndoPUBRecords(ctx, PUBStatusClientV1alpha1(client), recs); err != nil {
		t.Fatalf("UndoPUBRecords: %v", err)
	}
	if st := get("a"); len(st.DisruptedPods) != 0 || st.UnavailableAllowed != 0 {
		t.Errorf("pub a after the undo: disruptedPods %v, unavailableAllowed %d; want no entry and still 0 allowed", st.DisruptedPods, st.UnavailableAllowed)
	}
	if st := get("b"); len(st.DisruptedPods) != 1 {
		t.Errorf("pub b after the undo: disruptedPods %v; want the other writer's entry kept", st.DisruptedPods)
	}
	if !DisruptionRefused(apierrors.NewTooManyRequests("budget", 0)) || DisruptionRefused(apierrors.NewInternalError(errors.New("x"))) || DisruptionRefused(errors.New("timeout")) {
		t.Error("DisruptionRefused: want true for a 429 only, of these three")
	}
}

// TestRecordPUBDisruptionsTakesBackWhatItWroteWhenOnePUBRefuses: the pod is
// not disrupted when its second PUB refuses, so the first PUB's record is
// taken back: left behind, it would make the pod free later under rule 5.
func TestRecordPUBDisruptionsTakesBackWhatItWroteWhenOnePUBRefuses(t *testing.T) {
	ctx := context.Background()
	client := kruisefake.NewSimpleClientset(
		testobj.MakePUB().Namespace("shop").Name("a").Generation(1).MatchLabels("app", "web").MaxUnavailable(intstr.FromInt32(1)).Status(3, 2, 1).Obj(),
		testobj.MakePUB().Namespace("shop").Name("b").Generation(1).MatchLabels("app", "web").MaxUnavailable(intstr.FromInt32(0)).Status(3, 3, 0).Obj())
	web0 := testobj.MakePod().Namespace("shop").Name("web-0").Label("app", "web").Running().Obj()
	d := Decision{Allowed: true, Spends: []BudgetRef{{Kind: KindPUB, Namespace: "shop", Name: "a"}, {Kind: KindPUB, Namespace: "shop", Name: "b"}}}
	recs, err := RecordPUBDisruptions(ctx, PUBStatusClientV1alpha1(client), d, web0, OperationDelete, time.Now())
	var de *DeniedError
	if !errors.As(err, &de) || recs != nil {
		t.Fatalf("RecordPUBDisruptions = %+v, %v; want pub b's refusal and no records", recs, err)
	}
	a, err := client.PolicyV1alpha1().PodUnavailableBudgets("shop").Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Status.DisruptedPods) != 0 {
		t.Errorf("pub a keeps disruptedPods %v after pub b refused the pod; want none", a.Status.DisruptedPods)
	}
}

// A budget's refusal is the Eviction API's 429, or a denial by an admission
// webhook or a ValidatingAdmissionPolicy (OpenKruise's webhook answers 403
// for a pod its PUB protects); an authorization 403, a conflict, a pod that
// is gone, a server error or no answer at all is not.
func TestRefusedByBudget(t *testing.T) {
	denied := func(code int32, msg string) error {
		return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: code, Message: msg}}
	}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"Eviction API 429", apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0), true},
		{"OpenKruise's webhook", denied(403, `admission webhook "vpod.kb.io" denied the request: podunavailablebudget.policy.kruise.io "web" is forbidden: pub unavailable allowed is negative`), true},
		{"ValidatingAdmissionPolicy", denied(403, `ValidatingAdmissionPolicy 'no-delete' with binding 'shop' denied request: protected`), true},
		{"authorization", apierrors.NewForbidden(schema.GroupResource{Resource: "pods/eviction"}, "web-0", errors.New(`User "x" cannot create resource "pods/eviction"`)), false},
		{"conflict", apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "web-0", errors.New("uid precondition")), false},
		{"gone", apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "web-0"), false},
		{"webhook unreachable", denied(500, `Internal error occurred: failed calling webhook "vpod.kb.io": connection refused`), false},
		{"no answer", context.DeadlineExceeded, false},
	} {
		if got := RefusedByBudget(tc.err); got != tc.want {
			t.Errorf("%s: RefusedByBudget = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestRecordedDisruptionOnAShortPUB: a PUB that records a Ready pod's
// disruption already lets it go without a new record only while the PUB
// counts the available pods it desires without it. Found by
// TestPromiseAllActorsUnderFaults (seed 7): preemption recorded a victim in
// its PUB, its delete was answered 500 (the record stays: the outcome is
// unknown), another pod of the PUB turned not Ready, and a later cycle
// deleted the victim under the old record, leaving 2 available of 3
// desired; the scheduler's cache had not yet seen the other pod turn not
// Ready, so only the API server's status could stop it. Both ways of
// reading the PUB refuse it: the record step (the PUB read fresh records
// the pod) and RecheckRecordedPUBs (the cache has the record).
func TestRecordedDisruptionOnAShortPUB(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 27, 20, 9, 44, 0, time.UTC)
	// web's PUB: 4 pods, 3 desired; web-0 recorded, so counted unavailable.
	webPUB := func(available int32, recorded ...string) *kruisepolicy.PodUnavailableBudget {
		return pub("web", pdbStatus{available, 3, 0}).MatchLabels("app", "web").MaxUnavailable(intstr.FromInt32(1)).
			Disrupted(now, recorded...).Obj()
	}
	web0 := webPod("web-0").Obj()
	pods := []*v1.Pod{web0, webPod("web-1").Obj(), webPod("web-2").Obj(), webPod("web-3").Obj()}

	for _, tc := range []struct {
		name string
		// fresh is the PUB as the API server has it.
		fresh *kruisepolicy.PodUnavailableBudget
		// wantReason is the refusal's; "" for none.
		wantReason Reason
	}{
		{"whole without the pod", webPUB(3, "web-0"), ""},
		{"short without the pod", webPUB(2, "web-0"), ReasonInsufficientBudget},
		// Taken back or timed out: it would need a new record, which the
		// decision did not plan.
		{"record gone", pub("web", pdbStatus{4, 3, 1}).MatchLabels("app", "web").MaxUnavailable(intstr.FromInt32(1)).Obj(), ReasonStaleStatus},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := PUBStatusClientV1alpha1(kruisefake.NewSimpleClientset(tc.fresh))
			check := func(what string, err error) {
				t.Helper()
				var de *DeniedError
				switch {
				case tc.wantReason == "" && err != nil:
					t.Errorf("%s: %v, want no refusal", what, err)
				case tc.wantReason != "" && (!errors.As(err, &de) || de.Decision.Reason() != tc.wantReason):
					t.Errorf("%s: %v, want a %s refusal", what, err, tc.wantReason)
				}
			}
			if tc.wantReason != ReasonStaleStatus {
				// The record step: the PUB read fresh records web-0.
				rec, err := RecordPUBDisruption(ctx, client, ns, "web", web0, OperationDelete, now)
				check("RecordPUBDisruption", err)
				if rec != nil {
					t.Errorf("RecordPUBDisruption wrote %+v, want no second record", rec)
				}
			}
			// The cache has the record; the API server's PUB decides.
			h := newHarness(t)
			h.add(webPUB(3, "web-0"))
			h.livePods(pods...)
			check("RecheckRecordedPUBs", h.c.RecheckRecordedPUBs(ctx, client, web0, OperationDelete))
		})
	}

	// A PUB that cannot be read: an error, not a pass.
	h := newHarness(t)
	h.add(webPUB(3, "web-0"))
	h.livePods(pods...)
	broken := kruisefake.NewSimpleClientset(webPUB(3, "web-0"))
	broken.PrependReactor("get", "podunavailablebudgets", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("injected")
	})
	var de *DeniedError
	if err := h.c.RecheckRecordedPUBs(ctx, PUBStatusClientV1alpha1(broken), web0, OperationDelete); err == nil || errors.As(err, &de) {
		t.Errorf("RecheckRecordedPUBs with the PUB unreadable: %v, want the read's error", err)
	}
	// A pod no PUB records is not read for.
	if err := h.c.RecheckRecordedPUBs(ctx, PUBStatusClientV1alpha1(broken), pods[1], OperationDelete); err != nil {
		t.Errorf("RecheckRecordedPUBs of a pod no PUB records: %v, want nil without a read", err)
	}
}
