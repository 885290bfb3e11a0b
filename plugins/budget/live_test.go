package budget

import (
	"cmp"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/budgetguard/budgetguard/internal/testobj"
)

// notReady is pod name of app web, not Ready.
func notReady(name string) *v1.Pod { return webPod(name).Ready(false).Obj() }

// TestLiveCountRefusesWhatTheStatusHasNotCounted: the PDB's status allows a
// disruption (4 healthy, 3 desired), but b has just turned not Ready and
// the disruption controller has not written the status since. Evicting a
// would leave 2 healthy pods of 3 desired, so it is refused, naming the
// budget and both counts; the Eviction API, deciding on the status, would
// allow it. Once the status counts b, the refusal is the status's own; once
// b is Ready again and counted, a may go. On the status alone, a would go
// while b is not Ready and leave the budget short (as make soak found with
// PUB app-03: 2 available of 3).
func TestLiveCountRefusesWhatTheStatusHasNotCounted(t *testing.T) {
	h := newHarness(t)
	h.add(webPDB("web", pdbStatus{healthy: 4, desired: 3, allowed: 1}).Obj())
	h.livePods(webPod("a").Obj(), webPod("b").Obj(), webPod("c").Obj(), webPod("d").Obj())
	a := webPod("a").Obj()
	mustAllow(t, h.c.Decide(a, OperationEvict))
	if n := h.c.LiveHealthy(KindPDB, ns, "web"); n != 4 {
		t.Fatalf("LiveHealthy = %d, want 4", n)
	}

	h.podEvent(notReady("b"), false)
	d := h.c.Decide(a, OperationEvict)
	mustDeny(t, d, ReasonStatusBehindPods)
	if msg := d.Message(); !strings.Contains(msg, "pdb shop/web") || !strings.Contains(msg, "counts 4 healthy, but 3 covered pods are healthy now") {
		t.Errorf("message %q, want it to name pdb shop/web and both counts", msg)
	}
	// A pod that is not Ready takes nothing from the count: b may go.
	mustAllow(t, h.c.Decide(notReady("b"), OperationEvict))

	h.pdb(webPDB("web", pdbStatus{healthy: 3, desired: 3, allowed: 0}).Obj())
	mustDeny(t, h.c.Decide(a, OperationEvict), ReasonInsufficientBudget)

	h.podEvent(webPod("b").Obj(), false)
	h.pdb(webPDB("web", pdbStatus{healthy: 4, desired: 3, allowed: 1}).Obj())
	mustAllow(t, h.c.Decide(a, OperationEvict))
}

// TestLiveCountGuardsUnhealthyPodsUnderIfHealthyBudget: rule 3 on the live
// count. PDB web requires 3 of a, b, c (Ready) and d (not Ready), and its
// status says 3 healthy: the application is whole, so under IfHealthyBudget
// (also when unset) d may go, taking nothing. Then b turns not Ready before
// the disruption controller writes the status: the application is
// disrupted, and d is refused (StatusBehindPods) at the decision and just
// before its disruption, naming the budget and both counts, where the
// Eviction API, deciding on the status, would let it go. Under AlwaysAllow d
// may go at any time. Once b is Ready again, d may go.
func TestLiveCountGuardsUnhealthyPodsUnderIfHealthyBudget(t *testing.T) {
	for _, policy := range []policyv1.UnhealthyPodEvictionPolicyType{"", policyv1.IfHealthyBudget, policyv1.AlwaysAllow} {
		t.Run(cmp.Or(string(policy), "unset"), func(t *testing.T) {
			h := newHarness(t)
			web := webPDB("web", pdbStatus{healthy: 3, desired: 3, allowed: 0})
			if policy != "" {
				web = web.UnhealthyPodEvictionPolicy(policy)
			}
			h.add(web.Obj())
			h.livePods(webPod("a").Obj(), webPod("b").Obj(), webPod("c").Obj(), notReady("d"))
			d := notReady("d")
			for _, op := range []Operation{OperationEvict, OperationDelete} {
				mustAllow(t, h.c.Decide(d, op))
			}

			h.podEvent(notReady("b"), false)
			for _, op := range []Operation{OperationEvict, OperationDelete} {
				got := h.c.Decide(d, op)
				err := h.c.RecheckLive(d, op)
				if policy == policyv1.AlwaysAllow {
					mustAllow(t, got)
					if err != nil {
						t.Errorf("RecheckLive(%s) = %v, want nil", op, err)
					}
					continue
				}
				mustDeny(t, got, ReasonStatusBehindPods)
				want := "pdb shop/web: pod is not ready and the application is disrupted; the status counts 3 healthy, but 2 covered pods are healthy now and 3 are desired"
				if msg := got.Message(); !strings.Contains(msg, want) {
					t.Errorf("%s: message %q, want it to contain %q", op, msg, want)
				}
				var de *DeniedError
				if !errors.As(err, &de) || de.Decision.Denials[0].Reason != ReasonStatusBehindPods {
					t.Errorf("RecheckLive(%s) = %v, want a StatusBehindPods refusal", op, err)
				}
			}

			h.podEvent(webPod("b").Obj(), false)
			mustAllow(t, h.c.Decide(d, OperationEvict))
			if err := h.c.RecheckLive(d, OperationEvict); err != nil {
				t.Errorf("RecheckLive after b is Ready again = %v, want nil", err)
			}
		})
	}
}

