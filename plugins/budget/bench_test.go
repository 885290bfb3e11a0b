package budget

import (
	"fmt"
	"math/rand"
	"runtime"
	"testing"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/budgetguard/budgetguard/internal/testobj"
)

// The benchmark cluster: 1,000 namespaces, each with 100 pods of 10 apps
// and 10 PDBs, one per app: 100,000 pods and 10,000 budgets.
const (
	benchNamespaces   = 1000
	benchPodsPerNS    = 100
	benchBudgetsPerNS = 10
)

func benchPod(nsIdx, i int) *v1.Pod {
	app := i % benchBudgetsPerNS
	return testobj.RunningPod(fmt.Sprintf("ns-%d", nsIdx), fmt.Sprintf("pod-%d", i)).UID(fmt.Sprintf("uid-%d-%d", nsIdx, i)).
		Labels(testobj.Labels("app", fmt.Sprintf("app-%d", app), "pod-template-hash", fmt.Sprintf("h%d", app), "tier", "backend")).Obj()
}

func benchPDB(nsIdx, j int) *policyv1.PodDisruptionBudget {
	app := fmt.Sprintf("app-%d", j)
	return webPDB(app, pdbStatus{healthy: 10, desired: 5, allowed: 5}).Namespace(fmt.Sprintf("ns-%d", nsIdx)).MatchLabels("app", app).Obj()
}

type benchCluster struct {
	h    *harness
	pods []*v1.Pod
	pdbs []*policyv1.PodDisruptionBudget
}

// newBenchCluster fills the informers' stores, like a synced informer would,
// and feeds every object to the Cache's handlers unless feed is false.
func newBenchCluster(b *testing.B, feed bool) *benchCluster {
	b.Helper()
	bc := &benchCluster{h: newHarness(b)}
	for n := 0; n < benchNamespaces; n++ {
		for j := 0; j < benchBudgetsPerNS; j++ {
			bc.pdbs = append(bc.pdbs, benchPDB(n, j))
		}
		for i := 0; i < benchPodsPerNS; i++ {
			bc.pods = append(bc.pods, benchPod(n, i))
		}
	}
	onPDB, onPod := bc.h.pdb, func(p *v1.Pod) { bc.h.podEvent(p, false) }
	if !feed {
		onPDB, onPod = nil, nil
	}
	store(b, bc.h.factory.Policy().V1().PodDisruptionBudgets().Informer().GetStore(), bc.pdbs, onPDB)
	store(b, bc.h.factory.Core().V1().Pods().Informer().GetStore(), bc.pods, onPod)
	// The pod informer's initial list is in: decisions check the live
	// count of healthy pods too.
	bc.h.c.liveOn.Store(true)
	return bc
}

// store adds objs to an informer's store and, unless handle is nil, hands
// each to handle.
func store[T any](b *testing.B, s cache.Store, objs []T, handle func(T)) {
	b.Helper()
	for _, o := range objs {
		if err := s.Add(o); err != nil {
			b.Fatal(err)
		}
		if handle != nil {
			handle(o)
		}
	}
}

func BenchmarkDecide(b *testing.B) {
	bc := newBenchCluster(b, true)
	rng := rand.New(rand.NewSource(1))
	order := rng.Perm(len(bc.pods))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d := bc.h.c.Decide(bc.pods[order[i%len(order)]], OperationEvict)
		if !d.Allowed || len(d.Spends) != 1 {
			b.Fatalf("unexpected decision %+v", d)
		}
	}
}

// BenchmarkDecideCopiedPod is BenchmarkDecide for pods that are not the
// objects the Cache's informer delivered (a copy, or a pod read again from
// the API server): the Cache cannot use the memo of their coverage and
// searches the selector index.
func BenchmarkDecideCopiedPod(b *testing.B) {
	bc := newBenchCluster(b, true)
	copies := make([]*v1.Pod, len(bc.pods))
	for i, p := range bc.pods {
		copies[i] = p.DeepCopy()
	}
	rng := rand.New(rand.NewSource(1))
	order := rng.Perm(len(bc.pods))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d := bc.h.c.Decide(copies[order[i%len(order)]], OperationEvict)
		if !d.Allowed || len(d.Spends) != 1 {
			b.Fatalf("unexpected decision %+v", d)
		}
	}
}

// BenchmarkDecideUpstreamReference asks BenchmarkDecide's question, for
// the same pods in the same order, the way the Eviction API answers it
// (k8s.io/kubernetes@v1.36.3 pkg/registry/core/pod/storage/eviction.go):
// list the namespace's PDBs, convert and match every selector, then check
// the one that covers the pod. It lists from the informer's indexer, not
// from the API server, and copies nothing, so it is a lower bound on what
// upstream spends on the question.
func BenchmarkDecideUpstreamReference(b *testing.B) {
	bc := newBenchCluster(b, true)
	lister := bc.h.factory.Policy().V1().PodDisruptionBudgets().Lister()
	rng := rand.New(rand.NewSource(1))
	order := rng.Perm(len(bc.pods))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if !upstreamAllows(lister, bc.pods[order[i%len(order)]]) {
			b.Fatal("unexpected refusal")
		}
	}
}

