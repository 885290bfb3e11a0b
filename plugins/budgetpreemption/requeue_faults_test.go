package budgetpreemption

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	kruisefake "github.com/openkruise/kruise-api/client/clientset/versioned/fake"
	kruiseinformers "github.com/openkruise/kruise-api/client/informers/externalversions"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/kubernetes"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"

	"github.com/budgetguard/budgetguard/plugins/budget"
)

// Requeueing under the faults of a real cluster: a preemptor that a budget
// refused in any way is retried when the budget frees, and not only when
// the cache itself denied it.

// refusingHandle is a framework handle whose client's Eviction API refuses
// some victims, and which records the pods the plugin activates.
type refusingHandle struct {
	fwk.Handle
	cs        kubernetes.Interface
	activated chan map[string]*v1.Pod
}

func (h *refusingHandle) ClientSet() kubernetes.Interface { return h.cs }
func (h *refusingHandle) Activate(_ klog.Logger, pods map[string]*v1.Pod) {
	h.activated <- pods
}

// apiRefusesEnv is Strict mode with Evict actuation on node n1: web-0 under
// pdb shop/web, which allows 1 disruption in the cache's eyes, and three
// pods under no budget. The 4-CPU preemptor needs all four; the API server
// refuses web-0 with a 429 (it has seen a status the cache has not).
func apiRefusesEnv(t *testing.T) (*env, *refusingHandle, *evictionServer, *v1.Pod) {
	t.Helper()
	p := preemptor("4", 100)
	pods := append(replicas("web", "n1", "web", true, 0), replicas("free", "n1", "", true, 0, 0, 0)...)
	e := newEnv(t, nil, []*v1.Node{node("n1")}, append(pods, p), []*policyv1.PodDisruptionBudget{appPDB("web", 1, 0, 1).Obj()})
	srv, cs := serveEvictions(t, "web-0")
	h := &refusingHandle{Handle: e.fw, cs: cs, activated: make(chan map[string]*v1.Pod, 10)}
	e.pl.fh = h
	if err := e.pl.watchBudgetInformers(e.ctx, e.fw.SharedInformerFactory()); err != nil {
		t.Fatal(err)
	}
	return e, h, srv, p
}

// drain forgets the activations recorded so far.
func drain(h *refusingHandle) {
	for {
		select {
		case <-h.activated:
		default:
			return
		}
	}
}

func expectActivated(t *testing.T, h *refusingHandle, p *v1.Pod, within time.Duration, what string) {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case got := <-h.activated:
			if got[p.Namespace+"/"+p.Name] != nil {
				return
			}
		case <-deadline:
			t.Fatalf("%s: the preemptor was not activated", what)
		}
	}
}

