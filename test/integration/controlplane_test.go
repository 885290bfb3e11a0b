package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	policyv1alpha1 "github.com/openkruise/kruise-api/policy/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/budgetguard/budgetguard/internal/testenv"
	"github.com/budgetguard/budgetguard/internal/testobj"
	"github.com/budgetguard/budgetguard/sandbox"
)

func TestControlPlaneNodeBecomesReady(t *testing.T) {
	t.Parallel()
	ns := env.NewNamespace(t)
	tests := []struct {
		name     string
		capacity corev1.ResourceList
		want     corev1.ResourceList
	}{
		{
			name: "defaults",
			want: sandbox.DefaultNodeCapacity(),
		},
		{
			name:     "capacity from the node object",
			capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")},
			want: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("8"),
				corev1.ResourceMemory: resource.MustParse("16Gi"),
				corev1.ResourcePods:   resource.MustParse("110"),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := env.CreateNode(t, ns, testobj.MakeNode().Resources(tt.capacity))
			testenv.WaitFor(t, testenv.DefaultWait, "node "+node.Name+" to be Ready and untainted", func(ctx context.Context) (bool, error) {
				n, err := cp.Client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				ready := false
				for _, c := range n.Status.Conditions {
					if c.Type == corev1.NodeReady {
						ready = c.Status == corev1.ConditionTrue
					}
				}
				if !ready || len(n.Spec.Taints) > 0 {
					return false, fmt.Errorf("ready %v, taints %v", ready, n.Spec.Taints)
				}
				for _, list := range []corev1.ResourceList{n.Status.Capacity, n.Status.Allocatable} {
					for r, q := range tt.want {
						if got := list[r]; got.Cmp(q) != 0 {
							return false, fmt.Errorf("%s is %s, want %s", r, got.String(), q.String())
						}
					}
				}
				return true, nil
			})
		})
	}
}

func TestControlPlaneReplicaSetPodsBecomeReady(t *testing.T) {
	t.Parallel()
	ns := env.NewNamespace(t)
	node := env.CreateNode(t, ns, testobj.MakeNode())
	rs := createReplicaSet(t, ns, "web", node.Name, 3, nil)
	pods := env.WaitForReadyPods(t, ns, rs.Spec.Selector.MatchLabels, 3)
	for _, p := range pods {
		if p.Spec.NodeName != node.Name || p.Status.PodIP == "" || p.Status.HostIP == "" || p.Status.StartTime == nil {
			t.Errorf("pod %s: nodeName %q podIP %q hostIP %q startTime %v, want bound to %s with IPs and a start time",
				p.Name, p.Spec.NodeName, p.Status.PodIP, p.Status.HostIP, p.Status.StartTime, node.Name)
		}
		for _, c := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
			if s := testenv.PodCondition(&p, c); s != corev1.ConditionTrue {
				t.Errorf("pod %s: condition %s is %q, want True", p.Name, c, s)
			}
		}
		if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Running == nil || !p.Status.ContainerStatuses[0].Ready {
			t.Errorf("pod %s: container statuses %+v, want one running and ready", p.Name, p.Status.ContainerStatuses)
		}
	}
	testenv.WaitFor(t, testenv.DefaultWait, "ReplicaSet status to count 3 ready replicas", statusCount("readyReplicas", 3, func(ctx context.Context) (int32, error) {
		cur, err := cp.Client.AppsV1().ReplicaSets(ns).Get(ctx, rs.Name, metav1.GetOptions{})
		return cur.Status.ReadyReplicas, err
	}))
}

func TestControlPlaneDeploymentPodsBecomeReady(t *testing.T) {
	t.Parallel()
	ns := env.NewNamespace(t)
	node := env.CreateNode(t, ns, testobj.MakeNode())
	lbls := map[string]string{"app": "api"}
	d := testenv.Create(t, cp.Client.AppsV1().Deployments(ns),
		testobj.MakeDeployment().Name("api").Replicas(2).Template(testobj.BoundPod(node.Name).Labels(lbls).Template()).Obj())
	env.WaitForReadyPods(t, ns, lbls, 2)
	testenv.WaitFor(t, testenv.DefaultWait, "Deployment to report 2 available replicas", statusCount("availableReplicas", 2, func(ctx context.Context) (int32, error) {
		cur, err := cp.Client.AppsV1().Deployments(ns).Get(ctx, d.Name, metav1.GetOptions{})
		return cur.Status.AvailableReplicas, err
	}))
}

