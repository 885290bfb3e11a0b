package budgetpreemption

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"

	"github.com/budgetguard/budgetguard/plugins/budget"
)

// TestEachRefusalEventKeepsItsBudget records the preemptor's refusals with
// the events library kube-scheduler uses (k8s.io/client-go/tools/events),
// to a clientset: first while the budget cache is not synced, then refused
// by pdb shop/web, then, once web is replaced by web2, refused by pdb
// shop/web2. Each refusal's note reaches the API. The library folds an
// event into the series of an earlier one with the same object, type,
// reason, action and related object, keeping the earlier note; before the
// budget was the related object, the second and third refusals were counted
// in the first one's series and the API showed only "budget cache not
// synced" (seen in CI: TestResizeRefusedBeyondBudgetNamesIt, whose first
// cycle ran before the cache synced).
func TestEachRefusalEventKeepsItsBudget(t *testing.T) {
	p := preemptor("2", 100)
	pods := append(replicas("web", "n1", "web", true, 0, 0, 0, 0), p)
	e := newEnv(t, nil, []*v1.Node{node("n1")}, pods, []*policyv1.PodDisruptionBudget{appPDB("web", 4, 3, 1).Obj()})
	cs := e.fw.ClientSet()
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
	broadcaster.StartRecordingToSink(e.ctx.Done())
	t.Cleanup(broadcaster.Shutdown)
	h := &eventsHandle{Handle: e.fw, rec: broadcaster.NewRecorder(scheme.Scheme, "default-scheduler")}
	e.pl.fh = h
	e.pl.lifetime = e.ctx
	synced := e.pl.budgets

	// The same scheduler's plugin before its cache had listed: a second
	// instance on a cache whose informers have not listed, recording
	// through the same events library (which is where events fold).
	unsynced, err := budget.New(e.ctx, informers.NewSharedInformerFactory(cs, 0), budget.Options{})
	if err != nil {
		t.Fatal(err)
	}
	early := newPlugin(DefaultArgs(), h, unsynced, feature.Features{})
	early.lifetime = e.ctx
	state, _ := e.preFilter(t, p)
	m := framework.NewDefaultNodeToStatus()
	m.Set("n1", fwk.NewStatus(fwk.Unschedulable, "Insufficient cpu"))
	if _, status := early.PostFilter(e.ctx, state, p, m); status.IsSuccess() || !strings.Contains(status.Message(), "budget cache not synced") {
		t.Fatalf("PostFilter with the cache not synced: %v", status)
	}
	if _, status := e.postFilterN1(t, p); status.IsSuccess() || !strings.Contains(status.Message(), "pdb shop/web:") {
		t.Fatalf("PostFilter under pdb web: %v; want it refused naming pdb shop/web", status)
	}

	// web2 replaces web: one disruption allowed of four, as web. No
	// PostFilter runs while the cache has seen only part of the change
	// (with no budget at all the preemptor would preempt).
	pdbs := cs.PolicyV1().PodDisruptionBudgets(ns)
	if err := pdbs.Delete(e.ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	web2 := appPDB("web", 4, 3, 1).Obj()
	web2.Name, web2.UID = "web2", "uid-web2"
	if _, err := pdbs.Create(e.ctx, web2, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(e.ctx, 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		d := synced.Decide(pods[0], budget.OperationEvict)
		return len(d.Spends) == 1 && d.Spends[0].Name == "web2", nil
	}); err != nil {
		t.Fatalf("the budget cache never saw web2 in place of web: %v", err)
	}
	if _, status := e.postFilterN1(t, p); status.IsSuccess() || !strings.Contains(status.Message(), "pdb shop/web2:") {
		t.Fatalf("PostFilter under pdb web2: %v; want it refused naming pdb shop/web2", status)
	}

	wants := []string{"budget cache not synced", "pdb shop/web:", "pdb shop/web2:"}
	var notes []string
	if err := wait.PollUntilContextTimeout(e.ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := cs.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		notes = blockedNotes(list.Items, p.Name)
		for _, w := range wants {
			if !slices.ContainsFunc(notes, func(n string) bool { return strings.Contains(n, w) }) {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		t.Fatalf("the API's %s events on the preemptor: %q; want one naming each of %q", budget.EventPreemptionBlockedByBudget, notes, wants)
	}
}

// TestEventRelatedNamesTheBudget: the related object of a refusal event is
// the budget, with the kind and API version an ObjectReference needs.
func TestEventRelatedNamesTheBudget(t *testing.T) {
	e := newEnv(t, nil, nil, nil, nil)
	for _, tc := range []struct {
		ref  budget.BudgetRef
		want string
	}{
		{budget.BudgetRef{Kind: budget.KindPDB, Namespace: ns, Name: "web", UID: "u1"}, "policy/v1 PodDisruptionBudget shop/web u1"},
		{budget.BudgetRef{Kind: budget.KindPUB, Namespace: ns, Name: "db", UID: "u2"}, budget.PUBGroupVersion + " PodUnavailableBudget shop/db u2"},
	} {
		obj := e.budgets.EventRelated(tc.ref)
		m, ok := obj.(*metav1.PartialObjectMetadata)
		if !ok {
			t.Fatalf("EventRelated(%v) is a %T", tc.ref, obj)
		}
		if got := fmt.Sprintf("%s %s %s/%s %s", m.APIVersion, m.Kind, m.Namespace, m.Name, m.UID); got != tc.want {
			t.Errorf("EventRelated(%v) = %q, want %q", tc.ref, got, tc.want)
		}
	}
}

// eventsHandle records events with rec; the framework has no scheduling
// queue to activate pods in.
type eventsHandle struct {
	fwk.Handle
	rec events.EventRecorderLogger
}

func (h *eventsHandle) EventRecorder() events.EventRecorderLogger { return h.rec }
func (h *eventsHandle) Activate(klog.Logger, map[string]*v1.Pod)  {}

func blockedNotes(evs []eventsv1.Event, pod string) []string {
	var notes []string
	for _, ev := range evs {
		if ev.Regarding.Kind == "Pod" && ev.Regarding.Name == pod && ev.Reason == budget.EventPreemptionBlockedByBudget {
			notes = append(notes, ev.Note)
		}
	}
	return notes
}