// TestPreemptorRefusedByA429RequeuedWhenTheBudgetFrees: the API server
// refused the victim the cache allowed (the cache was behind). When the
// PDB's status then frees, the preemptor is activated, and its next cycle
// tries the node again: the cache has caught up. No budget denial is
// recorded in the cycle, so PostFilter must remember the preemptor itself;
// forgotten, it would wait for the queue's 5-minute flush, and the node
// would stay refused until the refusal ran out.
func TestPreemptorRefusedByA429RequeuedWhenTheBudgetFrees(t *testing.T) {
	e, h, srv, p := apiRefusesEnv(t)
	if _, status := e.postFilterN1(t, p); status.IsSuccess() {
		t.Fatal("PostFilter succeeded; the API server refuses web-0")
	}
	if n := srv.count("web-0"); n != 1 {
		t.Fatalf("web-0 posted %d times, want 1", n)
	}
	// The cancelled reservation of web-0 requeues the blocked preemptors,
	// this one among them: its retry finds the node refused.
	expectActivated(t, h, p, 10*time.Second, "after its victim's reservation was cancelled")
	if _, status := e.postFilterN1(t, p); status.IsSuccess() || !strings.Contains(status.Message(), "refused by a disruption budget") {
		t.Fatalf("the retry: %v; want n1 refused", status)
	}
	if n := srv.count("web-0"); n != 1 {
		t.Fatalf("web-0 posted %d times after the retry, want 1 (the node is refused)", n)
	}
	drain(h)
	pdbs := e.fw.ClientSet().PolicyV1().PodDisruptionBudgets(ns)
	cur, err := pdbs.Get(e.ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Status.DisruptionsAllowed = 2
	cur.ResourceVersion = "2" // the fake clientset keeps what it is given
	freed, err := pdbs.UpdateStatus(e.ctx, cur, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	expectActivated(t, h, p, 10*time.Second, "after the PDB freed")
	for {
		if v, _ := e.budgets.ObservedResourceVersion(budget.KindPDB, ns, "web"); v == freed.ResourceVersion {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, status := e.postFilterN1(t, p)
	if n := srv.count("web-0"); n != 2 {
		t.Logf("second PostFilter: %v", status)
		t.Errorf("after the cache caught up, web-0 was posted %d times in all, want 2 (the node is a candidate again)", n)
	}
}

// TestPreemptorRefusedByAWebhookIsRemembered: OpenKruise's webhook refuses
// web-0's eviction with a 403 that names its PUB (the cache allowed it:
// the webhook counts on a status the cache has not seen). That is a budget
// refusal as much as the Eviction API's 429: the next cycle finds the node
// refused, naming the webhook's answer, and web-0 is not posted again.
// Remembering only 429s and the cache's own denials would make every cycle
// try the same candidate again. An RBAC 403 is not a budget's
// refusal and is not remembered.
func TestPreemptorRefusedByAWebhookIsRemembered(t *testing.T) {
	for _, tc := range []struct {
		name       string
		message    string
		remembered bool
	}{
		{name: "webhook", remembered: true,
			message: `admission webhook "vpod.kb.io" denied the request: podunavailablebudget.policy.kruise.io "web" is forbidden: pub unavailable allowed is negative`},
		{name: "rbac",
			message: `pods "web-0" is forbidden: User "system:serviceaccount:budgetguard:scheduler" cannot create resource "pods/eviction" in API group "" in the namespace "shop"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, _, srv, p := apiRefusesEnv(t)
			srv.refusal = &metav1.Status{Status: metav1.StatusFailure, Reason: metav1.StatusReasonForbidden, Code: http.StatusForbidden, Message: tc.message}
			if _, status := e.postFilterN1(t, p); status.IsSuccess() {
				t.Fatal("PostFilter succeeded; the API server refuses web-0")
			}
			_, status := e.postFilterN1(t, p)
			n := srv.count("web-0")
			if got := strings.Contains(status.Message(), "refused by a disruption budget") && strings.Contains(status.Message(), "pub unavailable allowed is negative"); got != tc.remembered {
				t.Errorf("second cycle: %v; want the node refused with the webhook's answer: %v", status, tc.remembered)
			}
			if want := map[bool]int{true: 1, false: 2}[tc.remembered]; n != want {
				t.Errorf("web-0 posted %d times in two cycles, want %d", n, want)
			}
		})
	}
}

// TestPreemptorRetriedWhenItsRefusalRunsOut: nothing about the budget
// changes after the 429, so nothing but the refusal's end can requeue the
// preemptor; when it runs out, the preemptor is activated rather than left
// to the queue's 5-minute flush.
func TestPreemptorRetriedWhenItsRefusalRunsOut(t *testing.T) {
	e, h, _, p := apiRefusesEnv(t)
	e.pl.refused.ttl = 100 * time.Millisecond
	if _, status := e.postFilterN1(t, p); status.IsSuccess() {
		t.Fatal("PostFilter succeeded; the API server refuses web-0")
	}
	expectActivated(t, h, p, 10*time.Second, "after the refusal ran out")
}

// TestPreemptorsRequeuedWhenAReservationEndsUnused: a reservation that is
// cancelled frees its budget without any budget event; the preemptors it
// blocked are activated.
func TestPreemptorsRequeuedWhenAReservationEndsUnused(t *testing.T) {
	e, h, _, _ := apiRefusesEnv(t)
	other := preemptor("1", 100)
	other.Name, other.UID = "other", "other"
	e.pl.blocked.add(other)
	web0, err := e.pl.pods.Pods(ns).Get("web-0")
	if err != nil {
		t.Fatal(err)
	}
	d, r := e.budgets.Reserve(web0, budget.OperationEvict)
	if !d.Allowed || r == nil {
		t.Fatalf("reserve web-0: %s", d.Message())
	}
	r.Cancel()
	expectActivated(t, h, other, 10*time.Second, "after a reservation was cancelled")
}

// TestPreemptorTurnedAwayWhilePUBSupportStartsIsRequeued: the cache synced
// without PUBs (not served), then the API became served; until the PUB
// informer has listed, the cache is not synced again, and PostFilter turns
// preemptors away naming that. Once it has, they are activated: every
// sync requeues, not only the first, or such a preemptor would wait for
// the queue's 5-minute flush.
func TestPreemptorTurnedAwayWhilePUBSupportStartsIsRequeued(t *testing.T) {
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	p := preemptor("2", 100)
	e := newEnv(t, nil, []*v1.Node{node("n1")}, append(replicas("web", "n1", "web", true, 0, 0), p), nil)
	kc := kruisefake.NewSimpleClientset()
	release := make(chan struct{})
	var listed atomic.Bool
	kc.PrependReactor("list", "podunavailablebudgets", func(clienttesting.Action) (bool, runtime.Object, error) {
		<-release
		listed.Store(true)
		return false, nil, nil
	})
	kf := kruiseinformers.NewSharedInformerFactory(kc, 0)
	disc := &lateKruise{}
	c, err := budget.New(e.ctx, e.fw.SharedInformerFactory(), budget.Options{KruiseInformers: kf, Discovery: disc, PUBDiscoveryInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	e.fw.SharedInformerFactory().Start(e.ctx.Done())
	kf.Start(e.ctx.Done())
	if !c.WaitForCacheSync(e.ctx) {
		t.Fatal("the cache did not sync without PUBs")
	}
	h := &refusingHandle{Handle: e.fw, activated: make(chan map[string]*v1.Pod, 10)}
	pl := newPlugin(DefaultArgs(), h, c, feature.Features{})
	pl.lifetime = e.ctx
	e.pl = pl

	disc.served.Store(true)
	for !c.PUBEnabled() {
		time.Sleep(10 * time.Millisecond)
	}
	_, status := e.postFilterN1(t, p)
	if status.Code() != fwk.Unschedulable || !strings.Contains(status.Message(), "budget cache not synced (InformersNotSynced") {
		t.Fatalf("PostFilter while the PUB informer lists = %v %q, want Unschedulable naming the informers", status.Code(), status.Message())
	}
	select {
	case got := <-h.activated:
		t.Fatalf("activated %v before the cache synced", got)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	expectActivated(t, h, p, 10*time.Second, "after the PUB informer listed")
	if !listed.Load() {
		t.Error("activated before the PUB informer listed")
	}
}

// TestPreemptorRefusedWhileTheStatusIsBehindIsRetried: PDB web's status
// counts 5 healthy pods, but the pod informer has 4 (the fifth turned Ready
// in the status's eyes before the informer delivered it): StatusBehindPods.
// When the informer catches up there is no budget event to requeue the
// preemptor, so it is retried shortly after the refusal rather than at the
// scheduling queue's 5-minute flush (which
// TestPreemptionRequeueLatencyAfterReplacementReady met in CI, one round in
// ten, without the retry).
func TestPreemptorRefusedWhileTheStatusIsBehindIsRetried(t *testing.T) {
	p := preemptor("1", 100)
	e := newEnv(t, nil, []*v1.Node{node("n1")}, append(replicas("web", "n1", "web", true, 0, 0, 0, 0), p), []*policyv1.PodDisruptionBudget{appPDB("web", 5, 4, 1).Obj()})
	h := &refusingHandle{Handle: e.fw, activated: make(chan map[string]*v1.Pod, 10)}
	e.pl.fh = h
	_, status := e.postFilterN1(t, p)
	if status.IsSuccess() || !strings.Contains(status.Message(), "has not counted a change yet") {
		t.Fatalf("PostFilter: %v; want a StatusBehindPods refusal", status)
	}
	expectActivated(t, h, p, 10*time.Second, "after a StatusBehindPods refusal, with no budget event")
}
