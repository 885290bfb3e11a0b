package budgetpreemption

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	kruisefake "github.com/openkruise/kruise-api/client/clientset/versioned/fake"
	kruiseinformers "github.com/openkruise/kruise-api/client/informers/externalversions"
	kruisepolicy "github.com/openkruise/kruise-api/policy/v1alpha1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	clientsetfake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
	"k8s.io/utils/ptr"

	"github.com/budgetguard/budgetguard/internal/testobj"
	"github.com/budgetguard/budgetguard/plugins/budget"
)

// deleteActuation is an env of pods on n1 (as the cluster has them) under
// pdb, with Delete actuation, whose deletes are recorded instead of sent.
func deleteActuation(t *testing.T, pods []*v1.Pod, pdb *policyv1.PodDisruptionBudget) (*env, *[]string) {
	t.Helper()
	args := DefaultArgs()
	args.Actuation = ActuationDelete
	e := newEnv(t, args, []*v1.Node{node("n1")}, pods, []*policyv1.PodDisruptionBudget{pdb})
	var deleted []string
	evictionsAsDeletes(e)
	e.pl.deletePod = func(_ context.Context, _ preemption.Candidate, _ preemption.ExecutorPreemptor, victim *v1.Pod, _ string) error {
		deleted = append(deleted, victim.Name)
		return nil
	}
	return e, &deleted
}

// TestVictimDecidedAsTheClusterHasItNow: the snapshot saw web-3 not Ready,
// so taking it spent nothing (the PDB's 3 healthy pods meet its 3 desired);
// it has turned Ready since. The reservation re-reads the victim and the
// budget, which allows nothing, refuses it. Decided on the snapshot's
// object, it would be allowed and deleted, and the PDB would go to 2
// healthy of 3.
func TestVictimDecidedAsTheClusterHasItNow(t *testing.T) {
	pods := replicas("web", "n1", "web", true, 0, 0, 0, 0)
	e, deleted := deleteActuation(t, pods, appPDB("web", 3, 3, 0).Obj())
	stale := pods[3].DeepCopy()
	stale.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse}}
	if d := e.budgets.Decide(stale, budget.OperationDelete); !d.Allowed {
		t.Fatalf("the snapshot's not-Ready web-3 should be free to take: %s", d.Message())
	}

	err := e.pl.preemptPod(e.ctx, &testCandidate{"n1", []*v1.Pod{stale}}, testPreemptor{preemptor("1", 100)}, stale, Name)
	var de *budget.DeniedError
	if !errors.As(err, &de) {
		t.Errorf("preemptPod = %v, want the budget's refusal of the Ready web-3", err)
	}
	if len(*deleted) != 0 {
		t.Errorf("deleted %v, want nothing", *deleted)
	}
}

// TestVictimReplacedUnderItsNameIsNotDeleted: the snapshot's web-3 was
// replaced by a new pod of the same name (a StatefulSet does that). The old
// victim is gone, so there is nothing to disrupt; the new pod is not a
// victim, though its budget would allow it. A delete by name alone would
// take the new pod; the delete carries the old pod's UID.
func TestVictimReplacedUnderItsNameIsNotDeleted(t *testing.T) {
	pods := replicas("web", "n1", "web", true, 0, 0, 0, 0)
	e, deleted := deleteActuation(t, pods, appPDB("web", 4, 3, 1).Obj())
	old := pods[3].DeepCopy()
	old.UID = "web-3-before"

	if err := e.pl.preemptPod(e.ctx, &testCandidate{"n1", []*v1.Pod{old}}, testPreemptor{preemptor("1", 100)}, old, Name); err != nil {
		t.Errorf("preemptPod = %v, want nil: the victim is gone", err)
	}
	if len(*deleted) != 0 {
		t.Errorf("deleted %v, want nothing: the pod named web-3 now is not the victim", *deleted)
	}
}

