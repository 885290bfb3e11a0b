package integration

import (
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// setupUnderutilized puts the 3 pods of app "web" (100m CPU each) on node
// A, 4 CPU, which is therefore underutilized (7.5%), and a 2-CPU bare pod
// on node B, which HighNodeUtilization packs onto: it wants to evict all 3
// web pods. A PDB with maxUnavailable 1 allows 1.
func setupUnderutilized(t *testing.T) (ns, nodeSelector string) {
	t.Helper()
	ns, nodeSelector, _ = setupUnderutilizedWith(t, nil, 1)
	return ns, nodeSelector
}

// setupUnderutilizedWith is setupUnderutilized with annotations on the web
// pods and a PDB with maxUnavailable pdbMax (none if negative); it returns
// node A's name too.
func setupUnderutilizedWith(t *testing.T, annotations map[string]string, pdbMax int32) (ns, nodeSelector, nodeA string) {
	t.Helper()
	ns = newNamespace(t)
	capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceMemory: resource.MustParse("16Gi")}
	a, b := createNode(t, ns, capacity), createNode(t, ns, capacity)
	nodeSelector = evictorLabelNodes(t, ns, a, b)
	filler := podTemplate(b.Name, map[string]string{"pod": "filler"}, nil)
	filler.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("2")
	if _, err := cp.Client.CoreV1().Pods(ns).Create(testContext(t), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "filler", Labels: filler.Labels},
		Spec:       filler.Spec,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createReplicaSet(t, ns, "web", a.Name, 3, annotations)
	waitForReadyPods(t, ns, map[string]string{"app": "web"}, 3)
	if pdbMax >= 0 {
		evictorPDB(t, ns, "web", pdbMax, "")
		waitFor(t, defaultWait, "pdb web is up to date", pdbStatusIs(ns, "web", policyv1.PodDisruptionBudgetStatus{
			CurrentHealthy: 3, DesiredHealthy: 3 - pdbMax, DisruptionsAllowed: pdbMax, ExpectedPods: 3,
		}))
	}
	// The simulated kubelet makes a replacement Ready at once, which would
	// refill the budget between two evictions of one loop; on a real node a
	// replacement takes a while. Keep replacements unready.
	evictorNeverReadyReplacements(t, ns, "web")
	return ns, nodeSelector, a.Name
}

func TestEvictorHighNodeUtilizationSpendsBudgetOnce(t *testing.T) {
	t.Run("BudgetAwareEvictor", func(t *testing.T) {
		ns, sel := setupUnderutilized(t)
		got := runDescheduler(t, highUtilizationPolicy(ns, sel, true), false)
		if n := got.count(http.StatusCreated); n != 1 {
			t.Errorf("evictions that succeeded = %d, want 1 (answers: %s)", n, got)
		}
		if n := got.count(http.StatusTooManyRequests); n != 0 {
			t.Errorf("429s = %d, want 0 (answers: %s)", n, got)
		}
		if total := got.total(); total != 1 {
			t.Errorf("eviction requests = %d, want 1 (answers: %s)", total, got)
		}
	})
	// The reference: the stock DefaultEvictor alone asks the apiserver for
	// all 3 evictions and collects 429s for the 2 the budget forbids.
	t.Run("DefaultEvictorOnly", func(t *testing.T) {
		ns, sel := setupUnderutilized(t)
		got := runDescheduler(t, highUtilizationPolicy(ns, sel, false), false)
		if n := got.count(http.StatusCreated); n != 1 {
			t.Errorf("evictions that succeeded = %d, want 1 (answers: %s)", n, got)
		}
		if n := got.count(http.StatusTooManyRequests); n != 2 {
			t.Errorf("429s = %d, want 2 (answers: %s)", n, got)
		}
	})
}
