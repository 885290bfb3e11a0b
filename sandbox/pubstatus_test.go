package sandbox

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	kruisefake "github.com/openkruise/kruise-api/client/clientset/versioned/fake"
	policyv1alpha1 "github.com/openkruise/kruise-api/policy/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
)

const pubTestNamespace = "shop"

// pubTestPod returns a Running, Ready pod labelled app=web in
// pubTestNamespace, changed by opts.
func pubTestPod(name string, opts ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: pubTestNamespace, Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{"app": "web"}},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func unreadyPod(p *corev1.Pod) {
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
}

func terminatingPod(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.Now()) }

func ownedBy(kind, name string, uid types.UID) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		apiVersion := "apps/v1"
		if kind == "ReplicationController" {
			apiVersion = "v1"
		}
		p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{
			APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: ptr.To(true),
		})
	}
}

func pubTestPUB(spec policyv1alpha1.PodUnavailableBudgetSpec) *policyv1alpha1.PodUnavailableBudget {
	return &policyv1alpha1.PodUnavailableBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: pubTestNamespace, Name: "web", Generation: 3},
		Spec:       spec,
	}
}

func TestComputePUBStatus(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ago := func(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }
	maxU := func(v intstr.IntOrString) policyv1alpha1.PodUnavailableBudgetSpec {
		return policyv1alpha1.PodUnavailableBudgetSpec{MaxUnavailable: &v}
	}
	minA := func(v intstr.IntOrString) policyv1alpha1.PodUnavailableBudgetSpec {
		return policyv1alpha1.PodUnavailableBudgetSpec{MinAvailable: &v}
	}
	ready := func(names ...string) []*corev1.Pod {
		var pods []*corev1.Pod
		for _, n := range names {
			pods = append(pods, pubTestPod(n))
		}
		return pods
	}
	type counts struct{ total, desired, current, allowed int32 }
	tests := []struct {
		name            string
		spec            policyv1alpha1.PodUnavailableBudgetSpec
		status          policyv1alpha1.PodUnavailableBudgetStatus
		pods            []*corev1.Pod
		expected        int32
		want            counts
		wantDisrupted   []string
		wantUnavailable []string
		wantRecheck     time.Time
		wantErr         string
	}{
		{name: "maxUnavailable int", spec: maxU(intstr.FromInt32(1)), pods: ready("a", "b", "c"), expected: 3,
			want: counts{total: 3, desired: 2, current: 3, allowed: 1}},
		{name: "maxUnavailable percent rounds up", spec: maxU(intstr.FromString("25%")), pods: ready("a", "b", "c", "d", "e", "f", "g", "h"), expected: 10,
			want: counts{total: 10, desired: 7, current: 8, allowed: 1}},
		{name: "maxUnavailable above expected gives 0 desired", spec: maxU(intstr.FromInt32(5)), pods: ready("a", "b", "c"), expected: 3,
			want: counts{total: 3, desired: 0, current: 3, allowed: 3}},
		{name: "minAvailable int", spec: minA(intstr.FromInt32(2)), pods: ready("a", "b", "c"), expected: 3,
			want: counts{total: 3, desired: 2, current: 3, allowed: 1}},
		{name: "minAvailable percent rounds up", spec: minA(intstr.FromString("50%")), pods: ready("a", "b", "c"), expected: 3,
			want: counts{total: 3, desired: 2, current: 3, allowed: 1}},
		{name: "maxUnavailable wins over minAvailable", spec: policyv1alpha1.PodUnavailableBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(2)), MinAvailable: ptr.To(intstr.FromInt32(3))},
			pods: ready("a", "b", "c"), expected: 3, want: counts{total: 3, desired: 1, current: 3, allowed: 2}},
		{name: "neither gives 0 desired", pods: ready("a", "b"), expected: 2,
			want: counts{total: 2, desired: 0, current: 2, allowed: 2}},
		{name: "unready pod is not available", spec: maxU(intstr.FromInt32(1)), expected: 3,
			pods: []*corev1.Pod{pubTestPod("a"), pubTestPod("b"), pubTestPod("c", unreadyPod)},
			want: counts{total: 3, desired: 2, current: 2, allowed: 0}},
		{name: "unavailableAllowed is never negative", spec: minA(intstr.FromInt32(3)), expected: 3,
			pods: []*corev1.Pod{pubTestPod("a"), pubTestPod("b", unreadyPod), pubTestPod("c", unreadyPod)},
			want: counts{total: 3, desired: 3, current: 1, allowed: 0}},
		{name: "terminating, pending and labelled-unavailable pods are not available", spec: maxU(intstr.FromInt32(1)), expected: 4,
			pods: []*corev1.Pod{
				pubTestPod("a"),
				pubTestPod("b", terminatingPod),
				pubTestPod("c", func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }),
				pubTestPod("d", func(p *corev1.Pod) { p.Labels["unavailable-pod.kruise.io/upgrade"] = "true" }),
			},
			want: counts{total: 4, desired: 3, current: 1, allowed: 0}},
		{name: "fresh disruptedPods entry: pod not available until it times out", spec: maxU(intstr.FromInt32(1)), expected: 3,
			status: policyv1alpha1.PodUnavailableBudgetStatus{DisruptedPods: map[string]metav1.Time{"a": ago(5 * time.Second)}},
			pods:   ready("a", "b", "c"), want: counts{total: 3, desired: 2, current: 2, allowed: 0},
			wantDisrupted: []string{"a"}, wantRecheck: now.Add(15 * time.Second)},
		{name: "disruptedPods entry after 20s is dropped", spec: maxU(intstr.FromInt32(1)), expected: 3,
			status: policyv1alpha1.PodUnavailableBudgetStatus{DisruptedPods: map[string]metav1.Time{"a": ago(21 * time.Second)}},
			pods:   ready("a", "b", "c"), want: counts{total: 3, desired: 2, current: 3, allowed: 1}},
		{name: "disruptedPods entry of a gone or terminating pod is dropped", spec: maxU(intstr.FromInt32(1)), expected: 3,
			status: policyv1alpha1.PodUnavailableBudgetStatus{DisruptedPods: map[string]metav1.Time{"gone": ago(time.Second), "c": ago(time.Second)}},
			pods:   []*corev1.Pod{pubTestPod("a"), pubTestPod("b"), pubTestPod("c", terminatingPod)},
			want:   counts{total: 3, desired: 2, current: 2, allowed: 0}},
		{name: "unavailablePods entry times out after 10s", spec: maxU(intstr.FromInt32(1)), expected: 3,
			status: policyv1alpha1.PodUnavailableBudgetStatus{UnavailablePods: map[string]metav1.Time{"a": ago(11 * time.Second), "b": ago(4 * time.Second)}},
			pods:   ready("a", "b", "c"), want: counts{total: 3, desired: 2, current: 2, allowed: 0},
			wantUnavailable: []string{"b"}, wantRecheck: now.Add(6 * time.Second)},
		{name: "recheck at the earliest timeout", spec: maxU(intstr.FromInt32(1)), expected: 4,
			status: policyv1alpha1.PodUnavailableBudgetStatus{
				DisruptedPods:   map[string]metav1.Time{"a": ago(19 * time.Second)},
				UnavailablePods: map[string]metav1.Time{"b": ago(time.Second)},
			},
			pods: ready("a", "b", "c", "d"), want: counts{total: 4, desired: 3, current: 2, allowed: 0},
			wantDisrupted: []string{"a"}, wantUnavailable: []string{"b"}, wantRecheck: now.Add(time.Second)},
		{name: "invalid percent", spec: maxU(intstr.FromString("ten")), pods: ready("a"), expected: 1,
			wantErr: "spec.maxUnavailable \"ten\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pub := pubTestPUB(tt.spec)
			pub.Status = tt.status
			got, recheck, err := computePUBStatus(pub, pubCoverage{pods: tt.pods, expected: tt.expected}, now)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("computePUBStatus: %v", err)
			}
			gotCounts := counts{total: got.TotalReplicas, desired: got.DesiredAvailable, current: got.CurrentAvailable, allowed: got.UnavailableAllowed}
			if gotCounts != tt.want {
				t.Errorf("counts = %+v, want %+v", gotCounts, tt.want)
			}
			if got.ObservedGeneration != pub.Generation {
				t.Errorf("observedGeneration = %d, want %d", got.ObservedGeneration, pub.Generation)
			}
			if diff := cmp.Diff(tt.wantDisrupted, sortedKeys(got.DisruptedPods)); diff != "" {
				t.Errorf("disruptedPods (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantUnavailable, sortedKeys(got.UnavailablePods)); diff != "" {
				t.Errorf("unavailablePods (-want,+got):\n%s", diff)
			}
			for name, at := range got.DisruptedPods {
				if !at.Equal(&metav1.Time{Time: tt.status.DisruptedPods[name].Time}) {
					t.Errorf("disruptedPods[%s] = %s, want it kept as %s", name, at, tt.status.DisruptedPods[name])
				}
			}
			if !recheck.Equal(tt.wantRecheck) {
				t.Errorf("recheck at %s, want %s", recheck, tt.wantRecheck)
			}
		})
	}
}