// TestLiveCountLeavesOutPodsBeingDisrupted: pods still Ready but already
// being disrupted are not counted twice, and not counted as healthy: a held
// in the ledger (evicted by this process, not yet in the status), b
// recorded in the status's disruptedPods (the API server's record of an
// eviction). With 5 Ready pods and 2 desired, each of them leaves room for
// exactly one more: c is allowed while 5 are Ready, and refused after d
// turns not Ready, before the status counts it.
func TestLiveCountLeavesOutPodsBeingDisrupted(t *testing.T) {
	h := newHarness(t)
	// The API server has evicted b: 5 healthy counted before, 1 of 3
	// disruptions spent (b), 2 desired.
	h.add(webPDB("web", pdbStatus{healthy: 4, desired: 2, allowed: 2}).Disrupted(epoch, "b").Obj())
	h.livePods(webPod("a").Obj(), webPod("b").Obj(), webPod("c").Obj(), webPod("d").Obj(), webPod("e").Obj())
	if _, r := h.c.Reserve(webPod("a").Obj(), OperationEvict); r == nil {
		t.Fatal("the reservation of a spent nothing")
	}
	// Live: 5 Ready, less a and b, is 3; 2 desired: one more may go.
	mustAllow(t, h.c.Decide(webPod("c").Obj(), OperationEvict))
	h.podEvent(notReady("d"), false)
	mustDeny(t, h.c.Decide(webPod("c").Obj(), OperationEvict), ReasonStatusBehindPods)
}

// TestLiveCountOfAPUB: rule 5 with the live count. PUB web covers 4 Running
// Ready pods, 3 desired; c is recorded unavailable (an in-place update) and
// d turns not Ready before Kruise's controller has written the status: a is
// refused. A PUB's status.unavailablePods entry is not counted again.
func TestLiveCountOfAPUB(t *testing.T) {
	h := newHarness(t)
	h.add(pub("web", pdbStatus{healthy: 3, desired: 2, allowed: 1}).MatchLabels("app", "web").Unavailable(epoch, "c").Obj())
	h.livePods(webPod("a").Obj(), webPod("b").Obj(), webPod("c").Obj(), webPod("d").Obj())
	mustAllow(t, h.c.Decide(webPod("a").Obj(), OperationDelete))
	h.podEvent(notReady("d"), false)
	mustDeny(t, h.c.Decide(webPod("a").Obj(), OperationDelete), ReasonStatusBehindPods)
}

// TestLiveCountOfAPUBCountsAsKruisesController: OpenKruise's PUB controller
// counts the pods its selector or targetRef covers; a pod that names the PUB
// only in its related-pub annotation is decided under the PUB (Kruise's
// webhook follows the annotation) but not counted. So the live count of PUB
// web is 3 of its own pods, not 4: were the stray pod counted, a decision
// after one of web's pods turned not Ready would see 3 healthy of 3 desired
// where Kruise sees 2.
func TestLiveCountOfAPUBCountsAsKruisesController(t *testing.T) {
	h := newHarness(t)
	h.add(pub("web", pdbStatus{healthy: 3, desired: 2, allowed: 1}).MatchLabels("app", "web").Obj())
	stray := testobj.RunningPod(ns, "stray").Annotation(AnnotationRelatedPUB, "web").Obj()
	h.livePods(webPod("a").Obj(), webPod("b").Obj(), webPod("c").Obj(), stray)
	if n := h.c.LiveHealthy(KindPUB, ns, "web"); n != 3 {
		t.Errorf("live count of pub web: %d, want 3 (its selector's pods)", n)
	}
	h.podEvent(notReady("c"), false)
	mustDeny(t, h.c.Decide(webPod("a").Obj(), OperationDelete), ReasonStatusBehindPods)
	mustDeny(t, h.c.Decide(stray, OperationDelete), ReasonStatusBehindPods)
}

