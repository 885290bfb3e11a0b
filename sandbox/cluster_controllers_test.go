package sandbox

import (
	"context"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/budgetguard/budgetguard/internal/testenv"
)

// TestClusterControllers checks what the StatefulSet, garbage-collector and
// namespace controllers do in the sandbox: a StatefulSet gets its pods, a
// dependent goes with its owner, and a deleted namespace goes away with its
// contents instead of staying Terminating.
func TestClusterControllers(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	opts := DefaultOptions()
	opts.GarbageCollector = true
	cp := startControlPlane(ctx, t, opts)
	client := cp.Client

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cluster-controllers"}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "db"}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns.Name},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To[int32](3),
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "db"}}},
			},
		},
	}
	if _, err := client.AppsV1().StatefulSets(ns.Name).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, time.Minute, "the StatefulSet's 3 pods", func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods(ns.Name).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 3, err
	})

	owner, err := client.CoreV1().ConfigMaps(ns.Name).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dependent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name:            "dependent",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}},
	}}
	if _, err := client.CoreV1().ConfigMaps(ns.Name).Create(ctx, dependent, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().ConfigMaps(ns.Name).Delete(ctx, owner.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, time.Minute, "the garbage collector to delete the dependent ConfigMap", func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().ConfigMaps(ns.Name).Get(ctx, dependent.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})

	if err := client.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, time.Minute, "the namespace to be deleted", func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().Namespaces().Get(ctx, ns.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// TestClusterRoleAggregation: with --authorization-mode=RBAC (an RBAC trial
// against the sandbox), the aggregated ClusterRoles view, edit and admin,
// which kube-apiserver creates with an aggregation rule and no rules of
// their own, get the rules of the roles labelled to aggregate into them, as
// kube-controller-manager's aggregation controller gives them.
func TestClusterRoleAggregation(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	opts := DefaultOptions()
	opts.APIServerFlags = []string{"--authorization-mode=Node,RBAC"}
	cp := startControlPlane(ctx, t, opts)
	client := cp.Client

	for _, role := range []string{"view", "edit", "admin"} {
		testenv.WaitFor(t, time.Minute, "the "+role+" ClusterRole to aggregate the rules for pods", func(ctx context.Context) (bool, error) {
			cr, err := client.RbacV1().ClusterRoles().Get(ctx, role, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, r := range cr.Rules {
				if slices.Contains(r.Resources, "pods") && slices.Contains(r.Verbs, "list") {
					return true, nil
				}
			}
			return false, nil
		})
	}
}
