package testobj

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// NodeWrapper builds a Node.
type NodeWrapper struct{ corev1.Node }

// MakeNode returns a builder of an empty node.
func MakeNode() *NodeWrapper { return &NodeWrapper{} }

// Obj returns the node.
func (w *NodeWrapper) Obj() *corev1.Node { return &w.Node }

// Name sets the name.
func (w *NodeWrapper) Name(s string) *NodeWrapper { w.ObjectMeta.Name = s; return w }

// GenerateName sets metadata.generateName.
func (w *NodeWrapper) GenerateName(s string) *NodeWrapper {
	w.ObjectMeta.GenerateName = s
	return w
}

// Label adds a label.
func (w *NodeWrapper) Label(k, v string) *NodeWrapper {
	w.Labels = with(w.Labels, k, v)
	return w
}

// Capacity sets status.capacity to cpu CPUs and pods pods (the sandbox's
// simulated kubelet derives allocatable from it).
func (w *NodeWrapper) Capacity(cpu, pods string) *NodeWrapper {
	return w.Resources(corev1.ResourceList{
		corev1.ResourceCPU:  resource.MustParse(cpu),
		corev1.ResourcePods: resource.MustParse(pods),
	})
}

// Resources sets status.capacity to a copy of r.
func (w *NodeWrapper) Resources(r corev1.ResourceList) *NodeWrapper {
	w.Status.Capacity = r.DeepCopy()
	return w
}

// Allocatable sets status.allocatable to a copy of r.
func (w *NodeWrapper) Allocatable(r corev1.ResourceList) *NodeWrapper {
	w.Status.Allocatable = r.DeepCopy()
	return w
}

// Taint adds a taint.
func (w *NodeWrapper) Taint(key string, effect corev1.TaintEffect) *NodeWrapper {
	w.Spec.Taints = append(w.Spec.Taints, corev1.Taint{Key: key, Effect: effect})
	return w
}

// ReplicaSetWrapper builds a ReplicaSet.
type ReplicaSetWrapper struct{ appsv1.ReplicaSet }

// MakeReplicaSet returns a builder of an empty ReplicaSet.
func MakeReplicaSet() *ReplicaSetWrapper { return &ReplicaSetWrapper{} }

// Obj returns the ReplicaSet.
func (w *ReplicaSetWrapper) Obj() *appsv1.ReplicaSet { return &w.ReplicaSet }

// Name sets the name.
func (w *ReplicaSetWrapper) Name(s string) *ReplicaSetWrapper { w.ObjectMeta.Name = s; return w }

// Namespace sets the namespace.
func (w *ReplicaSetWrapper) Namespace(s string) *ReplicaSetWrapper {
	w.ObjectMeta.Namespace = s
	return w
}

// UID sets the UID.
func (w *ReplicaSetWrapper) UID(s string) *ReplicaSetWrapper {
	w.ObjectMeta.UID = types.UID(s)
	return w
}

// OwnedBy adds a controller owner reference.
func (w *ReplicaSetWrapper) OwnedBy(apiVersion, kind, name string, uid types.UID) *ReplicaSetWrapper {
	w.OwnerReferences = append(w.OwnerReferences, ControllerRef(apiVersion, kind, name, uid))
	return w
}

// Replicas sets spec.replicas.
func (w *ReplicaSetWrapper) Replicas(n int32) *ReplicaSetWrapper {
	w.Spec.Replicas = ptr.To(n)
	return w
}

// Template sets the pod template, and labels the ReplicaSet and selects its
// pods by the template's labels.
func (w *ReplicaSetWrapper) Template(t corev1.PodTemplateSpec) *ReplicaSetWrapper {
	w.Spec.Template = t
	w.Labels = copyMap(t.Labels)
	w.Spec.Selector = &metav1.LabelSelector{MatchLabels: copyMap(t.Labels)}
	return w
}

// DeploymentWrapper builds a Deployment.
type DeploymentWrapper struct{ appsv1.Deployment }

// MakeDeployment returns a builder of an empty Deployment.
func MakeDeployment() *DeploymentWrapper { return &DeploymentWrapper{} }

// Obj returns the Deployment.
func (w *DeploymentWrapper) Obj() *appsv1.Deployment { return &w.Deployment }

// Name sets the name.
func (w *DeploymentWrapper) Name(s string) *DeploymentWrapper { w.ObjectMeta.Name = s; return w }

// Namespace sets the namespace.
func (w *DeploymentWrapper) Namespace(s string) *DeploymentWrapper {
	w.ObjectMeta.Namespace = s
	return w
}

// UID sets the UID.
func (w *DeploymentWrapper) UID(s string) *DeploymentWrapper {
	w.ObjectMeta.UID = types.UID(s)
	return w
}

// Replicas sets spec.replicas.
func (w *DeploymentWrapper) Replicas(n int32) *DeploymentWrapper {
	w.Spec.Replicas = ptr.To(n)
	return w
}

// Template sets the pod template, and labels the Deployment and selects its
// pods by the template's labels.
func (w *DeploymentWrapper) Template(t corev1.PodTemplateSpec) *DeploymentWrapper {
	w.Spec.Template = t
	w.Labels = copyMap(t.Labels)
	w.Spec.Selector = &metav1.LabelSelector{MatchLabels: copyMap(t.Labels)}
	return w
}

// StatefulSetWrapper builds a StatefulSet.
type StatefulSetWrapper struct{ appsv1.StatefulSet }

// MakeStatefulSet returns a builder of an empty StatefulSet.
func MakeStatefulSet() *StatefulSetWrapper { return &StatefulSetWrapper{} }

// Obj returns the StatefulSet.
func (w *StatefulSetWrapper) Obj() *appsv1.StatefulSet { return &w.StatefulSet }

// Name sets the name.
func (w *StatefulSetWrapper) Name(s string) *StatefulSetWrapper { w.ObjectMeta.Name = s; return w }

// Namespace sets the namespace.
func (w *StatefulSetWrapper) Namespace(s string) *StatefulSetWrapper {
	w.ObjectMeta.Namespace = s
	return w
}

// UID sets the UID.
func (w *StatefulSetWrapper) UID(s string) *StatefulSetWrapper {
	w.ObjectMeta.UID = types.UID(s)
	return w
}

// Replicas sets spec.replicas.
func (w *StatefulSetWrapper) Replicas(n int32) *StatefulSetWrapper {
	w.Spec.Replicas = ptr.To(n)
	return w
}