// digestPod is web pod name whose container's image is a digest, with the
// status's imageID running imageID.
func digestPod(name, imageID string) *v1.Pod {
	pod := webPod(name).Obj()
	pod.Spec.Containers = []v1.Container{{Name: "app", Image: "registry.example/web@sha256:" + strings.Repeat("a", 64)}}
	pod.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "app", Image: "registry.example/web:1", ImageID: imageID, Ready: true}}
	return pod
}

// TestLiveCountOfAPUBLeavesOutInconsistentPods: OpenKruise's PUB controller
// counts a pod available only when its spec and status are consistent
// (IsPodStateConsistent). Pod d's spec asks for a digest that its status's
// imageID does not run yet (an update in place under way): Ready, but not
// available, so PUB web counts 3 of its 4 Ready pods, and once c turns not
// Ready too a disruption of a is refused. Were d counted, a would be let
// go with 2 available of 2 desired left as Kruise counts them.
func TestLiveCountOfAPUBLeavesOutInconsistentPods(t *testing.T) {
	h := newHarness(t)
	h.add(pub("web", pdbStatus{healthy: 3, desired: 2, allowed: 1}).MatchLabels("app", "web").Obj())
	stale := digestPod("d", "docker-pullable://registry.example/web@sha256:"+strings.Repeat("b", 64))
	h.livePods(webPod("a").Obj(), webPod("b").Obj(), webPod("c").Obj(), stale)
	if n := h.c.LiveHealthy(KindPUB, ns, "web"); n != 3 {
		t.Errorf("live count of pub web: %d, want 3 (d's image is not the digest its spec asks for)", n)
	}
	h.podEvent(notReady("c"), false)
	mustDeny(t, h.c.Decide(webPod("a").Obj(), OperationDelete), ReasonStatusBehindPods)

	running := digestPod("d", "docker-pullable://registry.example/web@sha256:"+strings.Repeat("a", 64))
	h.podEvent(running, false)
	if n := h.c.LiveHealthy(KindPUB, ns, "web"); n != 3 {
		t.Errorf("live count of pub web once d runs its digest: %d, want 3 (a, b, d)", n)
	}
	mustAllow(t, h.c.Decide(webPod("a").Obj(), OperationDelete))
}

// TestDecisionFromTheMemoKeepsARelatedPUB: pod a is counted under PDB web
// alone, but its related-pub annotation names PUB other, which allows
// nothing. A decision about the informer's own object (which the memo of
// a's coverage answers for a pod under PDBs alone) still decides under PUB
// other.
func TestDecisionFromTheMemoKeepsARelatedPUB(t *testing.T) {
	h := newHarness(t)
	h.add(webPDB("web", oneLeft).Obj(), pub("other", exhausted).MatchLabels("app", "other").Obj())
	a := webPod("a").Annotation(AnnotationPodRelatedPUB, "other").Obj()
	h.livePods(a, webPod("b").Obj(), webPod("c").Obj())
	for range 2 { // the second decision would come from the memo
		mustDeny(t, h.c.Decide(a, OperationEvict), ReasonInsufficientBudget)
	}
}

