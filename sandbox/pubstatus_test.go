package sandbox

import (
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	kruisebeta "github.com/budgetguard/budgetguard/apis/kruise/policy/v1beta1"
	"github.com/budgetguard/budgetguard/internal/testobj"
)

const pubTestNamespace = "shop"

// webPod is a Running, Ready pod labelled app=web in pubTestNamespace.
func webPod(name string) *testobj.PodWrapper {
	return testobj.RunningPod(pubTestNamespace, name).Label("app", "web")
}

// webPUB is PodUnavailableBudget web in pubTestNamespace at generation 3.
func webPUB() *testobj.PUBWrapper {
	return testobj.MakePUB().Namespace(pubTestNamespace).Name("web").Generation(3)
}

// betaPUB is w's PodUnavailableBudget at policy.kruise.io/v1beta1, converted
// as OpenKruise converts it.
func betaPUB(t testing.TB, w *testobj.PUBWrapper) *kruisebeta.PodUnavailableBudget {
	t.Helper()
	pub, err := kruisebeta.FromV1alpha1(w.Obj())
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

// webTemplate is the pod template of the test workloads.
var webTemplate = testobj.MakePod().Label("app", "web").Template()

// pubCounts are the counts of a PodUnavailableBudget's status.
type pubCounts struct{ total, desired, current, allowed int32 }

func countsOf(st kruisebeta.PodUnavailableBudgetStatus) pubCounts {
	return pubCounts{st.TotalReplicas, st.DesiredAvailable, st.CurrentAvailable, st.UnavailableAllowed}
}

func TestComputePUBStatus(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	ready := func(names ...string) []*corev1.Pod {
		var pods []*corev1.Pod
		for _, n := range names {
			pods = append(pods, webPod(n).Obj())
		}
		return pods
	}
	maxOne := func() *testobj.PUBWrapper { return webPUB().MaxUnavailable(intstr.FromInt32(1)) }
	tests := []struct {
		name            string
		pub             *testobj.PUBWrapper
		pods            []*corev1.Pod
		expected        int32
		want            pubCounts
		wantDisrupted   []string
		wantUnavailable []string
		wantRecheck     time.Time
		wantErr         string
	}{
		{name: "maxUnavailable int", pub: maxOne(), pods: ready("a", "b", "c"), expected: 3,
			want: pubCounts{total: 3, desired: 2, current: 3, allowed: 1}},
		{name: "maxUnavailable percent rounds up", pub: webPUB().MaxUnavailable(intstr.FromString("25%")), pods: ready("a", "b", "c", "d", "e", "f", "g", "h"), expected: 10,
			want: pubCounts{total: 10, desired: 7, current: 8, allowed: 1}},
		{name: "maxUnavailable above expected gives 0 desired", pub: webPUB().MaxUnavailable(intstr.FromInt32(5)), pods: ready("a", "b", "c"), expected: 3,
			want: pubCounts{total: 3, desired: 0, current: 3, allowed: 3}},
		{name: "minAvailable int", pub: webPUB().MinAvailable(intstr.FromInt32(2)), pods: ready("a", "b", "c"), expected: 3,
			want: pubCounts{total: 3, desired: 2, current: 3, allowed: 1}},
		{name: "minAvailable percent rounds up", pub: webPUB().MinAvailable(intstr.FromString("50%")), pods: ready("a", "b", "c"), expected: 3,
			want: pubCounts{total: 3, desired: 2, current: 3, allowed: 1}},
		{name: "maxUnavailable wins over minAvailable", pub: webPUB().MaxUnavailable(intstr.FromInt32(2)).MinAvailable(intstr.FromInt32(3)),
			pods: ready("a", "b", "c"), expected: 3, want: pubCounts{total: 3, desired: 1, current: 3, allowed: 2}},
		{name: "neither gives 0 desired", pub: webPUB(), pods: ready("a", "b"), expected: 2,
			want: pubCounts{total: 2, desired: 0, current: 2, allowed: 2}},
		{name: "unready pod is not available", pub: maxOne(), expected: 3,
			pods: []*corev1.Pod{webPod("a").Obj(), webPod("b").Obj(), webPod("c").Ready(false).Obj()},
			want: pubCounts{total: 3, desired: 2, current: 2, allowed: 0}},
		{name: "unavailableAllowed is never negative", pub: webPUB().MinAvailable(intstr.FromInt32(3)), expected: 3,
			pods: []*corev1.Pod{webPod("a").Obj(), webPod("b").Ready(false).Obj(), webPod("c").Ready(false).Obj()},
			want: pubCounts{total: 3, desired: 3, current: 1, allowed: 0}},
		{name: "terminating, pending and labelled-unavailable pods are not available", pub: maxOne(), expected: 4,
			pods: []*corev1.Pod{
				webPod("a").Obj(),
				webPod("b").Terminating(time.Now()).Obj(),
				webPod("c").Phase(corev1.PodPending).Obj(),
				webPod("d").Label("unavailable-pod.kruise.io/upgrade", "true").Obj(),
			},
			want: pubCounts{total: 4, desired: 3, current: 1, allowed: 0}},
		{name: "fresh disruptedPods entry: pod not available until it times out", expected: 3,
			pub:  maxOne().Disrupted(ago(5*time.Second), "a"),
			pods: ready("a", "b", "c"), want: pubCounts{total: 3, desired: 2, current: 2, allowed: 0},
			wantDisrupted: []string{"a"}, wantRecheck: now.Add(15 * time.Second)},
		{name: "disruptedPods entry after 20s is dropped", expected: 3,
			pub:  maxOne().Disrupted(ago(21*time.Second), "a"),
			pods: ready("a", "b", "c"), want: pubCounts{total: 3, desired: 2, current: 3, allowed: 1}},
		{name: "disruptedPods entry of a gone or terminating pod is dropped", expected: 3,
			pub:  maxOne().Disrupted(ago(time.Second), "gone", "c"),
			pods: []*corev1.Pod{webPod("a").Obj(), webPod("b").Obj(), webPod("c").Terminating(time.Now()).Obj()},
			want: pubCounts{total: 3, desired: 2, current: 2, allowed: 0}},
		{name: "unavailablePods entry times out after 10s", expected: 3,
			pub:  maxOne().Unavailable(ago(11*time.Second), "a").Unavailable(ago(4*time.Second), "b"),
			pods: ready("a", "b", "c"), want: pubCounts{total: 3, desired: 2, current: 2, allowed: 0},
			wantUnavailable: []string{"b"}, wantRecheck: now.Add(6 * time.Second)},
		{name: "recheck at the earliest timeout", expected: 4,
			pub:  maxOne().Disrupted(ago(19*time.Second), "a").Unavailable(ago(time.Second), "b"),
			pods: ready("a", "b", "c", "d"), want: pubCounts{total: 4, desired: 3, current: 2, allowed: 0},
			wantDisrupted: []string{"a"}, wantUnavailable: []string{"b"}, wantRecheck: now.Add(time.Second)},
		{name: "a pod whose spec and status are not consistent is not available", pub: maxOne(), expected: 3,
			pods: []*corev1.Pod{webPod("a").Obj(), webPod("b").Obj(), webPod("c").Container("app", "").Annotation("apps.kruise.io/inplace-update-grace", "{}").Obj()},
			want: pubCounts{total: 3, desired: 2, current: 2, allowed: 0}},
		{name: "invalid percent", pub: webPUB().MaxUnavailable(intstr.FromString("ten")), pods: ready("a"), expected: 1,
			wantErr: "spec.maxUnavailable \"ten\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pub := betaPUB(t, tt.pub)
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
			if gotCounts := countsOf(got); gotCounts != tt.want {
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
				if !at.Equal(&metav1.Time{Time: pub.Status.DisruptedPods[name].Time}) {
					t.Errorf("disruptedPods[%s] = %s, want it kept as %s", name, at, pub.Status.DisruptedPods[name])
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

// pubTestWorkloads returns the listers of an informer factory over a fake
// clientset that holds objs, synced.
func pubTestWorkloads(t *testing.T, objs ...runtime.Object) pubWorkloads {
	t.Helper()
	factory := informers.NewSharedInformerFactory(kubefake.NewClientset(objs...), 0)
	w := newPUBWorkloads(factory)
	factory.Start(t.Context().Done())
	t.Cleanup(factory.Shutdown)
	for typ, ok := range factory.WaitForCacheSync(t.Context().Done()) {
		if !ok {
			t.Fatalf("informer of %v did not sync", typ)
		}
	}
	return w
}

func TestPUBCoverage(t *testing.T) {
	dep := testobj.MakeDeployment().Namespace(pubTestNamespace).Name("web").UID("dep-uid").Replicas(4).Template(webTemplate).Obj()
	replicaSet := func(name, uid string, replicas int32) *testobj.ReplicaSetWrapper {
		return testobj.MakeReplicaSet().Namespace(pubTestNamespace).Name(name).UID(uid).Replicas(replicas).Template(webTemplate)
	}
	ownedBy := func(name, kind, owner, uid string) *testobj.PodWrapper {
		apiVersion := "apps/v1"
		if kind == "ReplicationController" {
			apiVersion = "v1"
		}
		return webPod(name).OwnedBy(apiVersion, kind, owner, types.UID(uid))
	}

	w := pubTestWorkloads(t,
		dep,
		replicaSet("web-old", "rs-old-uid", 1).OwnedBy("apps/v1", "Deployment", dep.Name, dep.UID).Obj(),
		replicaSet("web-new", "rs-new-uid", 3).OwnedBy("apps/v1", "Deployment", dep.Name, dep.UID).Obj(),
		replicaSet("alone", "rs-alone-uid", 2).Obj(),
		testobj.MakeStatefulSet().Namespace(pubTestNamespace).Name("db").UID("ss-uid").Replicas(5).Obj(),
		&corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Namespace: pubTestNamespace, Name: "legacy", UID: "rc-uid"}, Spec: corev1.ReplicationControllerSpec{Replicas: ptr.To[int32](2)}},
		replicaSet("zero", "rs-zero-uid", 0).Obj(),
		ownedBy("old-1", "ReplicaSet", "web-old", "rs-old-uid").Obj(),
		ownedBy("new-1", "ReplicaSet", "web-new", "rs-new-uid").Obj(),
		ownedBy("new-2", "ReplicaSet", "web-new", "rs-new-uid").Ready(false).Obj(),
		ownedBy("new-gone", "ReplicaSet", "web-new", "rs-new-uid").Terminating(time.Now()).Obj(),
		ownedBy("alone-1", "ReplicaSet", "alone", "rs-alone-uid").Obj(),
		ownedBy("db-0", "StatefulSet", "db", "ss-uid").Obj(),
		ownedBy("legacy-1", "ReplicationController", "legacy", "rc-uid").Obj(),
		webPod("bare").Label("tier", "bare").Obj(),
		// Owned by a ReplicaSet of the same name that was replaced: its UID
		// no longer matches.
		ownedBy("stale-1", "ReplicaSet", "alone", "old-alone-uid").Obj(),
		ownedBy("done", "ReplicaSet", "alone", "rs-alone-uid").Phase(corev1.PodSucceeded).Obj(),
		ownedBy("other-app", "ReplicaSet", "alone", "rs-alone-uid").Label("app", "api").Obj(),
		ownedBy("elsewhere", "ReplicaSet", "alone", "rs-alone-uid").Namespace("other").Obj(),
	)

	target := func(apiVersion, kind, name string) *testobj.PUBWrapper {
		return webPUB().TargetRef(apiVersion, kind, name)
	}
	tests := []struct {
		name         string
		pub          *testobj.PUBWrapper
		wantPods     []string
		wantExpected int32
		wantProblem  string
	}{
		{name: "targetRef Deployment: pods of its ReplicaSets, its replicas", pub: target("apps/v1", "Deployment", "web"),
			wantPods: []string{"new-1", "new-2", "old-1"}, wantExpected: 4},
		{name: "targetRef ReplicaSet of a Deployment: its own pods and replicas", pub: target("apps/v1", "ReplicaSet", "web-new"),
			wantPods: []string{"new-1", "new-2"}, wantExpected: 3},
		{name: "targetRef standalone ReplicaSet: only pods with its UID", pub: target("apps/v1", "ReplicaSet", "alone"),
			wantPods: []string{"alone-1", "other-app"}, wantExpected: 2},
		{name: "targetRef StatefulSet", pub: target("apps/v1", "StatefulSet", "db"), wantPods: []string{"db-0"}, wantExpected: 5},
		{name: "targetRef ReplicationController", pub: target("v1", "ReplicationController", "legacy"), wantPods: []string{"legacy-1"}, wantExpected: 2},
		{name: "targetRef ignores the version", pub: target("apps/v1beta2", "StatefulSet", "db"), wantPods: []string{"db-0"}, wantExpected: 5},
		{name: "targetRef missing workload covers nothing", pub: target("apps/v1", "Deployment", "nope")},
		{name: "targetRef workload with 0 replicas covers nothing", pub: target("apps/v1", "ReplicaSet", "zero")},
		{name: "targetRef kind not simulated", pub: target("apps.kruise.io/v1alpha1", "CloneSet", "web"),
			wantProblem: `kind "CloneSet" of apiVersion "apps.kruise.io/v1alpha1" is not simulated`},
		{name: "targetRef invalid apiVersion", pub: target("a/b/c", "Deployment", "web"), wantProblem: `spec.targetRef.apiVersion "a/b/c"`},
		{name: "targetRef wins over selector", pub: target("apps/v1", "StatefulSet", "db").Selector(&metav1.LabelSelector{}),
			wantPods: []string{"db-0"}, wantExpected: 5},
		{name: "selector: active matching pods; expected sums their controllers' replicas, a Deployment once, bare pods 0",
			pub:      webPUB().MatchLabels("app", "web"),
			wantPods: []string{"alone-1", "bare", "db-0", "legacy-1", "new-1", "new-2", "old-1", "stale-1"}, wantExpected: 4 + 2 + 5 + 2},
		{name: "selector of bare pods only expects 0", pub: webPUB().Selector(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"bare"}}}}),
			wantPods: []string{"bare"}, wantExpected: 0},
		{name: "empty selector matches every pod of the namespace", pub: webPUB().Selector(&metav1.LabelSelector{}),
			wantPods: []string{"alone-1", "bare", "db-0", "legacy-1", "new-1", "new-2", "old-1", "other-app", "stale-1"}, wantExpected: 13},
		{name: "neither targetRef nor selector", pub: webPUB(), wantProblem: "neither targetRef nor selector"},
		{name: "invalid selector", pub: webPUB().Selector(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}}),
			wantProblem: "spec.selector"},
		{name: "spec.protectTotalReplicas (from the v1alpha1 annotation) overrides a targetRef's expected count",
			pub:      target("apps/v1", "Deployment", "web").Annotation(kruisebeta.PubProtectTotalReplicasAnnotation, "7"),
			wantPods: []string{"new-1", "new-2", "old-1"}, wantExpected: 7},
		{name: "spec.protectTotalReplicas overrides a selector's expected count",
			pub:      webPUB().MatchLabels("tier", "bare").Annotation(kruisebeta.PubProtectTotalReplicasAnnotation, "3"),
			wantPods: []string{"bare"}, wantExpected: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cov, problem := w.coverage(betaPUB(t, tt.pub))
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

// TestComputePUBStatusCountsIgnoredPods: OpenKruise's controller counts the
// pods a PUB's spec.ignoredPodSelector selects as it counts the others
// (countAvailablePods reads no ignoredPodSelector; only its webhook lets
// them go without spending), so the simulation counts them too.
func TestComputePUBStatusCountsIgnoredPods(t *testing.T) {
	pub := betaPUB(t, webPUB().MatchLabels("app", "web").MaxUnavailable(intstr.FromInt32(1)))
	pub.Spec.IgnoredPodSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"track": "canary"}}
	pods := []*corev1.Pod{webPod("a").Obj(), webPod("b").Obj(), webPod("c").Label("track", "canary").Obj()}
	got, _, err := computePUBStatus(pub, pubCoverage{pods: pods, expected: 3}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if want := (pubCounts{total: 3, desired: 2, current: 3, allowed: 1}); countsOf(got) != want {
		t.Errorf("counts = %+v, want %+v (the ignored pod c counted available)", countsOf(got), want)
	}
}
