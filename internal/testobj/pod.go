package testobj

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// PauseImage is the image of the containers the builders add.
const PauseImage = "registry.k8s.io/pause:3.10"

// UIDOf is the UID the builders' RunningPod and the tests give an object
// named name: "uid-<name>".
func UIDOf(name string) types.UID { return types.UID("uid-" + name) }

// PodWrapper builds a Pod.
type PodWrapper struct{ corev1.Pod }

// MakePod returns a builder of an empty pod.
func MakePod() *PodWrapper { return &PodWrapper{} }

// RunningPod returns a builder of a pod named name in namespace ns, with UID
// UIDOf(name), phase Running and a True Ready condition: the pod most budget
// rules start from.
func RunningPod(ns, name string) *PodWrapper {
	return MakePod().Namespace(ns).Name(name).UID(string(UIDOf(name))).Running()
}

// Obj returns the pod.
func (w *PodWrapper) Obj() *corev1.Pod { return &w.Pod }

// Name sets the name.
func (w *PodWrapper) Name(s string) *PodWrapper { w.ObjectMeta.Name = s; return w }

// GenerateName sets metadata.generateName.
func (w *PodWrapper) GenerateName(s string) *PodWrapper { w.ObjectMeta.GenerateName = s; return w }

// Namespace sets the namespace.
func (w *PodWrapper) Namespace(s string) *PodWrapper { w.ObjectMeta.Namespace = s; return w }

// UID sets the UID.
func (w *PodWrapper) UID(s string) *PodWrapper { w.ObjectMeta.UID = types.UID(s); return w }

// ResourceVersion sets metadata.resourceVersion.
func (w *PodWrapper) ResourceVersion(s string) *PodWrapper {
	w.ObjectMeta.ResourceVersion = s
	return w
}

// Label adds a label.
func (w *PodWrapper) Label(k, v string) *PodWrapper {
	w.ObjectMeta.Labels = with(w.ObjectMeta.Labels, k, v)
	return w
}

// Labels replaces the labels with a copy of l (nil: no labels).
func (w *PodWrapper) Labels(l map[string]string) *PodWrapper {
	w.ObjectMeta.Labels = copyMap(l)
	return w
}

// Annotation adds an annotation.
func (w *PodWrapper) Annotation(k, v string) *PodWrapper {
	w.ObjectMeta.Annotations = with(w.ObjectMeta.Annotations, k, v)
	return w
}

// Annotations adds every annotation of a.
func (w *PodWrapper) Annotations(a map[string]string) *PodWrapper {
	for k, v := range a {
		w.Annotation(k, v)
	}
	return w
}

// OwnedBy adds a controller owner reference.
func (w *PodWrapper) OwnedBy(apiVersion, kind, name string, uid types.UID) *PodWrapper {
	w.OwnerReferences = append(w.OwnerReferences, ControllerRef(apiVersion, kind, name, uid))
	return w
}

// Node binds the pod to a node (spec.nodeName).
func (w *PodWrapper) Node(name string) *PodWrapper { w.Spec.NodeName = name; return w }

// Priority sets spec.priority.
func (w *PodWrapper) Priority(p int32) *PodWrapper { w.Spec.Priority = ptr.To(p); return w }

// PriorityClass sets spec.priorityClassName.
func (w *PodWrapper) PriorityClass(name string) *PodWrapper {
	w.Spec.PriorityClassName = name
	return w
}

// SchedulerName sets spec.schedulerName.
func (w *PodWrapper) SchedulerName(name string) *PodWrapper {
	w.Spec.SchedulerName = name
	return w
}

// GracePeriod sets spec.terminationGracePeriodSeconds.
func (w *PodWrapper) GracePeriod(seconds int64) *PodWrapper {
	w.Spec.TerminationGracePeriodSeconds = ptr.To(seconds)
	return w
}

