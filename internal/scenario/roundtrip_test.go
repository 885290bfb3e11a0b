package scenario

import (
	kruisebeta "github.com/budgetguard/budgetguard/apis/kruise/policy/v1beta1"
	"testing"

	"github.com/google/go-cmp/cmp"
	kruisepolicyv1alpha1 "github.com/openkruise/kruise-api/policy/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

func typeMeta(gvk schema.GroupVersionKind) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind}
}

func podSpec(cpu string) corev1.PodSpec {
	return corev1.PodSpec{
		SchedulerName:     "budgetguard-scheduler",
		PriorityClassName: "high",
		NodeSelector:      map[string]string{"kubernetes.io/os": "linux"},
		Tolerations:       []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "web", Effect: corev1.TaintEffectNoSchedule}},
		Containers: []corev1.Container{{
			Name:  "web",
			Image: "registry.k8s.io/pause:3.10",
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("128Mi")},
			},
		}},
	}
}

func template() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      map[string]string{"app": "web"},
			Annotations: map[string]string{ReadinessAnnotation: "after=5s"},
		},
		Spec: podSpec("500m"),
	}
}

// roundTripObjects has one object of every supported kind, with the fields
// scenarios use set.
func roundTripObjects() []runtime.Object {
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	shop := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: "shop", Labels: map[string]string{"app": "web"}}
	}
	return []runtime.Object{
		&corev1.Namespace{TypeMeta: typeMeta(corev1.SchemeGroupVersion.WithKind("Namespace")),
			ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{"team": "a"}}},
		&corev1.Node{TypeMeta: typeMeta(corev1.SchemeGroupVersion.WithKind("Node")),
			ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{"topology.kubernetes.io/zone": "z1"}},
			Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: "dedicated", Value: "web", Effect: corev1.TaintEffectNoSchedule}}},
			Status: corev1.NodeStatus{Capacity: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("50"),
			}}},
		&schedulingv1.PriorityClass{TypeMeta: typeMeta(schedulingv1.SchemeGroupVersion.WithKind("PriorityClass")),
			ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000, Description: "preemptors",
			PreemptionPolicy: ptr.To(corev1.PreemptLowerPriority)},
		&appsv1.Deployment{TypeMeta: typeMeta(appsv1.SchemeGroupVersion.WithKind("Deployment")), ObjectMeta: shop("web-deploy"),
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Selector: selector, Template: template(),
				Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxUnavailable: ptr.To(intstr.FromString("25%")), MaxSurge: ptr.To(intstr.FromInt32(1)),
				}}}},
		&appsv1.ReplicaSet{TypeMeta: typeMeta(appsv1.SchemeGroupVersion.WithKind("ReplicaSet")), ObjectMeta: shop("web"),
			Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](4), Selector: selector, Template: template()}},
		&appsv1.StatefulSet{TypeMeta: typeMeta(appsv1.SchemeGroupVersion.WithKind("StatefulSet")), ObjectMeta: shop("db"),
			Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2), Selector: selector, Template: template(),
				ServiceName: "db", PodManagementPolicy: appsv1.ParallelPodManagement}},
		&corev1.Pod{TypeMeta: typeMeta(corev1.SchemeGroupVersion.WithKind("Pod")),
			ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: "shop",
				Annotations: map[string]string{ReadinessAnnotation: "crashloop", "cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}},
			Spec: podSpec("2")},
		&policyv1.PodDisruptionBudget{TypeMeta: typeMeta(policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget")), ObjectMeta: shop("web"),
			Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)), Selector: selector,
				UnhealthyPodEvictionPolicy: ptr.To(policyv1.AlwaysAllow)}},
		&kruisepolicyv1alpha1.PodUnavailableBudget{TypeMeta: typeMeta(kruisepolicyv1alpha1.GroupVersion.WithKind("PodUnavailableBudget")),
			ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "shop",
				Annotations: map[string]string{kruisepolicyv1alpha1.PubProtectOperationAnnotation: "DELETE,EVICT"}},
			Spec: kruisepolicyv1alpha1.PodUnavailableBudgetSpec{
				TargetReference: &kruisepolicyv1alpha1.TargetReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db"},
				MinAvailable:    ptr.To(intstr.FromString("50%")),
			}},
		&kruisebeta.PodUnavailableBudget{TypeMeta: typeMeta(kruisebeta.GroupVersion.WithKind("PodUnavailableBudget")),
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"},
			Spec: kruisebeta.PodUnavailableBudgetSpec{
				Selector:             &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				MaxUnavailable:       ptr.To(intstr.FromInt32(1)),
				ProtectOperations:    []kruisebeta.PubOperation{kruisebeta.PubEvictOperation, kruisebeta.PubResizeOperation},
				ProtectTotalReplicas: ptr.To[int32](4),
				IgnoredPodSelector:   &metav1.LabelSelector{MatchLabels: map[string]string{"track": "canary"}},
			}},
	}
}

// TestRoundTrip writes one object of every supported kind as YAML, parses it
// back out of a scenario and compares.
func TestRoundTrip(t *testing.T) {
	objs := roundTripObjects()
	docs := []string{headerStart + applySetup}
	covered := map[schema.GroupVersionKind]bool{}
	for _, o := range objs {
		data, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(data))
		covered[o.GetObjectKind().GroupVersionKind()] = true
	}
	for _, gvk := range SupportedKinds() {
		if !covered[gvk] {
			t.Errorf("no round-trip object of the supported kind %s", gvk)
		}
	}

	s, err := Parse([]byte(file(docs...)), "roundtrip.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Objects) != len(objs) {
		t.Fatalf("parsed %d objects, want %d", len(s.Objects), len(objs))
	}
	quantities := cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })
	for i, want := range objs {
		got := s.Objects[i]
		gvk := want.GetObjectKind().GroupVersionKind()
		if got.GVK != gvk || got.Document != i+1 || got.Phase != DefaultPhase {
			t.Errorf("object %d: GVK %s, document %d, phase %q; want %s, %d, %q", i, got.GVK, got.Document, got.Phase, gvk, i+1, DefaultPhase)
		}
		if diff := cmp.Diff(want, got.Object, quantities); diff != "" {
			t.Errorf("%s (-want,+got):\n%s", got.Describe(), diff)
		}
	}
}
