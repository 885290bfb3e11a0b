package integration

import (
	"fmt"
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/legacyregistry"
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

// setupDuplicates puts the 5 pods of ReplicaSet "web" on node A of three
// nodes, so RemoveDuplicates wants 2 per node at most and asks to evict 3 of
// them; a PDB with maxUnavailable 1 allows 1.
func setupDuplicates(t *testing.T) (ns, nodeSelector string) {
	t.Helper()
	ns = newNamespace(t)
	capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceMemory: resource.MustParse("16Gi")}
	a, b, c := createNode(t, ns, capacity), createNode(t, ns, capacity), createNode(t, ns, capacity)
	nodeSelector = evictorLabelNodes(t, ns, a, b, c)
	createReplicaSet(t, ns, "web", a.Name, 5, nil)
	waitForReadyPods(t, ns, map[string]string{"app": "web"}, 5)
	evictorPDB(t, ns, "web", 1, "")
	waitFor(t, defaultWait, "pdb web is up to date", pdbStatusIs(ns, "web", policyv1.PodDisruptionBudgetStatus{
		CurrentHealthy: 5, DesiredHealthy: 4, DisruptionsAllowed: 1, ExpectedPods: 5,
	}))
	evictorNeverReadyReplacements(t, ns, "web")
	return ns, nodeSelector
}

// removeDuplicatesPolicy is a policy whose only strategy is RemoveDuplicates
// on the nodes nodeSelector selects, evicting in ns only; budgetAware adds
// BudgetAwareEvictor. RemoveDuplicates asks PreEvictionFilter about every
// candidate while it lists them, including the pod it keeps.
func removeDuplicatesPolicy(ns, nodeSelector string, budgetAware bool) string {
	evictors := "[DefaultEvictor]"
	extra := ""
	if budgetAware {
		evictors = "[DefaultEvictor, BudgetAwareEvictor]"
		extra = "  - name: BudgetAwareEvictor\n"
	}
	return fmt.Sprintf(`apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
nodeSelector: %q
profiles:
- name: test
  pluginConfig:
  - name: DefaultEvictor
    args:
      namespaceLabelSelector:
        matchLabels:
          kubernetes.io/metadata.name: %q
%s  - name: RemoveDuplicates
  plugins:
    filter:
      enabled: %s
    preevictionfilter:
      enabled: %s
    balance:
      enabled: [RemoveDuplicates]
`, nodeSelector, ns, extra, evictors, evictors)
}

// RemoveDuplicates lists its candidates through PreEvictionFilter before it
// evicts any. The budget must be spent by the evictions, not by the listing:
// exactly the 1 eviction the PDB allows happens, and the API server sends no
// 429 because the eviction gate refuses the other 2 before they are sent.
func TestEvictorRemoveDuplicatesSpendsBudgetOnce(t *testing.T) {
	t.Run("BudgetAwareEvictor", func(t *testing.T) {
		ns, sel := setupDuplicates(t)
		before := evictorRefusals(t, "EvictionRequest", "InsufficientBudget")
		got := runDescheduler(t, removeDuplicatesPolicy(ns, sel, true), false)
		if n := got.count(http.StatusCreated); n != 1 {
			t.Errorf("evictions that succeeded = %d, want 1 (answers: %s)", n, got)
		}
		if n := got.count(http.StatusTooManyRequests); n != 0 {
			t.Errorf("429s from the API server = %d, want 0 (answers: %s)", n, got)
		}
		if total := got.total(); total != 1 {
			t.Errorf("eviction requests that reached the API server = %d, want 1 (answers: %s)", total, got)
		}
		if n := evictorRefusals(t, "EvictionRequest", "InsufficientBudget") - before; n != 2 {
			t.Errorf("evictions the gate refused for InsufficientBudget = %v, want 2", n)
		}
	})
	t.Run("DefaultEvictorOnly", func(t *testing.T) {
		ns, sel := setupDuplicates(t)
		got := runDescheduler(t, removeDuplicatesPolicy(ns, sel, false), false)
		if n := got.count(http.StatusCreated); n != 1 {
			t.Errorf("evictions that succeeded = %d, want 1 (answers: %s)", n, got)
		}
		if n := got.count(http.StatusTooManyRequests); n != 2 {
			t.Errorf("429s = %d, want 2 (answers: %s)", n, got)
		}
	})
}

// evictorRefusals reads BudgetAwareEvictor's refusal counter.
func evictorRefusals(t *testing.T, point, reason string) float64 {
	t.Helper()
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "budgetguard_evictor_evictions_refused_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["extension_point"] == point && labels["reason"] == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