// TestLiveCountFollowsCoverage: the count follows pods that join or leave
// a budget (a label change, a deletion) and budgets whose selector changes,
// and a budget added after its pods counts them.
func TestLiveCountFollowsCoverage(t *testing.T) {
	h := newHarness(t)
	h.livePods(webPod("a").Obj(), webPod("b").Obj(), webPod("c").Obj(),
		testobj.RunningPod(ns, "x").Label("app", "other").Obj())
	h.add(webPDB("web", pdbStatus{healthy: 3, desired: 2, allowed: 1}).Obj())
	count := func() int32 { return h.c.LiveHealthy(KindPDB, ns, "web") }
	if n := count(); n != 3 {
		t.Fatalf("a PDB added after its pods counts %d, want 3", n)
	}
	h.podEvent(testobj.RunningPod(ns, "c").Label("app", "moved").Obj(), false)
	if n := count(); n != 2 {
		t.Errorf("after c left app=web: %d, want 2", n)
	}
	h.podEvent(webPod("b").Obj(), true)
	if n := count(); n != 1 {
		t.Errorf("after b was deleted: %d, want 1", n)
	}
	other := webPDB("web", pdbStatus{healthy: 1, desired: 0, allowed: 1}).MatchLabels("app", "other").Obj()
	h.pdb(other)
	if n := count(); n != 1 {
		t.Errorf("after the selector moved to app=other: %d, want 1 (x)", n)
	}
	h.c.onPDB(other, true)
	if n := count(); n != 0 {
		t.Errorf("after the PDB was deleted: %d, want 0", n)
	}
	// Made again under the same name: a new count, which the pods join,
	// and an update of a pod counted against it changes nothing.
	h.pdb(other)
	h.podEvent(testobj.RunningPod(ns, "x").Label("app", "other").Obj(), false)
	if n := count(); n != 1 {
		t.Errorf("after the PDB was made again: %d, want 1 (x)", n)
	}
	h.podEvent(testobj.RunningPod(ns, "x").Label("app", "other").Obj(), true)
	if n := count(); n != 0 {
		t.Errorf("after x was deleted: %d, want 0", n)
	}
	// A pod made again under its name, seen as an update (a relist).
	h.podEvent(testobj.RunningPod(ns, "y").UID("uid-y1").Label("app", "other").Obj(), false)
	h.podEvent(testobj.RunningPod(ns, "y").UID("uid-y2").Label("app", "other").Obj(), false)
	if n := count(); n != 1 {
		t.Errorf("after y was made again: %d, want 1", n)
	}
	checkLiveIndex(t, h)
}

// checkLiveIndex fails t unless the live index holds each pod once, by
// name and by UID.
func checkLiveIndex(t *testing.T, h *harness) {
	t.Helper()
	x := h.c.live
	x.mu.RLock()
	defer x.mu.RUnlock()
	if len(x.pods) != len(x.bySrc) {
		t.Errorf("live index: %d pods by name, %d by object", len(x.pods), len(x.bySrc))
	}
	for k, p := range x.pods {
		if x.bySrc[p.src] != p {
			t.Errorf("live index: pod %v (UID %s) is not found by its object", k, p.uid)
		}
	}
}

// TestStatusAloneUntilThePodInformerHasSynced: before the pod informer has
// delivered its initial list, the live count is partial, so decisions use
// the status alone (the plugins refuse everything until the Cache syncs).
func TestStatusAloneUntilThePodInformerHasSynced(t *testing.T) {
	h := newHarness(t)
	h.add(webPDB("web", pdbStatus{healthy: 4, desired: 3, allowed: 1}).Obj())
	h.podEvent(webPod("a").Obj(), false)
	mustAllow(t, h.c.Decide(webPod("a").Obj(), OperationEvict))
	h.c.liveOn.Store(true)
	mustDeny(t, h.c.Decide(webPod("a").Obj(), OperationEvict), ReasonStatusBehindPods)
}

// TestRecordedReadyPodIsFreeOnlyAboveTheBudget: a's eviction timed out
// after the API server had recorded it (a in disruptedPods, allowed taken
// down), so a is still Ready, and the PDB's spec has since been raised to
// 3 desired. Under rule 4 a preemption delete of a spends nothing new, but
// taking it leaves 2 healthy pods of 3 desired: refused. With 2 desired
// the app keeps its budget without a, and a may go. A recorded pod always
// free to delete would leave the budget short (as TestPromiseAllActors
// found with PDB app-09: 2 healthy of 4 desired). The same holds for a
// PUB's record.
func TestRecordedReadyPodIsFreeOnlyAboveTheBudget(t *testing.T) {
	for _, tc := range []struct {
		desired int32
		allowed bool
	}{{3, false}, {2, true}} {
		h := newHarness(t)
		h.add(webPDB("web", pdbStatus{healthy: 2, desired: tc.desired, allowed: 0}).Disrupted(epoch, "a").Obj())
		h.livePods(webPod("a").Obj(), webPod("b").Obj(), webPod("c").Obj())
		d := h.c.Decide(webPod("a").Obj(), OperationDelete)
		if tc.allowed {
			mustAllow(t, d)
			continue
		}
		mustDeny(t, d, ReasonStatusBehindPods)
	}
	h := newHarness(t)
	h.add(pub("web", pdbStatus{healthy: 2, desired: 3, allowed: 0}).MatchLabels("app", "web").Disrupted(epoch, "a").Obj())
	h.livePods(webPod("a").Obj(), webPod("b").Obj(), webPod("c").Obj())
	mustDeny(t, h.c.Decide(webPod("a").Obj(), OperationDelete), ReasonStatusBehindPods)
}