// TestDeleteVictimCarriesPreconditions: the DisruptionTarget patch carries
// the decided resourceVersion, and the delete the victim's UID and the
// resourceVersion the patch returned, so the API server deletes only the
// pod that was decided on.
func TestDeleteVictimCarriesPreconditions(t *testing.T) {
	pods := replicas("web", "n1", "web", true, 0, 0, 0, 0)
	args := DefaultArgs()
	args.Actuation = ActuationDelete
	e := newEnv(t, args, []*v1.Node{node("n1")}, pods, nil)
	cs := e.fw.ClientSet().(*clientsetfake.Clientset)
	var patch string
	var pre *struct{ uid, rv string }
	cs.PrependReactor("patch", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		patch = string(a.(clienttesting.PatchAction).GetPatch())
		return false, nil, nil
	})
	cs.PrependReactor("delete", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if p := a.(clienttesting.DeleteAction).GetDeleteOptions().Preconditions; p != nil && p.UID != nil && p.ResourceVersion != nil {
			pre = &struct{ uid, rv string }{string(*p.UID), *p.ResourceVersion}
		}
		return false, nil, nil
	})
	victim := e.pl.current(pods[3])
	if victim == nil {
		t.Fatal("web-3 is not in the pod informer")
	}
	victim = victim.DeepCopy()
	victim.ResourceVersion = "42"
	_ = e.pl.deleteVictim(e.ctx, &testCandidate{"n1", []*v1.Pod{victim}}, testPreemptor{preemptor("1", 100)}, victim, Name)
	if want := `"resourceVersion":"42"`; !strings.Contains(patch, want) || !strings.Contains(patch, `"uid":"`+string(victim.UID)+`"`) {
		t.Errorf("DisruptionTarget patch %s, want it to carry the uid and %s", patch, want)
	}
	if pre == nil || pre.uid != string(victim.UID) || pre.rv == "" {
		t.Errorf("delete preconditions %+v, want the victim's UID %s and a resourceVersion", pre, victim.UID)
	}
}

