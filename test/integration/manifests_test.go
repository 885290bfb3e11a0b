package integration

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/budgetguard/budgetguard/internal/testenv"
)

// manifestsDir is the shipped manifests/, relative to this package.
var manifestsDir = filepath.Join("..", "..", "manifests")

// buildKustomization builds the kustomization in dir as `kubectl apply -k`
// does (kustomize's defaults: files only from within dir) and returns its
// objects.
func buildKustomization(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var objs []*unstructured.Unstructured
	for _, r := range resources.Resources() {
		m, err := r.Map()
		if err != nil {
			t.Fatalf("kustomize build %s: %s: %v", dir, r.CurId(), err)
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
	if len(objs) == 0 {
		t.Fatalf("kustomize build %s: no objects", dir)
	}
	return objs
}

// TestManifestsApply builds each shipped kustomization, as `kubectl apply
// -k manifests/<dir>/` would, and applies every object to the control plane
// with a server-side dry run and strict field validation: the API server
// must accept each one as it stands. It then checks what a dry run cannot:
// that each pod template mounts ConfigMaps the build holds, with the files
// its command line reads, and that the descheduler runs as a Deployment or
// a CronJob, never both.
func TestManifestsApply(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(manifestsDir, "*", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, f := range files {
		dirs = append(dirs, filepath.Base(filepath.Dir(f)))
	}
	if want := []string{"descheduler", "descheduler-cronjob", "scheduler"}; !slices.Equal(dirs, want) {
		t.Errorf("kustomizations in manifests/: %v, want %v", dirs, want)
	}
	// The workload kinds each directory must run, and must not.
	wantWorkloads := map[string][]string{
		"scheduler":           {"Deployment"},
		"descheduler":         {"Deployment"},
		"descheduler-cronjob": {"CronJob"},
	}
	for _, dir := range dirs {
		t.Run(dir, func(t *testing.T) {
			objs := buildKustomization(t, filepath.Join(manifestsDir, dir))
			var workloads []string
			for _, obj := range objs {
				applyDryRun(t, obj)
				switch obj.GetKind() {
				case "Deployment", "CronJob":
					workloads = append(workloads, obj.GetKind())
					checkConfigMapMounts(t, obj, objs)
				}
			}
			if want, ok := wantWorkloads[dir]; ok && !slices.Equal(workloads, want) {
				t.Errorf("manifests/%s runs %v, want %v", dir, workloads, want)
			}
		})
	}
}

// applyDryRun applies obj with server-side apply, dry run and strict field
// validation, in its namespace if it has one.
func applyDryRun(t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	gvk := obj.GroupVersionKind()
	id := gvk.Kind + " " + obj.GetName()
	if ns := obj.GetNamespace(); ns != "" {
		id = gvk.Kind + " " + ns + "/" + obj.GetName()
	}
	mapping, err := cp.RESTMapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		t.Errorf("%s: %v", id, err)
		return
	}
	namespaced := mapping.Scope.Name() == meta.RESTScopeNameNamespace
	if namespaced != (obj.GetNamespace() != "") {
		t.Errorf("%s: namespace %q for a kind whose scope is %s", id, obj.GetNamespace(), mapping.Scope.Name())
		return
	}
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	_, err = cp.Dynamic.Resource(mapping.Resource).Namespace(obj.GetNamespace()).Patch(testenv.Context(t), obj.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{
		FieldManager:    "budgetguard-manifests-test",
		DryRun:          []string{metav1.DryRunAll},
		FieldValidation: metav1.FieldValidationStrict,
		Force:           ptr.To(true),
	})
	if err != nil {
		t.Errorf("%s: server-side apply (dry run) refused: %v", id, err)
	}
}

// checkConfigMapMounts checks the pod template of a Deployment or CronJob:
// each ConfigMap volume names a ConfigMap of objs (kustomize rewrote the
// generated name), and each path below its mount that a container's command
// or args name is a key of that ConfigMap.
func checkConfigMapMounts(t *testing.T, obj *unstructured.Unstructured, objs []*unstructured.Unstructured) {
	t.Helper()
	var spec corev1.PodSpec
	switch obj.GetKind() {
	case "Deployment":
		var d appsv1.Deployment
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &d); err != nil {
			t.Fatalf("%s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
		spec = d.Spec.Template.Spec
	case "CronJob":
		var c batchv1.CronJob
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &c); err != nil {
			t.Fatalf("%s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
		spec = c.Spec.JobTemplate.Spec.Template.Spec
	}
	configMaps := map[string]map[string]any{}
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" && o.GetNamespace() == obj.GetNamespace() {
			data, _, _ := unstructured.NestedMap(o.Object, "data")
			configMaps[o.GetName()] = data
		}
	}
	volumes := map[string]string{} // volume name -> ConfigMap name
	for _, v := range spec.Volumes {
		if v.ConfigMap == nil {
			continue
		}
		if _, ok := configMaps[v.ConfigMap.Name]; !ok {
			t.Errorf("%s %s: volume %s mounts ConfigMap %s, which the build does not hold", obj.GetKind(), obj.GetName(), v.Name, v.ConfigMap.Name)
			continue
		}
		volumes[v.Name] = v.ConfigMap.Name
	}
	if len(volumes) == 0 {
		t.Errorf("%s %s mounts no ConfigMap; its configuration would not reach it", obj.GetKind(), obj.GetName())
	}
	for _, c := range spec.Containers {
		words := append(slices.Clone(c.Command), c.Args...)
		for _, m := range c.VolumeMounts {
			cm, ok := volumes[m.Name]
			if !ok {
				continue
			}
			read := false
			for _, w := range words {
				_, after, found := strings.Cut(w, strings.TrimSuffix(m.MountPath, "/")+"/")
				if !found {
					continue
				}
				read = true
				if _, ok := configMaps[cm][after]; !ok {
					t.Errorf("%s %s: container %s reads %q, but ConfigMap %s has no key %q", obj.GetKind(), obj.GetName(), c.Name, w, cm, after)
				}
			}
			if !read {
				t.Errorf("%s %s: container %s reads no file of its mount %s", obj.GetKind(), obj.GetName(), c.Name, m.MountPath)
			}
		}
	}
}