// TestLiveCountFollowsAWorkloadThatAppearsLate: PUB web covers the pods of
// ReplicaSet web by targetRef, and the pods reach the Cache before the
// ReplicaSet does (informers deliver in no common order; a descheduler dry
// run reads workloads from another cluster than its pods). The pods are not
// covered yet, so the PUB counts none healthy and would refuse every
// disruption; when the ReplicaSet arrives, its namespace is counted again.
// Left to the next minute's recount, the count would stay at 0 until then,
// and a dry run would predict 0 evictions that the PUB allows (as
// TestDeschedulerDryRunHonoursPUBByTargetRef once did on a cold machine).
func TestLiveCountFollowsAWorkloadThatAppearsLate(t *testing.T) {
	h := newHarness(t)
	h.add(pub("web", pdbStatus{healthy: 3, desired: 2, allowed: 1}).TargetRef("apps/v1", "ReplicaSet", "web").Obj())
	rs := testobj.MakeReplicaSet().Namespace(ns).Name("web").UID("uid-rs-web").Obj()
	var pods []*v1.Pod
	for _, name := range []string{"a", "b", "c"} {
		pods = append(pods, webPod(name).OwnedBy("apps/v1", "ReplicaSet", rs.Name, rs.UID).Obj())
	}
	h.livePods(pods...)
	if n := h.c.LiveHealthy(KindPUB, ns, "web"); n != 0 {
		t.Fatalf("before the ReplicaSet is known the PUB counts %d, want 0", n)
	}
	h.add(rs)
	h.c.onWorkload(rs)
	if n := h.c.LiveHealthy(KindPUB, ns, "web"); n != 3 {
		t.Errorf("after the ReplicaSet arrived the PUB counts %d, want 3", n)
	}
	mustAllow(t, h.c.Decide(pods[0], OperationEvict))
}