func sortedKeys(m map[string]metav1.Time) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// pubTestWorkloads returns listers over objs.
func pubTestWorkloads(t *testing.T, objs ...any) pubWorkloads {
	t.Helper()
	idx := func() cache.Indexer {
		return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}
	pods, rcs, rss, ds, sss := idx(), idx(), idx(), idx(), idx()
	for _, o := range objs {
		var target cache.Indexer
		switch o.(type) {
		case *corev1.Pod:
			target = pods
		case *corev1.ReplicationController:
			target = rcs
		case *appsv1.ReplicaSet:
			target = rss
		case *appsv1.Deployment:
			target = ds
		case *appsv1.StatefulSet:
			target = sss
		default:
			t.Fatalf("pubTestWorkloads: unexpected %T", o)
		}
		if err := target.Add(o); err != nil {
			t.Fatalf("add %T: %v", o, err)
		}
	}
	return pubWorkloads{
		pods:         corelisters.NewPodLister(pods),
		rcs:          corelisters.NewReplicationControllerLister(rcs),
		replicaSets:  appslisters.NewReplicaSetLister(rss),
		deployments:  appslisters.NewDeploymentLister(ds),
		statefulSets: appslisters.NewStatefulSetLister(sss),
	}
}

func testMeta(name string, uid types.UID) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: pubTestNamespace, Name: name, UID: uid, Labels: map[string]string{"app": "web"}}
}

