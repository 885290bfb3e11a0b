package sandbox

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2/ktesting"

	kruisebeta "github.com/budgetguard/budgetguard/apis/kruise/policy/v1beta1"
	"github.com/budgetguard/budgetguard/internal/testenv"
	"github.com/budgetguard/budgetguard/internal/testobj"
)

// waitForPUBStatus waits until the status of the PodUnavailableBudget
// namespace/name, read at v1beta1, is up to date and has the counts want and
// disrupted disruptedPods entries, and returns the PUB.
func waitForPUBStatus(t *testing.T, pubs pubClient, namespace, name, what string, want pubCounts, disrupted int) *kruisebeta.PodUnavailableBudget {
	t.Helper()
	var got *kruisebeta.PodUnavailableBudget
	testenv.WaitFor(t, time.Minute, what, func(ctx context.Context) (bool, error) {
		var err error
		if got, err = pubs.Get(ctx, namespace, name); err != nil {
			return false, err
		}
		st := got.Status
		if st.ObservedGeneration != got.Generation || countsOf(st) != want || len(st.DisruptedPods) != disrupted {
			return false, fmt.Errorf("PodUnavailableBudget %s at generation %d has status %+v, want %+v with %d disruptedPods",
				name, got.Generation, st, want, disrupted)
		}
		return true, nil
	})
	return got
}

// TestPUBStatusController runs the controller on fake clients: it writes the
// status, follows a pod's readiness, and drops a DisruptedPods entry once it
// times out.
func TestPUBStatusController(t *testing.T) {
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()

	ofWeb := func(name string) *testobj.PodWrapper {
		return webPod(name).OwnedBy("apps/v1", "ReplicaSet", "web", "rs-uid")
	}
	kube := kubefake.NewClientset(
		testobj.MakeReplicaSet().Namespace(pubTestNamespace).Name("web").UID("rs-uid").Replicas(3).Template(webTemplate).Obj(),
		ofWeb("web-a").Obj(), ofWeb("web-b").Obj(), ofWeb("web-c").Obj(),
	)
	pubs := newFakePUBs(t, webPUB().TargetRef("apps/v1", "ReplicaSet", "web").MaxUnavailable(intstr.FromInt32(1)))

	runPUBStatusController(ctx, t, kube, pubs, nil)

	waitForPUBStatus(t, pubs, pubTestNamespace, "web", "all ready", pubCounts{3, 2, 3, 1}, 0)

	if _, err := kube.CoreV1().Pods(pubTestNamespace).UpdateStatus(ctx, ofWeb("web-c").Ready(false).Obj(), metav1.UpdateOptions{}); err != nil {
		t.Fatalf("make web-c unready: %v", err)
	}
	got := waitForPUBStatus(t, pubs, pubTestNamespace, "web", "web-c unready", pubCounts{3, 2, 2, 0}, 0)

	// A DisruptedPods entry as kruise's webhook writes it, 17s old: it
	// counts web-a as unavailable until it times out 3s later, and only a
	// requeue at that time can notice.
	got.Status.DisruptedPods = map[string]metav1.Time{"web-a": metav1.NewTime(time.Now().Add(-pubDisruptedPodTimeout + 3*time.Second))}
	if err := pubs.UpdateStatus(ctx, got); err != nil {
		t.Fatalf("write disruptedPods: %v", err)
	}
	waitForPUBStatus(t, pubs, pubTestNamespace, "web", "web-a disrupted", pubCounts{3, 2, 1, 0}, 1)
	waitForPUBStatus(t, pubs, pubTestNamespace, "web", "entry timed out", pubCounts{3, 2, 2, 0}, 0)
}

// TestPUBStatusControllerCountsAsKruise: the controller counts a pod
// available as OpenKruise's controller does. Of web's 3 Ready pods, web-b is
// one the PUB's spec.ignoredPodSelector selects, which Kruise's controller
// counts all the same; web-c is in its in-place update's grace period (its
// spec and status not consistent), which it does not count until the
// update is done.
func TestPUBStatusControllerCountsAsKruise(t *testing.T) {
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()

	ofWeb := func(name string) *testobj.PodWrapper {
		return webPod(name).OwnedBy("apps/v1", "ReplicaSet", "web", "rs-uid")
	}
	kube := kubefake.NewClientset(
		testobj.MakeReplicaSet().Namespace(pubTestNamespace).Name("web").UID("rs-uid").Replicas(3).Template(webTemplate).Obj(),
		ofWeb("web-a").Obj(), ofWeb("web-b").Label("track", "canary").Obj(),
		ofWeb("web-c").Container("app", "").Annotation("apps.kruise.io/inplace-update-grace", `{"revision":"r2"}`).Obj(),
	)
	pub := betaPUB(t, webPUB().TargetRef("apps/v1", "ReplicaSet", "web").MaxUnavailable(intstr.FromInt32(1)))
	pub.Spec.IgnoredPodSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"track": "canary"}}
	pubs := newFakePUBs(t)
	pubs.set(pub)

	runPUBStatusController(ctx, t, kube, pubs, nil)

	waitForPUBStatus(t, pubs, pubTestNamespace, "web", "web-c updating in place", pubCounts{3, 2, 2, 0}, 0)
	if _, err := kube.CoreV1().Pods(pubTestNamespace).Update(ctx, ofWeb("web-c").Container("app", "").Obj(), metav1.UpdateOptions{}); err != nil {
		t.Fatalf("end web-c's grace period: %v", err)
	}
	waitForPUBStatus(t, pubs, pubTestNamespace, "web", "web-c updated", pubCounts{3, 2, 3, 1}, 0)
}