// TestDecisionFromTheMemoFollowsCoverage: a pod under PDBs alone is decided
// from its memo, the budgets found when its informer object was last
// counted, and every change in which budgets cover it ends the memo: a
// second PDB, a selector that moves away, a PUB by selector, a workload a
// PUB's targetRef names, a new object of the pod. The Cache counts a
// budget's namespace again after each such change, which makes new memos;
// a is kept out of the pod lister so that only the namespace's coverage
// generation can end its memo, as it does for a decision made while the
// namespace is being counted again.
func TestDecisionFromTheMemoFollowsCoverage(t *testing.T) {
	h := newHarness(t)
	rs := testobj.MakeReplicaSet().Namespace(ns).Name("web").UID("uid-rs-web").Obj()
	a := webPod("a").OwnedBy("apps/v1", "ReplicaSet", rs.Name, rs.UID).Obj()
	h.livePods(webPod("b").OwnedBy("apps/v1", "ReplicaSet", rs.Name, rs.UID).Obj(), webPod("c").Obj(), webPod("d").Obj())
	h.add(webPDB("web", pdbStatus{healthy: 4, desired: 2, allowed: 2}).Obj())
	h.podEvent(a, false)
	fromMemo := func() bool {
		h.c.live.mu.RLock()
		defer h.c.live.mu.RUnlock()
		_, ok := h.c.live.selfOf(a).memo(a, nil)
		return ok
	}
	spends := func(d Decision) []string {
		t.Helper()
		mustAllow(t, d)
		var names []string
		for _, r := range d.Spends {
			names = append(names, r.String())
		}
		return names
	}
	if !fromMemo() {
		t.Fatal("a pod under one PDB is not decided from its memo")
	}
	if got := spends(h.c.Decide(a, OperationEvict)); !reflect.DeepEqual(got, []string{"pdb " + ns + "/web"}) {
		t.Fatalf("spends %v, want pdb web", got)
	}
	// A status update keeps the memo, and the decision reads the new status.
	h.pdb(webPDB("web", pdbStatus{healthy: 4, desired: 4, allowed: 0}).Obj())
	if !fromMemo() {
		t.Error("a PDB's new status ended the memo")
	}
	mustDeny(t, h.c.Decide(a, OperationEvict), ReasonInsufficientBudget)
	h.pdb(webPDB("web", pdbStatus{healthy: 4, desired: 2, allowed: 2}).Obj())

	h.add(webPDB("web2", pdbStatus{healthy: 4, desired: 2, allowed: 2}).Obj())
	mustDeny(t, h.c.Decide(a, OperationEvict), ReasonMultiplePDBs)
	h.pdb(webPDB("web", pdbStatus{healthy: 0, desired: 0, allowed: 0}).MatchLabels("app", "other").Obj())
	if got := spends(h.c.Decide(a, OperationEvict)); !reflect.DeepEqual(got, []string{"pdb " + ns + "/web2"}) {
		t.Fatalf("after web's selector moved away: spends %v, want pdb web2", got)
	}
	// The namespace was counted again (a is in the informer's store), so
	// a may have a new memo; it must name web2 alone.
	h.c.live.mu.RLock()
	memo, ok := h.c.live.selfOf(a).memo(a, nil)
	h.c.live.mu.RUnlock()
	if ok && (len(memo) != 1 || memo[0].key.name != "web2") {
		t.Errorf("a's memo outlived web's new selector: %d PDBs, want web2 alone", len(memo))
	}
	h.podEvent(a, false)
	if !fromMemo() {
		t.Error("a's own event made no memo")
	}

	h.add(pub("sel", pdbStatus{healthy: 4, desired: 2, allowed: 2}).MatchLabels("app", "web").Obj())
	if got := spends(h.c.Decide(a, OperationEvict)); !reflect.DeepEqual(got, []string{"pdb " + ns + "/web2", "pub " + ns + "/sel"}) {
		t.Fatalf("after PUB sel: spends %v, want pdb web2 and pub sel", got)
	}
	if fromMemo() {
		t.Error("a pod under a PUB is decided from its memo")
	}
	h.c.onPUB(pub("sel", pdbStatus{}).MatchLabels("app", "web").Obj(), true)

	h.add(pub("rs", pdbStatus{healthy: 2, desired: 1, allowed: 1}).TargetRef("apps/v1", "ReplicaSet", "web").Obj())
	if got := spends(h.c.Decide(a, OperationEvict)); !reflect.DeepEqual(got, []string{"pdb " + ns + "/web2"}) {
		t.Fatalf("before ReplicaSet web is known: spends %v, want pdb web2", got)
	}
	h.podEvent(a, false)
	if !fromMemo() {
		t.Error("before ReplicaSet web is known, a (under web2 alone) has no memo")
	}
	h.add(rs)
	h.c.onWorkload(rs)
	if got := spends(h.c.Decide(a, OperationEvict)); !reflect.DeepEqual(got, []string{"pdb " + ns + "/web2", "pub " + ns + "/rs"}) {
		t.Fatalf("after ReplicaSet web arrived: spends %v, want pdb web2 and pub rs", got)
	}

	moved := testobj.RunningPod(ns, "a").Label("app", "none").Obj()
	h.podEvent(moved, false)
	if d := h.c.Decide(moved, OperationEvict); !d.Allowed || len(d.Spends) != 0 {
		t.Fatalf("a pod no budget covers: %+v, want allowed, spending nothing", d)
	}
	if got := spends(h.c.Decide(a, OperationEvict)); len(got) == 0 {
		t.Errorf("the old object of a, labelled app=web, spends nothing: its labels are not the new object's")
	}
	checkLiveIndex(t, h)
}

// checkCoverage fails t unless the live index holds a coverage entry for
// exactly the namespaces it counts pods of, each holding those pods.
func checkCoverage(t *testing.T, h *harness) {
	t.Helper()
	x := h.c.live
	x.mu.RLock()
	defer x.mu.RUnlock()
	perNS := map[string]int{}
	for k, p := range x.pods {
		perNS[k.namespace]++
		if g := x.coverage[k.namespace]; g == nil || p.ns != g {
			t.Errorf("live index: pod %v is not filed under its namespace's coverage entry", k)
		} else if _, ok := g.pods[p]; !ok {
			t.Errorf("live index: pod %v is missing from its namespace's pods", k)
		}
	}
	for namespace, g := range x.coverage {
		if len(g.pods) != perNS[namespace] || len(g.pods) == 0 {
			t.Errorf("live index: namespace %s's coverage entry holds %d pods, the index %d", namespace, len(g.pods), perNS[namespace])
		}
	}
}