func testDeployment(name string, uid types.UID, replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: testMeta(name, uid), Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
}

func testReplicaSet(name string, uid types.UID, replicas int32, deployment *appsv1.Deployment) *appsv1.ReplicaSet {
	rs := &appsv1.ReplicaSet{ObjectMeta: testMeta(name, uid), Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(replicas)}}
	if deployment != nil {
		rs.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: deployment.Name, UID: deployment.UID, Controller: ptr.To(true)}}
	}
	return rs
}

func testStatefulSet(name string, uid types.UID, replicas int32) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{ObjectMeta: testMeta(name, uid), Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(replicas)}}
}

func TestPUBCoverage(t *testing.T) {
	dep := testDeployment("web", "dep-uid", 4)
	rsOld := testReplicaSet("web-old", "rs-old-uid", 1, dep)
	rsNew := testReplicaSet("web-new", "rs-new-uid", 3, dep)
	rsAlone := testReplicaSet("alone", "rs-alone-uid", 2, nil)
	ss := testStatefulSet("db", "ss-uid", 5)
	rc := &corev1.ReplicationController{ObjectMeta: testMeta("legacy", "rc-uid"), Spec: corev1.ReplicationControllerSpec{Replicas: ptr.To[int32](2)}}
	zero := testReplicaSet("zero", "rs-zero-uid", 0, nil)

	objs := []any{dep, rsOld, rsNew, rsAlone, ss, rc, zero,
		pubTestPod("old-1", ownedBy("ReplicaSet", "web-old", "rs-old-uid")),
		pubTestPod("new-1", ownedBy("ReplicaSet", "web-new", "rs-new-uid")),
		pubTestPod("new-2", ownedBy("ReplicaSet", "web-new", "rs-new-uid"), unreadyPod),
		pubTestPod("new-gone", ownedBy("ReplicaSet", "web-new", "rs-new-uid"), terminatingPod),
		pubTestPod("alone-1", ownedBy("ReplicaSet", "alone", "rs-alone-uid")),
		pubTestPod("db-0", ownedBy("StatefulSet", "db", "ss-uid")),
		pubTestPod("legacy-1", ownedBy("ReplicationController", "legacy", "rc-uid")),
		pubTestPod("bare", func(p *corev1.Pod) { p.Labels["tier"] = "bare" }),
		// Owned by a ReplicaSet of the same name that was replaced: its UID
		// no longer matches.
		pubTestPod("stale-1", ownedBy("ReplicaSet", "alone", "old-alone-uid")),
		pubTestPod("done", ownedBy("ReplicaSet", "alone", "rs-alone-uid"), func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
		pubTestPod("other-app", ownedBy("ReplicaSet", "alone", "rs-alone-uid"), func(p *corev1.Pod) { p.Labels["app"] = "api" }),
		pubTestPod("elsewhere", ownedBy("ReplicaSet", "alone", "rs-alone-uid"), func(p *corev1.Pod) { p.Namespace = "other" }),
	}
	w := pubTestWorkloads(t, objs...)

	target := func(apiVersion, kind, name string) policyv1alpha1.PodUnavailableBudgetSpec {
		return policyv1alpha1.PodUnavailableBudgetSpec{TargetReference: &policyv1alpha1.TargetReference{APIVersion: apiVersion, Kind: kind, Name: name}}
	}
	selector := func(sel *metav1.LabelSelector) policyv1alpha1.PodUnavailableBudgetSpec {
		return policyv1alpha1.PodUnavailableBudgetSpec{Selector: sel}
	}
	tests := []struct {
		name         string
		spec         policyv1alpha1.PodUnavailableBudgetSpec
		annotations  map[string]string
		wantPods     []string
		wantExpected int32
		wantProblem  string
	}{
		{name: "targetRef Deployment: pods of its ReplicaSets, its replicas", spec: target("apps/v1", "Deployment", "web"),
			wantPods: []string{"new-1", "new-2", "old-1"}, wantExpected: 4},
		{name: "targetRef ReplicaSet of a Deployment: its own pods and replicas", spec: target("apps/v1", "ReplicaSet", "web-new"),
			wantPods: []string{"new-1", "new-2"}, wantExpected: 3},
		{name: "targetRef standalone ReplicaSet: only pods with its UID", spec: target("apps/v1", "ReplicaSet", "alone"),
			wantPods: []string{"alone-1", "other-app"}, wantExpected: 2},
		{name: "targetRef StatefulSet", spec: target("apps/v1", "StatefulSet", "db"), wantPods: []string{"db-0"}, wantExpected: 5},
		{name: "targetRef ReplicationController", spec: target("v1", "ReplicationController", "legacy"), wantPods: []string{"legacy-1"}, wantExpected: 2},
		{name: "targetRef ignores the version", spec: target("apps/v1beta2", "StatefulSet", "db"), wantPods: []string{"db-0"}, wantExpected: 5},
		{name: "targetRef missing workload covers nothing", spec: target("apps/v1", "Deployment", "nope")},
		{name: "targetRef workload with 0 replicas covers nothing", spec: target("apps/v1", "ReplicaSet", "zero")},
		{name: "targetRef kind not simulated", spec: target("apps.kruise.io/v1alpha1", "CloneSet", "web"),
			wantProblem: `kind "CloneSet" of apiVersion "apps.kruise.io/v1alpha1" is not simulated`},
		{name: "targetRef invalid apiVersion", spec: target("a/b/c", "Deployment", "web"), wantProblem: `spec.targetRef.apiVersion "a/b/c"`},
		{name: "targetRef wins over selector", spec: policyv1alpha1.PodUnavailableBudgetSpec{
			TargetReference: &policyv1alpha1.TargetReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db"},
			Selector:        &metav1.LabelSelector{}},
			wantPods: []string{"db-0"}, wantExpected: 5},
		{name: "selector: active matching pods; expected sums their controllers' replicas, a Deployment once, bare pods 0",
			spec:     selector(&metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}),
			wantPods: []string{"alone-1", "bare", "db-0", "legacy-1", "new-1", "new-2", "old-1", "stale-1"}, wantExpected: 4 + 2 + 5 + 2},
		{name: "selector of bare pods only expects 0", spec: selector(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"bare"}}}}),
			wantPods: []string{"bare"}, wantExpected: 0},
		{name: "empty selector matches every pod of the namespace", spec: selector(&metav1.LabelSelector{}),
			wantPods: []string{"alone-1", "bare", "db-0", "legacy-1", "new-1", "new-2", "old-1", "other-app", "stale-1"}, wantExpected: 13},
		{name: "neither targetRef nor selector", spec: policyv1alpha1.PodUnavailableBudgetSpec{}, wantProblem: "neither targetRef nor selector"},
		{name: "invalid selector", spec: selector(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}}),
			wantProblem: "spec.selector"},
		{name: "protect-total-replicas overrides the expected count", spec: target("apps/v1", "Deployment", "web"),
			annotations: map[string]string{policyv1alpha1.PubProtectTotalReplicasAnnotation: "7"},
			wantPods:    []string{"new-1", "new-2", "old-1"}, wantExpected: 7},
		{name: "invalid protect-total-replicas counts 0, as kruise", spec: target("apps/v1", "Deployment", "web"),
			annotations: map[string]string{policyv1alpha1.PubProtectTotalReplicasAnnotation: "many"},
			wantPods:    []string{"new-1", "new-2", "old-1"}, wantProblem: `"many" is not a 32-bit integer`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pub := pubTestPUB(tt.spec)
			pub.Annotations = tt.annotations
			cov, problem := w.coverage(pub)
			if tt.wantProblem == "" && problem != nil {
				t.Errorf("problem = %v, want none", problem)
			}
			if tt.wantProblem != "" && (problem == nil || !strings.Contains(problem.Error(), tt.wantProblem)) {
				t.Errorf("problem = %v, want one containing %q", problem, tt.wantProblem)
			}
			var names []string
			for _, p := range cov.pods {
				names = append(names, p.Name)
			}
			sort.Strings(names)
			if diff := cmp.Diff(tt.wantPods, names); diff != "" {
				t.Errorf("pods (-want,+got):\n%s", diff)
			}
			if cov.expected != tt.wantExpected {
				t.Errorf("expected = %d, want %d", cov.expected, tt.wantExpected)
			}
		})
	}
}

