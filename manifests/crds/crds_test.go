package crds

import (
	"bytes"
	"io/fs"
	"testing"
)

func TestPodUnavailableBudgetYAML(t *testing.T) {
	// The generated CRD must keep what the sandbox and the PUB informer rely on.
	for _, want := range []string{
		"kind: CustomResourceDefinition",
		"name: podunavailablebudgets.policy.kruise.io",
		"group: policy.kruise.io",
		"kind: PodUnavailableBudget",
		"scope: Namespaced",
		"name: v1alpha1",
		"served: true",
		"storage: true",
		"subresources:\n      status: {}",
	} {
		if !bytes.Contains(PodUnavailableBudgetYAML, []byte(want)) {
			t.Errorf("PodUnavailableBudgetYAML does not contain %q", want)
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
