package sandbox

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	"github.com/budgetguard/budgetguard/internal/testobj"
)

// TestKubeletFinishesATerminatingPod: the simulated kubelet deletes a
// terminating pod with grace 0, as the kubelet's status manager does once
// its containers have stopped, whatever grace period the pod's deletion
// was given. A pod whose deletionGracePeriodSeconds is already 0 is one
// whose delete stopped between its two phases (the API server sets the
// deletionTimestamp, then removes the object; a client that dies between
// them cancels the second): without the kubelet's delete it stays
// terminating for ever, and keeps preemption waiting on its node.
func TestKubeletFinishesATerminatingPod(t *testing.T) {
	for _, tc := range []struct {
		name  string
		grace int64
	}{
		{name: "graceful", grace: 30},
		{name: "second phase lost", grace: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			pod := testobj.MakePod().Namespace("ns").Name("victim").Node("node-1").
				Terminating(time.Now()).DeletionGracePeriod(tc.grace).Obj()
			client := kubefake.NewClientset(pod)
			factory := informers.NewSharedInformerFactory(client, 0)
			pods, nodes := factory.Core().V1().Pods(), factory.Core().V1().Nodes()
			k, err := newKubelet(client, pods, nodes, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if err := pods.Informer().GetIndexer().Add(pod); err != nil {
				t.Fatal(err)
			}
			client.ClearActions()

			if _, err := k.syncPod(ctx, "ns", "victim"); err != nil {
				t.Fatalf("syncPod: %v", err)
			}
			var deletes int
			for _, a := range client.Actions() {
				if a.GetVerb() == "delete" && a.GetResource().Resource == "pods" {
					deletes++
				}
			}
			if deletes != 1 {
				t.Errorf("the kubelet sent %d deletes for a terminating pod with deletionGracePeriodSeconds %d, want 1 (actions %v)",
					deletes, tc.grace, client.Actions())
			}
		})
	}
}
