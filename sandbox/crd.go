package sandbox

import (
	"context"
	"fmt"
	"slices"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclientset "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/budgetguard/budgetguard/manifests/crds"
)

// The PodUnavailableBudget API that Options.InstallPUBCRD installs.
const (
	PUBGroupVersion = "policy.kruise.io/v1alpha1"
	PUBResource     = "podunavailablebudgets"
	PUBCRDName      = PUBResource + ".policy.kruise.io"
)

// crdTimeout bounds how long Start waits for the CRD to be served.
const crdTimeout = 30 * time.Second

// InstallPUBCRD creates the PodUnavailableBudget CRD from manifests/crds,
// unless it exists, and waits until it is Established and its resource is in
// discovery in every version it serves (v1alpha1 and v1beta1). Start calls it when Options.InstallPUBCRD is set; test/perf
// calls it on scheduler_perf's API server.
func InstallPUBCRD(ctx context.Context, client apiextensionsclientset.Interface, disco discovery.DiscoveryInterface) error {
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(crds.PodUnavailableBudgetYAML, &crd); err != nil {
		return fmt.Errorf("decode manifests/crds/policy.kruise.io_podunavailablebudgets.yaml: %w", err)
	}
	if crd.Name != PUBCRDName {
		return fmt.Errorf("manifests/crds/policy.kruise.io_podunavailablebudgets.yaml: CRD is named %q, want %q", crd.Name, PUBCRDName)
	}
	if _, err := client.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, &crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create CRD %s: %w", crd.Name, err)
	}

	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, crdTimeout, true, func(ctx context.Context) (bool, error) {
		cur, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil // not there yet, or a passing error: poll again
		}
		if !crdEstablished(cur) {
			return false, nil
		}
		for _, v := range cur.Spec.Versions {
			if v.Served && !resourceServed(disco, crd.Spec.Group+"/"+v.Name, PUBResource) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("CRD %s was not served within %s: %w", crd.Name, crdTimeout, err)
	}
	klog.FromContext(ctx).V(2).Info("PodUnavailableBudget CRD is served", "crd", crd.Name)
	return nil
}

func crdEstablished(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

// resourceServed reports whether discovery lists resource in groupVersion.
func resourceServed(disco discovery.DiscoveryInterface, groupVersion, resource string) bool {
	list, err := disco.ServerResourcesForGroupVersion(groupVersion)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == resource })
}
