package integration

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/budgetguard/budgetguard/sandbox"
)

// setupCrashLoop runs 3 crash-looping pods of app "web" (Running, never
// Ready, restartCount rising) on a node, under a PDB with maxUnavailable 1
// and policy: the app is disrupted (0 healthy, 2 desired) and the PDB
// allows 0 disruptions.
func setupCrashLoop(t *testing.T, policy string) (ns, nodeSelector string) {
	t.Helper()
	ns = newNamespace(t)
	capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")}
	a, b := createNode(t, ns, capacity), createNode(t, ns, capacity)
	nodeSelector = evictorLabelNodes(t, ns, a, b)
	createReplicaSet(t, ns, "web", a.Name, 3, map[string]string{sandbox.ReadinessAnnotation: sandbox.ReadinessCrashLoop})
	evictorPDB(t, ns, "web", 1, policy)
	waitFor(t, defaultWait, "3 web pods restarted at least twice", func(ctx context.Context) (bool, error) {
		pods, err := listPods(ctx, ns, map[string]string{"app": "web"})
		if err != nil {
			return false, err
		}
		n := 0
		for _, p := range pods {
			if len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].RestartCount >= 2 && !podReady(&p) {
				n++
			}
		}
		return n == 3, fmt.Errorf("%d of %d pods restarted twice", n, len(pods))
	})
	waitFor(t, defaultWait, "pdb web allows 0", func(ctx context.Context) (bool, error) {
		pdb, err := cp.Client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		st := pdb.Status
		return st.ObservedGeneration == pdb.Generation && st.CurrentHealthy == 0 && st.DesiredHealthy == 2 && st.DisruptionsAllowed == 0,
			fmt.Errorf("status %+v", st)
	})
	return ns, nodeSelector
}

func restartsPolicy(ns, nodeSelector string) string {
	return fmt.Sprintf(`apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
nodeSelector: %q
profiles:
- name: test
  pluginConfig:
  - name: DefaultEvictor
  - name: BudgetAwareEvictor
  - name: RemovePodsHavingTooManyRestarts
    args:
      podRestartThreshold: 2
      namespaces:
        include: [%q]
  plugins:
    filter:
      enabled: [DefaultEvictor, BudgetAwareEvictor]
    preevictionfilter:
      enabled: [DefaultEvictor, BudgetAwareEvictor]
    deschedule:
      enabled: [RemovePodsHavingTooManyRestarts]
`, nodeSelector, ns)
}

func TestEvictorUnhealthyPodEvictionPolicy(t *testing.T) {
	t.Run("AlwaysAllow evicts crash-looping pods with budget 0", func(t *testing.T) {
		ns, sel := setupCrashLoop(t, "AlwaysAllow")
		got := runDescheduler(t, restartsPolicy(ns, sel), false)
		if n := got.count(http.StatusCreated); n != 3 {
			t.Errorf("evictions = %d, want 3 (answers: %s)", n, got)
		}
		if n := got.total(); n != 3 {
			t.Errorf("eviction requests = %d, want 3 (answers: %s)", n, got)
		}
	})
	t.Run("IfHealthyBudget keeps them while the app is disrupted", func(t *testing.T) {
		ns, sel := setupCrashLoop(t, "IfHealthyBudget")
		got := runDescheduler(t, restartsPolicy(ns, sel), false)
		if n := got.total(); n != 0 {
			t.Errorf("eviction requests = %d, want 0 (answers: %s)", n, got)
		}
	})
}