// TestControlPlanePDBStatus checks that the disruption controller computes
// PDB status over the kubelet's pods, for minAvailable and maxUnavailable
// (which needs the ReplicaSet's scale), and recomputes it when a pod stops
// being Ready and when it is Ready again.
//
// Each PDB gets its own ReplicaSet: when several PDBs select a pod, the
// disruption controller recomputes only one of them on that pod's events.
func TestControlPlanePDBStatus(t *testing.T) {
	t.Parallel()
	ns := env.NewNamespace(t)
	node := env.CreateNode(t, ns, testobj.MakeNode())

	type numbers struct{ healthy, desired, allowed, expected int32 }
	tests := []struct {
		name           string
		minAvailable   *intstr.IntOrString
		maxUnavailable *intstr.IntOrString
		allReady       numbers
		oneNotReady    numbers
	}{
		{name: "min-3", minAvailable: ptr.To(intstr.FromInt32(3)), allReady: numbers{4, 3, 1, 4}, oneNotReady: numbers{3, 3, 0, 4}},
		{name: "min-50pc", minAvailable: ptr.To(intstr.FromString("50%")), allReady: numbers{4, 2, 2, 4}, oneNotReady: numbers{3, 2, 1, 4}},
		{name: "max-1", maxUnavailable: ptr.To(intstr.FromInt32(1)), allReady: numbers{4, 3, 1, 4}, oneNotReady: numbers{3, 3, 0, 4}},
		{name: "max-25pc", maxUnavailable: ptr.To(intstr.FromString("25%")), allReady: numbers{4, 3, 1, 4}, oneNotReady: numbers{3, 3, 0, 4}},
	}
	status := func(n numbers) policyv1.PodDisruptionBudgetStatus {
		return policyv1.PodDisruptionBudgetStatus{CurrentHealthy: n.healthy, DesiredHealthy: n.desired, DisruptionsAllowed: n.allowed, ExpectedPods: n.expected}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rs := createReplicaSet(t, ns, tt.name, node.Name, 4, nil)
			pods := env.WaitForReadyPods(t, ns, rs.Spec.Selector.MatchLabels, 4)
			pdb := testobj.MakePDB().Name(tt.name).Selector(rs.Spec.Selector)
			pdb.Spec.MinAvailable, pdb.Spec.MaxUnavailable = tt.minAvailable, tt.maxUnavailable
			env.CreatePDB(t, ns, pdb)
			testenv.WaitFor(t, testenv.DefaultWait, "PDB status with all pods Ready", env.PDBStatusIs(ns, tt.name, status(tt.allReady)))

			setReadiness(t, ns, pods[0].Name, sandbox.ReadinessNever)
			testenv.WaitFor(t, testenv.DefaultWait, "PDB status with one pod not Ready", env.PDBStatusIs(ns, tt.name, status(tt.oneNotReady)))

			setReadiness(t, ns, pods[0].Name, sandbox.ReadinessReady)
			testenv.WaitFor(t, testenv.DefaultWait, "PDB status with the pod Ready again", env.PDBStatusIs(ns, tt.name, status(tt.allReady)))
		})
	}
}

// setReadiness sets the sandbox readiness annotation of a live pod.
func setReadiness(t *testing.T, ns, name, value string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, sandbox.ReadinessAnnotation, value)
	if _, err := cp.Client.CoreV1().Pods(ns).Patch(testenv.Context(t), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("annotate pod %s/%s with %s=%s: %v", ns, name, sandbox.ReadinessAnnotation, value, err)
	}
}

func TestControlPlaneDeletedPodGoesAway(t *testing.T) {
	t.Parallel()
	ns, pod := podOnNewNode(t, "doomed", nil, true)

	// The default grace period (30s in the template) would keep the pod
	// terminating; the simulated kubelet must finish it at once.
	began := time.Now()
	if err := cp.Client.CoreV1().Pods(ns).Delete(testenv.Context(t), pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete pod: %v", err)
	}
	testenv.WaitFor(t, 5*time.Second, "deleted pod to disappear", func(ctx context.Context) (bool, error) {
		_, err := cp.Client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	t.Logf("deleted pod was gone after %s", time.Since(began).Round(time.Millisecond))
}

func TestControlPlanePUBCRDServed(t *testing.T) {
	t.Parallel()
	ns := env.NewNamespace(t)
	ctx := testenv.Context(t)
	want := policyv1alpha1.PodUnavailableBudgetSpec{
		Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		MaxUnavailable: ptr.To(intstr.FromString("25%")),
	}
	pubs := cp.KruiseClient.PolicyV1alpha1().PodUnavailableBudgets(ns)
	if _, err := pubs.Create(ctx, &policyv1alpha1.PodUnavailableBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       want,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create PodUnavailableBudget: %v", err)
	}
	got, err := pubs.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get PodUnavailableBudget: %v", err)
	}
	if diff := cmp.Diff(want, got.Spec); diff != "" {
		t.Errorf("PodUnavailableBudget spec read back (-want,+got):\n%s", diff)
	}
	if err := pubs.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Errorf("delete PodUnavailableBudget: %v", err)
	}
}

// statusCount holds when read returns want; field names the count in the
// error that says why not yet.
func statusCount(field string, want int32, read func(ctx context.Context) (int32, error)) testenv.Condition {
	return func(ctx context.Context) (bool, error) {
		got, err := read(ctx)
		if err != nil {
			return false, err
		}
		return got == want, fmt.Errorf("%s %d", field, got)
	}
}
