package crds

import (
	"bytes"
	"io/fs"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// TestPodUnavailableBudgetYAML: the generated CRD keeps what the sandbox and
// the PUB informers rely on, and serves v1alpha1 and v1beta1 with v1beta1
// stored, as OpenKruise's own CRD does.
func TestPodUnavailableBudgetYAML(t *testing.T) {
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(PodUnavailableBudgetYAML, &crd); err != nil {
		t.Fatal(err)
	}
	if crd.Name != "podunavailablebudgets.policy.kruise.io" || crd.Spec.Group != "policy.kruise.io" ||
		crd.Spec.Names.Kind != "PodUnavailableBudget" || crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
		t.Errorf("CRD %s: group %s, kind %s, scope %s", crd.Name, crd.Spec.Group, crd.Spec.Names.Kind, crd.Spec.Scope)
	}
	type version struct {
		Name            string
		Served, Storage bool
		Status          bool
	}
	var got []version
	for _, v := range crd.Spec.Versions {
		got = append(got, version{v.Name, v.Served, v.Storage, v.Subresources != nil && v.Subresources.Status != nil})
	}
	want := []version{{"v1alpha1", true, false, true}, {"v1beta1", true, true, true}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("versions (-want,+got):\n%s", diff)
	}
	for _, v := range crd.Spec.Versions {
		if v.Name != "v1beta1" {
			continue
		}
		spec := v.Schema.OpenAPIV3Schema.Properties["spec"].Properties
		for _, field := range []string{"protectOperations", "protectTotalReplicas", "ignoredPodSelector"} {
			if _, ok := spec[field]; !ok {
				t.Errorf("v1beta1 has no spec.%s", field)
			}
		}
	}
}

func TestFSHoldsEveryCRD(t *testing.T) {
	names, err := fs.Glob(FS, "*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 1 || names[0] != "policy.kruise.io_podunavailablebudgets.yaml" {
		t.Errorf("FS holds %v, want [policy.kruise.io_podunavailablebudgets.yaml]", names)
	}
	got, err := fs.ReadFile(FS, "policy.kruise.io_podunavailablebudgets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, PodUnavailableBudgetYAML) {
		t.Error("FS and PodUnavailableBudgetYAML hold different bytes")
	}
}