// Container adds a pause container named name that requests cpu ("" for no
// request).
func (w *PodWrapper) Container(name, cpu string) *PodWrapper {
	c := corev1.Container{Name: name, Image: PauseImage}
	if cpu != "" {
		c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
	}
	w.Spec.Containers = append(w.Spec.Containers, c)
	return w
}

// InitContainer adds a pause init container named name.
func (w *PodWrapper) InitContainer(name string) *PodWrapper {
	w.Spec.InitContainers = append(w.Spec.InitContainers, corev1.Container{Name: name, Image: PauseImage})
	return w
}

// OnNodes adds a required node affinity to the named nodes.
func (w *PodWrapper) OnNodes(nodes ...string) *PodWrapper {
	// A field selector term takes one node name; terms are ORed.
	terms := make([]corev1.NodeSelectorTerm, 0, len(nodes))
	for _, n := range nodes {
		terms = append(terms, corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{
			Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{n},
		}}})
	}
	w.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms},
	}}
	return w
}

// TolerateAll adds a toleration of every taint (operator Exists, no key),
// as a DaemonSet pod or a critical preemptor may have.
func (w *PodWrapper) TolerateAll() *PodWrapper {
	w.Spec.Tolerations = append(w.Spec.Tolerations, corev1.Toleration{Operator: corev1.TolerationOpExists})
	return w
}

// Phase sets status.phase.
func (w *PodWrapper) Phase(p corev1.PodPhase) *PodWrapper { w.Status.Phase = p; return w }

// Running sets phase Running and a True Ready condition.
func (w *PodWrapper) Running() *PodWrapper { return w.Phase(corev1.PodRunning).Ready(true) }

// Ready sets the Ready condition to True or False, adding it if it is
// missing.
func (w *PodWrapper) Ready(ready bool) *PodWrapper {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return w.Condition(corev1.PodReady, status)
}

// Condition sets a condition's status, adding the condition if it is
// missing.
func (w *PodWrapper) Condition(t corev1.PodConditionType, status corev1.ConditionStatus) *PodWrapper {
	for i := range w.Status.Conditions {
		if w.Status.Conditions[i].Type == t {
			w.Status.Conditions[i].Status = status
			return w
		}
	}
	w.Status.Conditions = append(w.Status.Conditions, corev1.PodCondition{Type: t, Status: status})
	return w
}

// Terminating sets a deletionTimestamp at at.
func (w *PodWrapper) Terminating(at time.Time) *PodWrapper {
	w.DeletionTimestamp = ptr.To(metav1.NewTime(at))
	return w
}

// DeletionGracePeriod sets metadata.deletionGracePeriodSeconds, which the
// API server sets beside the deletionTimestamp.
func (w *PodWrapper) DeletionGracePeriod(seconds int64) *PodWrapper {
	w.DeletionGracePeriodSeconds = ptr.To(seconds)
	return w
}

// Template returns the pod's labels, annotations and spec as a pod template.
func (w *PodWrapper) Template() corev1.PodTemplateSpec {
	p := w.DeepCopy()
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: p.Labels, Annotations: p.Annotations},
		Spec:       p.Spec,
	}
}

// ControllerRef is a controller owner reference.
func ControllerRef(apiVersion, kind, name string, uid types.UID) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}
}

// Labels returns a map of the key-value pairs kv.
func Labels(kv ...string) map[string]string {
	m := make(map[string]string, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// Selector is a label selector that matches the key-value pairs kv.
func Selector(kv ...string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: Labels(kv...)}
}

func with(m map[string]string, k, v string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m[k] = v
	return m
}

func copyMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// BoundPod returns a builder of a pod bound to node (spec.nodeName), with
// one pause container "app" that requests 100m CPU and a 30 s termination
// grace period: what the sandbox's simulated kubelet runs. Tests create such
// pods, or templates of them, without a scheduler.
func BoundPod(node string) *PodWrapper {
	return MakePod().Node(node).GracePeriod(30).Container("app", "100m")
}