// TestPUBStatusSimulation starts a control plane with SimulatePUBStatus and
// checks the status of a PUB by targetRef and one by selector over a
// ReplicaSet of 3 that the real ReplicaSet controller and the simulated
// kubelet run, before and after one pod becomes unready. Like the other
// tests of this package, it stops its control plane before it returns, so
// they never run two at once.
func TestPUBStatusSimulation(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	opts := DefaultOptions()
	opts.SimulatePUBStatus = true
	cp := startControlPlane(ctx, t, opts)
	env := testenv.New(cp.Client).WithKruise(cp.KruiseClient)

	ns := env.NewNamespace(t)
	node := env.CreateNode(t, ns, testobj.MakeNode())
	// There is no scheduler: the template binds the pods to the node.
	template := testobj.MakePod().Label("app", "web").Node(node.Name).Container("app", "").Template()
	env.CreateReplicaSet(t, ns, testobj.MakeReplicaSet().Name("web").Replicas(3).Template(template))
	env.CreatePUB(t, ns, testobj.MakePUB().Name("by-target").TargetRef("apps/v1", "ReplicaSet", "web").MaxUnavailable(intstr.FromInt32(1)))
	env.CreatePUB(t, ns, testobj.MakePUB().Name("by-selector").MatchLabels("app", "web").MinAvailable(intstr.FromString("50%")))
	pubs, err := newPUBClient(cp.Config)
	if err != nil {
		t.Fatal(err)
	}

	// The simulation writes no disruptedPods entries: that is the webhook's.
	waitForStatus := func(what string, want pubCounts) {
		t.Helper()
		for _, name := range []string{"by-target", "by-selector"} {
			waitForPUBStatus(t, pubs, ns, name, what, want, 0)
		}
	}
	waitForStatus("3 pods ready", pubCounts{total: 3, desired: 2, current: 3, allowed: 1})

	pods, err := env.ListPods(ctx, ns, nil)
	if err != nil || len(pods) == 0 {
		t.Fatalf("list pods: %d pods, error %v", len(pods), err)
	}
	victim := pods[0].Name
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := cp.Client.CoreV1().Pods(ns).Get(ctx, victim, metav1.GetOptions{})
		if err != nil {
			return err
		}
		metav1.SetMetaDataAnnotation(&pod.ObjectMeta, ReadinessAnnotation, ReadinessNever)
		_, err = cp.Client.CoreV1().Pods(ns).Update(ctx, pod, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("annotate pod %s %s=%s: %v", victim, ReadinessAnnotation, ReadinessNever, err)
	}
	waitForStatus("pod "+victim+" unready", pubCounts{total: 3, desired: 2, current: 2, allowed: 0})
}

// TestPUBStatusControllerSelector: with a selector, only the PUBs it
// matches get a simulated status; another PUB keeps the status written by
// hand.
func TestPUBStatusControllerSelector(t *testing.T) {
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()

	kube := kubefake.NewClientset(
		testobj.MakeReplicaSet().Namespace(pubTestNamespace).Name("web").UID("rs-uid").Replicas(3).Template(webTemplate).Obj(),
		webPod("web-a").OwnedBy("apps/v1", "ReplicaSet", "web", "rs-uid").Obj(),
	)
	simulated := webPUB().TargetRef("apps/v1", "ReplicaSet", "web").MaxUnavailable(intstr.FromInt32(1))
	simulated.Labels = map[string]string{"simulate": "yes"}
	pubs := newFakePUBs(t, webPUB().Name("manual").MaxUnavailable(intstr.FromInt32(1)).Status(7, 7, 7), simulated)

	runPUBStatusController(ctx, t, kube, pubs, labels.SelectorFromSet(labels.Set{"simulate": "yes"}))

	waitForPUBStatus(t, pubs, pubTestNamespace, "web", "the selected PUB's status simulated", pubCounts{3, 2, 1, 0}, 0)
	testenv.Holds(t, time.Second, "the other PUB keeps its status", func(ctx context.Context) (bool, error) {
		got, err := pubs.Get(ctx, pubTestNamespace, "manual")
		if err != nil {
			return false, err
		}
		if st := got.Status; st.CurrentAvailable != 7 || st.DesiredAvailable != 7 || st.UnavailableAllowed != 7 {
			return false, fmt.Errorf("status %+v, want the 7s written by hand", st)
		}
		return true, nil
	})
}

// runPUBStatusController runs the PUB status controller on kube's objects
// and pubs' PUBs (only on the PUBs selector matches, when it is not nil)
// until the test ends.
func runPUBStatusController(ctx context.Context, t *testing.T, kube kubernetes.Interface, pubs pubClient, selector labels.Selector) {
	t.Helper()
	factory := informers.NewSharedInformerFactory(kube, 0)
	c, err := newPUBStatusController(pubs, factory)
	if err != nil {
		t.Fatalf("newPUBStatusController: %v", err)
	}
	if selector != nil {
		c.selector = selector
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); c.run(runCtx) }()
	factory.Start(runCtx.Done())
	t.Cleanup(func() {
		stop()
		<-done
		factory.Shutdown()
	})
}
