package realnode

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

// SpareNodeName is a second Node that runs nothing. The descheduler skips
// its loop on a cluster of fewer than two Ready nodes (v0.36:
// "Skipping descheduling cycle: requires >=2 nodes"), so the real node
// alone would never see one. The spare is unschedulable, so no pod is ever
// placed there, and RunSpareNode keeps it Ready: it renews its Lease and its
// Ready condition, as a kubelet's heartbeat would, and nothing else.
const SpareNodeName = "bg-e2e-spare"

// RunSpareNode registers the spare Node and keeps it Ready until ctx ends.
func RunSpareNode(ctx context.Context, l Layout) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", l.AdminKubeconfig())
	if err != nil {
		return err
	}
	cfg.UserAgent = "e2e-node-spare"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("2"),
		corev1.ResourceMemory: resource.MustParse("4Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: SpareNodeName, Labels: map[string]string{"kubernetes.io/hostname": SpareNodeName, "kubernetes.io/os": "linux"}},
		Spec:       corev1.NodeSpec{Unschedulable: true},
	}
	if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("register the spare node: %w", err)
	}
	beat := func() error {
		now := metav1.Now()
		n, err := cs.CoreV1().Nodes().Get(ctx, SpareNodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Status.Capacity, n.Status.Allocatable = capacity, capacity
		n.Status.Conditions = []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "SpareNode",
			Message: "a Node that runs nothing, kept Ready for the descheduler's two-node minimum", LastHeartbeatTime: now, LastTransitionTime: now,
		}}
		if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			return err
		}
		leases := cs.CoordinationV1().Leases(corev1.NamespaceNodeLease)
		lease, err := leases.Get(ctx, SpareNodeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = leases.Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: SpareNodeName},
				Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(SpareNodeName), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: &metav1.MicroTime{Time: now.Time}},
			}, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		lease.Spec.RenewTime = &metav1.MicroTime{Time: now.Time}
		_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
		return err
	}
	if err := beat(); err != nil {
		return fmt.Errorf("the spare node's first heartbeat: %w", err)
	}
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := beat(); err != nil && ctx.Err() == nil {
				fmt.Printf("spare node heartbeat: %v\n", err)
			}
		}
	}
}