// upstreamAllows is the Eviction API's answer: canIgnorePDB,
// getPodDisruptionBudgets, the unhealthy-pod policy and checkAndDecrement's
// checks, without the decrement.
func upstreamAllows(lister policylisters.PodDisruptionBudgetLister, pod *v1.Pod) bool {
	switch pod.Status.Phase {
	case v1.PodSucceeded, v1.PodFailed, v1.PodPending:
		return true
	}
	if pod.DeletionTimestamp != nil {
		return true
	}
	all, err := lister.PodDisruptionBudgets(pod.Namespace).List(labels.Everything())
	if err != nil {
		return false
	}
	var pdbs []*policyv1.PodDisruptionBudget
	for _, pdb := range all {
		selector, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || !selector.Matches(labels.Set(pod.Labels)) {
			continue
		}
		pdbs = append(pdbs, pdb)
	}
	switch len(pdbs) {
	case 0:
		return true
	case 1:
	default:
		return false
	}
	pdb := pdbs[0]
	ready := false
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodReady {
			ready = c.Status == v1.ConditionTrue
			break
		}
	}
	st := &pdb.Status
	if !ready {
		if p := pdb.Spec.UnhealthyPodEvictionPolicy; p != nil && *p == policyv1.AlwaysAllow {
			return true
		}
		if st.CurrentHealthy >= st.DesiredHealthy && st.DesiredHealthy > 0 {
			return true
		}
	}
	return st.ObservedGeneration >= pdb.Generation && st.DisruptionsAllowed > 0 && len(st.DisruptedPods) <= MaxDisruptedPods
}

// BenchmarkDecideWithLedger decides while 1,000 reservations are held.
func BenchmarkDecideWithLedger(b *testing.B) {
	bc := newBenchCluster(b, true)
	for i := 0; i < 1000; i++ {
		bc.h.c.Reserve(bc.pods[i*97%len(bc.pods)], OperationEvict)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		bc.h.c.Decide(bc.pods[(i*7919)%len(bc.pods)], OperationEvict)
	}
}

// BenchmarkPlanReserve is a preemption-sized plan: three victims, reserved.
func BenchmarkPlanReserve(b *testing.B) {
	bc := newBenchCluster(b, true)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := bc.h.c.NewPlan(OperationDelete)
		for v := 0; v < 3; v++ {
			p.Add(bc.pods[(i*31+v*10)%len(bc.pods)])
		}
		r, _ := p.Reserve()
		r.Cancel()
	}
}

// BenchmarkPodUpdateEvent is the Cache's share of handling one pod update,
// with 1,000 reservations held elsewhere and none for this pod (the common
// case), and for a pod that holds one. Each update is a new object of the
// pod, as an informer delivers it (a new status; the same labels), the
// pod's two versions taking turns.
func BenchmarkPodUpdateEvent(b *testing.B) {
	bc := newBenchCluster(b, true)
	for i := 0; i < 1000; i++ {
		bc.h.c.Reserve(bc.pods[i*97%len(bc.pods)], OperationEvict)
	}
	versions := [2][]*v1.Pod{make([]*v1.Pod, len(bc.pods)), bc.pods}
	for i, p := range bc.pods {
		p = p.DeepCopy()
		p.ResourceVersion = "2"
		versions[0][i] = p
	}
	update := func(i, pod int) { bc.h.c.onPod(versions[i%2][pod], false) }
	b.Run("no-reservation", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			update(i/len(bc.pods), (i*7919+1)%len(bc.pods))
		}
	})
	b.Run("reserved-pod", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			update(i/1000, (i%1000)*97%len(bc.pods))
		}
	})
}

func heapInUse() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkMemory reports the heap the Cache holds beyond the informers'
// own stores: per pod after every pod event was handled, and per budget.
func BenchmarkMemory(b *testing.B) {
	for i := 0; i < b.N; i++ {
		bc := newBenchCluster(b, false)
		base := heapInUse()
		for _, p := range bc.pods {
			bc.h.podEvent(p, false)
		}
		afterPods := heapInUse()
		for _, p := range bc.pdbs {
			bc.h.pdb(p)
		}
		afterBudgets := heapInUse()
		b.ReportMetric(float64(int64(afterPods)-int64(base))/float64(len(bc.pods)), "B/pod")
		b.ReportMetric(float64(int64(afterBudgets)-int64(afterPods))/float64(len(bc.pdbs)), "B/budget")
		runtime.KeepAlive(bc)
	}
}