// TestDeleteActuationEvictsBudgetSpendingVictims: with Delete actuation, a
// victim whose disruption a PDB allows and counts goes through the Eviction
// API, so the API server records it in the PDB's status for every other
// process to see; a victim that spends nothing is deleted. An overriding
// preemptor's victims are all deleted. Were a spending victim deleted, the
// only record of the spent disruption would be this process's ledger.
func TestDeleteActuationEvictsBudgetSpendingVictims(t *testing.T) {
	web := replicas("web", "n1", "web", true, 0, 0)
	free := replicas("free", "n1", "", true, 0)
	pods := append(web, free...)
	args := DefaultArgs()
	args.Actuation = ActuationDelete
	args.OverrideBudgetsAtPriority = ptr.To[int32](1000)
	for _, tc := range []struct {
		name     string
		priority int32
		want     []string
	}{
		{name: "within the budgets", priority: 100, want: []string{"delete free-0", "evict web-0"}},
		{name: "overriding preemptor", priority: 2000, want: []string{"delete free-0", "delete web-0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, args, []*v1.Node{node("n1")}, pods, []*policyv1.PodDisruptionBudget{appPDB("web", 2, 1, 1).Obj()})
			var mu sync.Mutex
			var got []string
			e.pl.deletePod = func(_ context.Context, _ preemption.Candidate, _ preemption.ExecutorPreemptor, victim *v1.Pod, _ string) error {
				mu.Lock()
				defer mu.Unlock()
				got = append(got, "delete "+victim.Name)
				return nil
			}
			e.pl.evictPod = func(_ context.Context, _ preemption.Candidate, _ preemption.ExecutorPreemptor, victim *v1.Pod) error {
				mu.Lock()
				defer mu.Unlock()
				got = append(got, "evict "+victim.Name)
				return nil
			}
			p := testPreemptor{preemptor("2", tc.priority)}
			c := &testCandidate{"n1", []*v1.Pod{web[0], free[0]}}
			for _, v := range c.victims {
				if err := e.pl.preemptPod(e.ctx, c, p, v, Name); err != nil {
					t.Fatalf("preemptPod(%s): %v", v.Name, err)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("disruptions %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPUBDisruptionRecordedBeforeTheVictimGoes: no API server checks a
// PodUnavailableBudget, so a victim that spends one is recorded in the
// PUB's status (disruptedPods, unavailableAllowed - 1) before it is deleted,
// as OpenKruise's webhook would; every other process then counts it.
// This process's ledger alone is seen by no other process.
func TestPUBDisruptionRecordedBeforeTheVictimGoes(t *testing.T) {
	testPUBDisruptionRecorded(t, false)
}

// TestPUBDisruptionRecordedForAVictimAnEarlierReservationHolds: the ledger
// already holds web-0 (an earlier cycle's or another profile's reservation
// that was not actuated), so the candidate's plan spends nothing new on
// it. Its disruption must still be recorded in the PUB's status before it
// is deleted: deleted unrecorded, the descheduler, deciding on the PUB's
// status, would spend the same allowance again (as TestPromiseAllActors
// found with PUB app-03: 2 available of 3 desired).
func TestPUBDisruptionRecordedForAVictimAnEarlierReservationHolds(t *testing.T) {
	testPUBDisruptionRecorded(t, true)
}

func testPUBDisruptionRecorded(t *testing.T, heldBefore bool) {
	e, pods, kc, bc := deleteEnvWithWebPUB(t)
	if heldBefore {
		if d, r := bc.Reserve(pods[0], budget.OperationDelete); !d.Allowed || r == nil {
			t.Fatalf("the earlier reservation of web-0: %+v", d)
		}
	}
	pubStatus := func() kruisepolicy.PodUnavailableBudgetStatus {
		pub, err := kc.PolicyV1alpha1().PodUnavailableBudgets(ns).Get(e.ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return pub.Status
	}
	var deleted []string
	e.pl.deletePod = func(_ context.Context, _ preemption.Candidate, _ preemption.ExecutorPreemptor, victim *v1.Pod, _ string) error {
		if _, ok := pubStatus().DisruptedPods[victim.Name]; !ok {
			t.Errorf("%s deleted before its disruption was recorded in pub %s/web", victim.Name, ns)
		}
		deleted = append(deleted, victim.Name)
		return nil
	}
	if err := e.pl.preemptPod(e.ctx, &testCandidate{"n1", pods[:1]}, testPreemptor{preemptor("1", 100)}, pods[0], Name); err != nil {
		t.Fatalf("preempting web-0: %v", err)
	}
	if st := pubStatus(); len(deleted) != 1 || st.UnavailableAllowed != 0 {
		t.Errorf("deleted %v, pub status unavailableAllowed %d disruptedPods %v; want web-0 deleted and recorded, 0 allowed", deleted, st.UnavailableAllowed, st.DisruptedPods)
	}
}

// TestPUBRecordTakenBackWhenTheVictimIsRefused: web-0's disruption was
// recorded in its PUB, then the API server refused its eviction (a 429 from
// a budget the cache had not seen spent). web-0 stays, so the record is
// taken back; left behind, rule 5 would count web-0 as already disrupted,
// and a later preemption would take it, Ready, while the PUB allows
// nothing (found by TestPromiseAllActors). A victim whose outcome is
// unknown (a timeout) keeps its record.
func TestPUBRecordTakenBackWhenTheVictimIsRefused(t *testing.T) {
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	for _, tc := range []struct {
		name       string
		err        error
		wantRecord bool
	}{
		{"refused", apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0), false},
		{"unknown", errors.New("context deadline exceeded"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pods := replicas("web", "n1", "web", true, 0, 0, 0)
			e := newEnv(t, DefaultArgs(), []*v1.Node{node("n1")}, pods, nil)
			kc, _ := withWebPUB(t, e)
			e.pl.evictPod = func(context.Context, preemption.Candidate, preemption.ExecutorPreemptor, *v1.Pod) error {
				return tc.err
			}
			if err := e.pl.preemptPod(e.ctx, &testCandidate{"n1", pods[:1]}, testPreemptor{preemptor("1", 100)}, pods[0], Name); err == nil {
				t.Fatal("preemptPod succeeded; want the eviction's error")
			}
			pub, err := kc.PolicyV1alpha1().PodUnavailableBudgets(ns).Get(e.ctx, "web", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := pub.Status.DisruptedPods["web-0"]; ok != tc.wantRecord {
				t.Errorf("disruptedPods %v after the eviction failed with %v; want web-0 recorded: %v", pub.Status.DisruptedPods, tc.err, tc.wantRecord)
			}
		})
	}
}

// TestVictimRecheckedAgainstTheLiveCountBeforeItGoes: a candidate's victims
// are reserved together, then disrupted one at a time. While web-0 goes,
// db-1 turns not Ready; the disruption controller has not written db's
// status yet, which still allows one disruption. Taking db-0 now would
// leave 1 healthy db pod of 2 desired, so it is refused just before it
// goes (StatusBehindPods), not evicted on the reservation's decision,
// which would leave the budget short (as make soak found with PUB app-04:
// 2 available of 3 desired, a pod having turned not Ready between the
// reservation and the delete).
func TestVictimRecheckedAgainstTheLiveCountBeforeItGoes(t *testing.T) {
	web := replicas("web", "n1", "web", true, 0, 0, 0)
	db := replicas("db", "n1", "db", true, 0, 0, 0)
	e := newEnv(t, DefaultArgs(), []*v1.Node{node("n1")}, append(web, db...),
		[]*policyv1.PodDisruptionBudget{appPDB("web", 3, 2, 1).Obj(), appPDB("db", 3, 2, 1).Obj()})
	cs := e.fw.ClientSet()
	var evicted []string
	e.pl.evictPod = func(ctx context.Context, _ preemption.Candidate, _ preemption.ExecutorPreemptor, victim *v1.Pod) error {
		evicted = append(evicted, victim.Name)
		if victim.Name != "web-0" {
			return nil
		}
		flapped := db[1].DeepCopy()
		flapped.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse}}
		if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, flapped, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		for e.budgets.LiveHealthy(budget.KindPDB, ns, "db") != 2 {
			if ctx.Err() != nil {
				t.Fatal("the cache never saw db-1 turn not Ready")
			}
			time.Sleep(time.Millisecond)
		}
		return nil
	}
	c := &testCandidate{"n1", []*v1.Pod{web[0], db[0]}}
	p := testPreemptor{preemptor("2", 100)}
	if err := e.pl.preemptPod(e.ctx, c, p, web[0], Name); err != nil {
		t.Fatalf("preempting web-0: %v", err)
	}
	err := e.pl.preemptPod(e.ctx, c, p, db[0], Name)
	var de *budget.DeniedError
	if !errors.As(err, &de) || de.Decision.Reason() != budget.ReasonStatusBehindPods {
		t.Errorf("preempting db-0: %v, want the live count's refusal (StatusBehindPods)", err)
	}
	if !slices.Equal(evicted, []string{"web-0"}) {
		t.Errorf("evicted %v, want only web-0", evicted)
	}
}

// deleteEnvWithWebPUB is Delete actuation on node n1 with the three Ready
// pods of app web under PUB web (withWebPUB).
func deleteEnvWithWebPUB(t *testing.T) (*env, []*v1.Pod, *kruisefake.Clientset, *budget.Cache) {
	t.Helper()
	// kruise-api's generated fake clientset never sends the initial-events
	// bookmark of a streaming list.
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	pods := replicas("web", "n1", "web", true, 0, 0, 0)
	args := DefaultArgs()
	args.Actuation = ActuationDelete
	e := newEnv(t, args, []*v1.Node{node("n1")}, pods, nil)
	kc, bc := withWebPUB(t, e)
	return e, pods, kc, bc
}

// withWebPUB gives e a budget cache with PUB support and PUB web over app
// web (3 available, 2 desired, 1 allowed), and the plugin its clientset.
func withWebPUB(t *testing.T, e *env) (*kruisefake.Clientset, *budget.Cache) {
	t.Helper()
	return withPUB(t, e, testobj.MakePUB().Namespace(ns).Name("web").Generation(1).MatchLabels("app", "web").
		MaxUnavailable(intstr.FromInt32(1)).Status(3, 2, 1).Obj())
}

// withPUB gives e a budget cache with PUB support and pub, and the plugin
// its clientset.
func withPUB(t *testing.T, e *env, pub *kruisepolicy.PodUnavailableBudget) (*kruisefake.Clientset, *budget.Cache) {
	t.Helper()
	kc := kruisefake.NewSimpleClientset(pub)
	kf := kruiseinformers.NewSharedInformerFactory(kc, 0)
	bc, err := budget.New(e.ctx, e.fw.SharedInformerFactory(), budget.Options{KruiseInformers: kf})
	if err != nil {
		t.Fatal(err)
	}
	kf.Start(e.ctx.Done())
	e.fw.SharedInformerFactory().Start(e.ctx.Done()) // the informers budget.New added
	if !bc.WaitForCacheSync(e.ctx) {
		t.Fatal("the budget cache did not sync")
	}
	e.pl.budgets, e.pl.kruise = bc, kc
	return kc, bc
}

// TestVictimRecheckedAfterItsPUBRecord: web-1 turns not Ready while web-0's
// disruption is written into PUB web (a round trip). The victim is checked
// against the live count once more before it goes: refused
// (StatusBehindPods), not deleted, and its record taken back: a check
// before the record alone would miss the change.
func TestVictimRecheckedAfterItsPUBRecord(t *testing.T) {
	e, pods, kc, bc := deleteEnvWithWebPUB(t)
	cs := e.fw.ClientSet()
	flapped := false
	kc.PrependReactor("update", "podunavailablebudgets", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "status" || flapped {
			return false, nil, nil
		}
		flapped = true
		notReady := pods[1].DeepCopy()
		notReady.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse}}
		if _, err := cs.CoreV1().Pods(ns).UpdateStatus(e.ctx, notReady, metav1.UpdateOptions{}); err != nil {
			t.Error(err)
		}
		for bc.LiveHealthy(budget.KindPUB, ns, "web") != 2 {
			time.Sleep(time.Millisecond)
		}
		return false, nil, nil
	})
	var deleted []string
	e.pl.deletePod = func(_ context.Context, _ preemption.Candidate, _ preemption.ExecutorPreemptor, victim *v1.Pod, _ string) error {
		deleted = append(deleted, victim.Name)
		return nil
	}
	err := e.pl.preemptPod(e.ctx, &testCandidate{"n1", pods[:1]}, testPreemptor{preemptor("1", 100)}, pods[0], Name)
	var de *budget.DeniedError
	if !errors.As(err, &de) || de.Decision.Reason() != budget.ReasonStatusBehindPods {
		t.Fatalf("preempting web-0: %v, want the live count's refusal (StatusBehindPods)", err)
	}
	if len(deleted) != 0 {
		t.Errorf("deleted %v, want nothing", deleted)
	}
	pub, err := kc.PolicyV1alpha1().PodUnavailableBudgets(ns).Get(e.ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := pub.Status.DisruptedPods["web-0"]; ok {
		t.Errorf("web-0's record is still in the PUB's status (%v); it must be taken back", pub.Status.DisruptedPods)
	}
}

// TestDeleteActuationDecidesPUBsUnderTheVictimsOperation: with Delete
// actuation, a victim that spends a PodDisruptionBudget is evicted (see
// deletes), so its PodUnavailableBudgets are decided as for an eviction.
// PUB web protects EVICT only and allows nothing: web-0, which spends PDB
// web, is refused, naming the PUB, and nothing is disrupted. Decided as for
// a delete, which PUB web does not protect, web-0 would be planned free
// under it, evicted, and the PUB broken (with OpenKruise's webhook, refused
// with a 403 every cycle). Without a PDB, web-0 is deleted, which the same
// PUB lets go.
func TestDeleteActuationDecidesPUBsUnderTheVictimsOperation(t *testing.T) {
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	for _, tc := range []struct {
		name    string
		pdb     bool
		want    []string
		refused string
	}{
		{name: "spends a PDB: evicted, so the PUB protects it", pdb: true, refused: "pub shop/web"},
		{name: "no PDB: deleted, which the PUB does not protect", want: []string{"delete web-0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pods := replicas("web", "n1", "web", true, 0, 0, 0)
			var pdbs []*policyv1.PodDisruptionBudget
			if tc.pdb {
				pdbs = append(pdbs, appPDB("web", 3, 2, 1).Obj())
			}
			args := DefaultArgs()
			args.Actuation = ActuationDelete
			e := newEnv(t, args, []*v1.Node{node("n1")}, pods, pdbs)
			withPUB(t, e, testobj.MakePUB().Namespace(ns).Name("web").Generation(1).MatchLabels("app", "web").
				Annotation(budget.AnnotationPUBProtectOperations, "EVICT").MaxUnavailable(intstr.FromInt32(0)).Status(3, 3, 0).Obj())
			var got []string
			e.pl.deletePod = func(_ context.Context, _ preemption.Candidate, _ preemption.ExecutorPreemptor, victim *v1.Pod, _ string) error {
				got = append(got, "delete "+victim.Name)
				return nil
			}
			e.pl.evictPod = func(_ context.Context, _ preemption.Candidate, _ preemption.ExecutorPreemptor, victim *v1.Pod) error {
				got = append(got, "evict "+victim.Name)
				return nil
			}
			err := e.pl.preemptPod(e.ctx, &testCandidate{"n1", pods[:1]}, testPreemptor{preemptor("1", 100)}, pods[0], Name)
			var de *budget.DeniedError
			switch {
			case tc.refused == "" && err != nil:
				t.Errorf("preempting web-0: %v", err)
			case tc.refused != "" && (!errors.As(err, &de) || !strings.Contains(err.Error(), tc.refused)):
				t.Errorf("preempting web-0: got %v, want a refusal by %s", err, tc.refused)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("disruptions %v, want %v", got, tc.want)
			}
		})
	}
}

// TestOverridingPreemptorIsNotRefusedByAPUBRecord: a preemptor at or above
// overrideBudgetsAtPriority may break budgets (docs/configuration.md). The
// cache allowed web-0 under PUB web, but the PUB as the API server has it
// allows nothing now (the cache lags), so its record is refused. web-0 is
// deleted all the same, unrecorded, and no refusal is remembered against
// the preemptor: it is not bound by the budget, so a refused record does
// not stop it. A preemptor below the threshold is refused, and web-0
// stays.
func TestOverridingPreemptorIsNotRefusedByAPUBRecord(t *testing.T) {
	for _, tc := range []struct {
		name     string
		priority int32
		deleted  bool
	}{
		{name: "overriding", priority: 2000, deleted: true},
		{name: "within the budgets", priority: 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, pods, kc, _ := deleteEnvWithWebPUB(t)
			e.pl.args.OverrideBudgetsAtPriority = ptr.To[int32](1000)
			kc.PrependReactor("get", "podunavailablebudgets", func(clienttesting.Action) (bool, runtime.Object, error) {
				return true, testobj.MakePUB().Namespace(ns).Name("web").Generation(1).MatchLabels("app", "web").
					MaxUnavailable(intstr.FromInt32(1)).Status(2, 2, 0).Obj(), nil
			})
			var deleted []string
			e.pl.deletePod = func(_ context.Context, _ preemption.Candidate, _ preemption.ExecutorPreemptor, victim *v1.Pod, _ string) error {
				deleted = append(deleted, victim.Name)
				return nil
			}
			p := preemptor("1", tc.priority)
			err := e.pl.preemptPod(e.ctx, &testCandidate{"n1", pods[:1]}, testPreemptor{p}, pods[0], Name)
			if got := len(deleted) == 1; got != tc.deleted {
				t.Errorf("deleted %v (err %v); want web-0 deleted: %v", deleted, err, tc.deleted)
			}
			if got := err == nil && !e.pl.refused.has(p.UID); got != tc.deleted {
				t.Errorf("preemptPod: %v, refusal remembered: %v; want neither: %v", err, e.pl.refused.has(p.UID), tc.deleted)
			}
		})
	}
}

// TestVictimRecordedInAShortPUBIsNotTakenOnItsOldRecord: PUB web records
// web-0's disruption already (an earlier attempt whose delete was answered
// 500 kept it: the outcome was unknown), so rule 5 lets web-0 go without a
// new record. Since then another pod of web turned not Ready: the API
// server's PUB counts 1 available of 2 desired without web-0, but the
// cache has not seen that yet and still counts every pod Ready. web-0 is
// refused on the PUB read from the API server (InsufficientBudget), not
// deleted on its old record, which would leave the PUB short (as
// TestPromiseAllActorsUnderFaults, seed 7, found with PUB app-03: 2
// available of 3 desired).
func TestVictimRecordedInAShortPUBIsNotTakenOnItsOldRecord(t *testing.T) {
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	pods := replicas("web", "n1", "web", true, 0, 0, 0)
	args := DefaultArgs()
	args.Actuation = ActuationDelete
	e := newEnv(t, args, []*v1.Node{node("n1")}, pods, nil)
	recorded := func(available int32) *kruisepolicy.PodUnavailableBudget {
		return testobj.MakePUB().Namespace(ns).Name("web").Generation(1).MatchLabels("app", "web").
			MaxUnavailable(intstr.FromInt32(1)).Status(available, 2, 0).Disrupted(time.Now(), "web-0").Obj()
	}
	// The cache's PUB: whole without web-0.
	kc, _ := withPUB(t, e, recorded(2))
	// The API server's, read fresh: short without it.
	kc.PrependReactor("get", "podunavailablebudgets", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, recorded(1), nil
	})
	var deleted []string
	e.pl.deletePod = func(_ context.Context, _ preemption.Candidate, _ preemption.ExecutorPreemptor, victim *v1.Pod, _ string) error {
		deleted = append(deleted, victim.Name)
		return nil
	}
	err := e.pl.preemptPod(e.ctx, &testCandidate{"n1", pods[:1]}, testPreemptor{preemptor("1", 100)}, pods[0], Name)
	var de *budget.DeniedError
	if !errors.As(err, &de) || de.Decision.Reason() != budget.ReasonInsufficientBudget {
		t.Errorf("preempting web-0: %v, want the PUB's refusal (InsufficientBudget)", err)
	}
	if len(deleted) != 0 {
		t.Errorf("deleted %v, want nothing", deleted)
	}
}