// listingHook is a pod lister that runs hook after it has taken its list
// and before it returns it: what an informer event does that lands between
// a list and the live index's lock.
type listingHook struct {
	corelisters.PodLister
	hook func()
}

func (l listingHook) List(sel labels.Selector) ([]*v1.Pod, error) {
	pods, err := l.PodLister.List(sel)
	l.hook()
	return pods, err
}

func (l listingHook) Pods(namespace string) corelisters.PodNamespaceLister {
	return listingHookNS{l.PodLister.Pods(namespace), l.hook}
}

type listingHookNS struct {
	corelisters.PodNamespaceLister
	hook func()
}

func (l listingHookNS) List(sel labels.Selector) ([]*v1.Pod, error) {
	pods, err := l.PodNamespaceLister.List(sel)
	l.hook()
	return pods, err
}

// eventDuringList makes h's next recount run event (an informer event:
// store, then handler) on another goroutine after it has listed, and wait
// for the event for up to a moment: a recount that lists outside the live
// index's lock lets the event complete before it counts what it listed; one
// that lists under the lock holds the event back until it is done.
func eventDuringList(h *harness, event func()) (done <-chan struct{}) {
	ch := make(chan struct{})
	var once sync.Once
	h.c.podLister = listingHook{PodLister: corelisters.NewPodLister(h.factory.Core().V1().Pods().Informer().GetIndexer()), hook: func() {
		once.Do(func() {
			go func() { event(); close(ch) }()
			select {
			case <-ch:
			case <-time.After(200 * time.Millisecond):
			}
		})
	}}
	return ch
}

// TestRecountKeepsEventsHandledDuringItsList: a pod event handled between
// recount's list and its lock is never overwritten by the older listed
// object. Under the old recount (list, then lock) the pod that had just
// turned not Ready counted healthy again (rule 7 defeated until its next
// event), and a pod deleted in between was counted again for ever.
func TestRecountKeepsEventsHandledDuringItsList(t *testing.T) {
	for _, tc := range []struct {
		name  string
		event func(h *harness)
		want  int32
	}{
		{"turned not Ready", func(h *harness) { h.podEvent(webPod("a").ResourceVersion("12").Ready(false).Obj(), false) }, 2},
		{"deleted", func(h *harness) { h.podEvent(webPod("a").ResourceVersion("10").Obj(), true) }, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.add(webPDB("web", pdbStatus{healthy: 3, desired: 2, allowed: 1}).Obj())
			h.livePods(webPod("a").ResourceVersion("10").Obj(), webPod("b").ResourceVersion("10").Obj(), webPod("c").ResourceVersion("10").Obj())
			done := eventDuringList(h, func() { tc.event(h) })
			h.c.recount(ns)
			<-done
			if n := h.c.LiveHealthy(KindPDB, ns, "web"); n != tc.want {
				t.Errorf("after a recount with a pod that %s during its list: %d healthy, want %d", tc.name, n, tc.want)
			}
			checkLiveIndex(t, h)
			checkCoverage(t, h)
			if tc.name == "deleted" {
				h.c.live.mu.RLock()
				_, kept := h.c.live.pods[podKey{ns, "a"}]
				h.c.live.mu.RUnlock()
				if kept {
					t.Error("the deleted pod is still in the live index")
				}
			}
		})
	}
}

// TestOlderEventThanTheRecountChangesNothing: recount counted a pod from
// the informer's store (resourceVersion 12, not Ready) before the informer
// delivered the event of an older version (11, Ready) to the Cache; that
// event must not make the pod healthy again.
func TestOlderEventThanTheRecountChangesNothing(t *testing.T) {
	h := newHarness(t)
	h.add(webPDB("web", pdbStatus{healthy: 3, desired: 2, allowed: 1}).Obj())
	h.livePods(webPod("a").ResourceVersion("10").Obj(), webPod("b").ResourceVersion("10").Obj())
	store := h.factory.Core().V1().Pods().Informer().GetStore()
	if err := store.Update(webPod("a").ResourceVersion("12").Ready(false).Obj()); err != nil {
		t.Fatal(err)
	}
	h.c.recount(ns)
	if n := h.c.LiveHealthy(KindPDB, ns, "web"); n != 1 {
		t.Fatalf("after the recount: %d healthy, want 1", n)
	}
	h.c.onPod(webPod("a").ResourceVersion("11").Obj(), false) // delivered late
	if n := h.c.LiveHealthy(KindPDB, ns, "web"); n != 1 {
		t.Errorf("after an older event than the recount's object: %d healthy, want 1", n)
	}
	h.c.onPod(webPod("a").ResourceVersion("13").Obj(), false)
	if n := h.c.LiveHealthy(KindPDB, ns, "web"); n != 2 {
		t.Errorf("after a newer event: %d healthy, want 2", n)
	}
	checkLiveIndex(t, h)
}

