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

	if err := RecordPUBDisruption(ctx, client, "shop", "web", pod("web-0"), OperationDelete, now); err != nil {
		t.Fatalf("record web-0: %v", err)
	}
	st := get().Status
	if _, ok := st.DisruptedPods["web-0"]; !ok || st.UnavailableAllowed != 0 || updates != 1 {
		t.Fatalf("after web-0: disruptedPods %v, unavailableAllowed %d, %d updates; want web-0 recorded, 0 allowed, 1 update", st.DisruptedPods, st.UnavailableAllowed, updates)
	}

	err := RecordPUBDisruption(ctx, client, "shop", "web", pod("web-1"), OperationDelete, now)
	var de *DeniedError
	if !errors.As(err, &de) || de.Decision.Reason() != ReasonInsufficientBudget {
		t.Fatalf("record web-1: %v, want the PUB's InsufficientBudget refusal", err)
	}
	if err := RecordPUBDisruption(ctx, client, "shop", "web", pod("web-0"), OperationDelete, now); err != nil || updates != 1 {
		t.Fatalf("record web-0 again: %v after %d updates, want nil and no second update", err, updates)
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
	err = RecordPUBDisruption(ctx, fresh, "shop", "web", pod("web-3"), OperationDelete, now)
	if !errors.As(err, &de) {
		t.Fatalf("record web-3 after a conflicting record of web-2: %v, want a refusal decided on the new status", err)
	}
}