// TestPUBStatusController runs the controller on fake clients: it writes the
// status, follows a pod's readiness, and drops a DisruptedPods entry once it
// times out.
func TestPUBStatusController(t *testing.T) {
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()

	rs := testReplicaSet("web", "rs-uid", 3, nil)
	pods := []*corev1.Pod{
		pubTestPod("web-a", ownedBy("ReplicaSet", "web", "rs-uid")),
		pubTestPod("web-b", ownedBy("ReplicaSet", "web", "rs-uid")),
		pubTestPod("web-c", ownedBy("ReplicaSet", "web", "rs-uid")),
	}
	kube := kubefake.NewClientset(rs, pods[0], pods[1], pods[2])
	pub := pubTestPUB(policyv1alpha1.PodUnavailableBudgetSpec{
		TargetReference: &policyv1alpha1.TargetReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web"},
		MaxUnavailable:  ptr.To(intstr.FromInt32(1)),
	})
	kruise := kruisefake.NewSimpleClientset(pub)

	factory := informers.NewSharedInformerFactory(kube, 0)
	c, err := newPUBStatusController(kruise, factory)
	if err != nil {
		t.Fatalf("newPUBStatusController: %v", err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); c.run(runCtx) }()
	factory.Start(runCtx.Done())
	defer func() {
		stop()
		<-done
		factory.Shutdown()
	}()

	type counts struct{ total, desired, current, allowed int32 }
	waitFor := func(what string, want counts, disrupted int) *policyv1alpha1.PodUnavailableBudget {
		t.Helper()
		var got *policyv1alpha1.PodUnavailableBudget
		err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			got, err = kruise.PolicyV1alpha1().PodUnavailableBudgets(pubTestNamespace).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			st := got.Status
			return (counts{st.TotalReplicas, st.DesiredAvailable, st.CurrentAvailable, st.UnavailableAllowed}) == want &&
				len(st.DisruptedPods) == disrupted && st.ObservedGeneration == got.Generation, nil
		})
		if err != nil {
			t.Fatalf("%s: status %+v, want %+v with %d disruptedPods: %v", what, got.Status, want, disrupted, err)
		}
		return got
	}

	waitFor("all ready", counts{3, 2, 3, 1}, 0)

	unready := pods[2].DeepCopy()
	unreadyPod(unready)
	if _, err := kube.CoreV1().Pods(pubTestNamespace).UpdateStatus(ctx, unready, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("make web-c unready: %v", err)
	}
	got := waitFor("web-c unready", counts{3, 2, 2, 0}, 0)

	// A DisruptedPods entry as kruise's webhook writes it, 17s old: it
	// counts web-a as unavailable until it times out 3s later, and only a
	// requeue at that time can notice.
	got.Status.DisruptedPods = map[string]metav1.Time{"web-a": metav1.NewTime(time.Now().Add(-pubDisruptedPodTimeout + 3*time.Second))}
	if _, err := kruise.PolicyV1alpha1().PodUnavailableBudgets(pubTestNamespace).UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("write disruptedPods: %v", err)
	}
	waitFor("web-a disrupted", counts{3, 2, 1, 0}, 1)
	waitFor("entry timed out", counts{3, 2, 2, 0}, 0)
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
	cp, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	}()

	ns := "pub-status"
	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	if _, err := cp.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create node: %v", err)
	}
	lbls := map[string]string{"app": "web"}
	if _, err := cp.Client.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: lbls},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: lbls},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbls},
				Spec: corev1.PodSpec{
					NodeName:   "node-1", // there is no scheduler
					Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
				},
			},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ReplicaSet: %v", err)
	}
	pubs := cp.KruiseClient.PolicyV1alpha1().PodUnavailableBudgets(ns)
	for _, pub := range []*policyv1alpha1.PodUnavailableBudget{
		{ObjectMeta: metav1.ObjectMeta{Name: "by-target"}, Spec: policyv1alpha1.PodUnavailableBudgetSpec{
			TargetReference: &policyv1alpha1.TargetReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web"},
			MaxUnavailable:  ptr.To(intstr.FromInt32(1)),
		}},
		{ObjectMeta: metav1.ObjectMeta{Name: "by-selector"}, Spec: policyv1alpha1.PodUnavailableBudgetSpec{
			Selector:     &metav1.LabelSelector{MatchLabels: lbls},
			MinAvailable: ptr.To(intstr.FromString("50%")),
		}},
	} {
		if _, err := pubs.Create(ctx, pub, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create PodUnavailableBudget %s: %v", pub.Name, err)
		}
	}

	type counts struct{ total, desired, current, allowed int32 }
	waitForStatus := func(what string, want counts) {
		t.Helper()
		for _, name := range []string{"by-target", "by-selector"} {
			var got *policyv1alpha1.PodUnavailableBudget
			err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
				got, err = pubs.Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				st := got.Status
				return st.ObservedGeneration == got.Generation &&
					(counts{st.TotalReplicas, st.DesiredAvailable, st.CurrentAvailable, st.UnavailableAllowed}) == want, nil
			})
			if err != nil {
				t.Fatalf("%s: PodUnavailableBudget %s has status %+v, want %+v: %v", what, name, got.Status, want, err)
			}
		}
	}
	waitForStatus("3 pods ready", counts{total: 3, desired: 2, current: 3, allowed: 1})

	podList, err := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(podList.Items) == 0 {
		t.Fatalf("list pods: %d pods, error %v", len(podList.Items), err)
	}
	victim := podList.Items[0].Name
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
	waitForStatus("pod "+victim+" unready", counts{total: 3, desired: 2, current: 2, allowed: 0})
}