// TestRecountPrunesPodsTheListLacks: a pod the informer's store no longer
// has (its delete event not handled yet, or lost) is forgotten by the next
// recount; its later delete event changes nothing.
func TestRecountPrunesPodsTheListLacks(t *testing.T) {
	h := newHarness(t)
	h.add(webPDB("web", pdbStatus{healthy: 3, desired: 2, allowed: 1}).Obj())
	h.livePods(webPod("a").Obj(), webPod("b").Obj())
	if err := h.factory.Core().V1().Pods().Informer().GetStore().Delete(webPod("a").Obj()); err != nil {
		t.Fatal(err)
	}
	for _, namespace := range []string{ns, ""} {
		h.c.recount(namespace)
		if n := h.c.LiveHealthy(KindPDB, ns, "web"); n != 1 {
			t.Errorf("after recount(%q): %d healthy, want 1", namespace, n)
		}
	}
	h.c.onPod(webPod("a").Obj(), true)
	if n := h.c.LiveHealthy(KindPDB, ns, "web"); n != 1 {
		t.Errorf("after a's late delete event: %d healthy, want 1", n)
	}
	checkLiveIndex(t, h)
	checkCoverage(t, h)
}

// TestCoverageEntriesGoWithTheirPods: the live index keeps a coverage entry
// only for namespaces it counts pods of; pods and budgets that come and go
// in many namespaces leave none behind, so the index does not keep one for
// every namespace ever seen (a pod without any budget included).
func TestCoverageEntriesGoWithTheirPods(t *testing.T) {
	h := newHarness(t)
	for i := range 50 {
		namespace := fmt.Sprintf("ns-%d", i)
		pdb := testobj.MakePDB().Namespace(namespace).Name("web").UID("uid-pdb-"+namespace).MatchLabels("app", "web").MinAvailable(1).Obj()
		h.add(pdb)
		covered := testobj.RunningPod(namespace, "a").Label("app", "web").Obj()
		free := testobj.RunningPod(namespace, "b").Label("app", "other").Obj()
		h.podEvent(covered, false)
		h.podEvent(free, false)
		checkCoverage(t, h)
		h.podEvent(covered, true)
		h.podEvent(free, true)
		h.c.onPDB(pdb, true)
	}
	h.c.live.mu.RLock()
	n := len(h.c.live.coverage)
	h.c.live.mu.RUnlock()
	if n != 0 {
		t.Errorf("the live index holds %d coverage entries with no pod counted, want 0", n)
	}
	checkLiveIndex(t, h)
}

// The live count's sentence counts in words that agree with the numbers:
// "1 covered pod is", "1 is desired", "1 other".
func TestLiveMessageCountsInTheSingular(t *testing.T) {
	for _, tc := range []struct {
		statusHealthy, healthy, busy, desired, planned int32
		want                                           string
	}{
		{2, 1, 0, 1, 0, "the status counts 2 healthy, but 1 covered pod is healthy now and 1 is desired: the budget's controller has not counted a change yet"},
		{4, 3, 1, 3, 1, "the status counts 4 healthy, but 3 covered pods are healthy now (1 of them being disrupted) and 3 are desired: the budget's controller has not counted a change yet; needs 2 (this pod and 1 other of the same disruption)"},
		{4, 3, 0, 2, 2, "the status counts 4 healthy, but 3 covered pods are healthy now and 2 are desired: the budget's controller has not counted a change yet; needs 3 (this pod and 2 others of the same disruption)"},
	} {
		if got := liveMessage(tc.statusHealthy, tc.healthy, tc.busy, tc.desired, tc.planned); got != tc.want {
			t.Errorf("liveMessage(%d, %d, %d, %d, %d) =\n  %q\nwant\n  %q", tc.statusHealthy, tc.healthy, tc.busy, tc.desired, tc.planned, got, tc.want)
		}
	}
}
