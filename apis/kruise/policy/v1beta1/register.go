package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is policy.kruise.io/v1beta1.
var GroupVersion = schema.GroupVersion{Group: "policy.kruise.io", Version: "v1beta1"}

// SchemeGroupVersion is GroupVersion, under the name client-go's helpers use.
var SchemeGroupVersion = GroupVersion

var (
	// SchemeBuilder registers the types of this package.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds them to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &PodUnavailableBudget{}, &PodUnavailableBudgetList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// Resource returns the GroupResource of resource in this group.
func Resource(resource string) schema.GroupResource {
	return GroupVersion.WithResource(resource).GroupResource()
}
