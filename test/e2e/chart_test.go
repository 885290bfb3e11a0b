package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"

	"github.com/budgetguard/budgetguard/internal/localrun"
	"github.com/budgetguard/budgetguard/internal/testenv"
	"github.com/budgetguard/budgetguard/sandbox"
)

// repoRoot is the repository's root, relative to this package.
var repoRoot = filepath.Join("..", "..")

// renderChart renders charts/budgetguard with the pinned helm as
// docs/install.md runs it (hack/helm.sh template, no --kube-version: the
// chart's kubeVersion must pass against the helm the docs recommend), with
// the release in namespace and the given --set values, and returns its
// objects.
func renderChart(t *testing.T, namespace string, set ...string) []*unstructured.Unstructured {
	t.Helper()
	args := []string{"template", "budgetguard", "charts/budgetguard", "--namespace", namespace}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	cmd := exec.Command(filepath.Join("hack", "helm.sh"), args...)
	cmd.Dir = repoRoot
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, stderr.String())
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode helm template's output: %v", err)
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
	if len(objs) == 0 {
		t.Fatal("helm template rendered no objects")
	}
	return objs
}

// applyAll applies every object with server-side apply and strict field
// validation, for real or as a dry run: each must be accepted as it stands.
func applyAll(t *testing.T, cp *sandbox.ControlPlane, objs []*unstructured.Unstructured, dryRun bool) {
	t.Helper()
	ctx := testenv.Context(t)
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		id := gvk.Kind + " " + obj.GetNamespace() + "/" + obj.GetName()
		mapping, err := cp.RESTMapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Errorf("%s: %v", id, err)
			continue
		}
		if namespaced := mapping.Scope.Name() == meta.RESTScopeNameNamespace; namespaced != (obj.GetNamespace() != "") {
			t.Errorf("%s: namespace %q for a kind whose scope is %s", id, obj.GetNamespace(), mapping.Scope.Name())
			continue
		}
		data, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		opts := metav1.PatchOptions{
			FieldManager:    "budgetguard-e2e",
			FieldValidation: metav1.FieldValidationStrict,
			Force:           ptr.To(true),
		}
		if dryRun {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		_, err = cp.Dynamic.Resource(mapping.Resource).Namespace(obj.GetNamespace()).Patch(ctx, obj.GetName(), types.ApplyPatchType, data, opts)
		if err != nil {
			t.Errorf("%s: server-side apply refused: %v", id, err)
		}
	}
}

// find returns the one rendered object of kind whose name ends in suffix.
func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("the chart rendered no %s %s", kind, name)
	return nil
}

// writeConfigMap writes each data key of the ConfigMap into dir.
func writeConfigMap(t *testing.T, cm *unstructured.Unstructured, dir string) {
	t.Helper()
	data, _, err := unstructured.NestedStringMap(cm.Object, "data")
	if err != nil {
		t.Fatalf("ConfigMap %s: %v", cm.GetName(), err)
	}
	if err := localrun.WriteConfig(data, dir); err != nil {
		t.Fatalf("ConfigMap %s: %v", cm.GetName(), err)
	}
}

// setClientKubeconfig sets clientConnection.kubeconfig in the
// KubeSchedulerConfiguration at path (localrun.SetClientKubeconfig).
func setClientKubeconfig(t *testing.T, path, kubeconfig string) {
	t.Helper()
	if err := localrun.SetClientKubeconfig(path, kubeconfig); err != nil {
		t.Fatal(err)
	}
}
