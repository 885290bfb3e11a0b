package manifests_test

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	schedscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	schedvalidation "k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
	"sigs.k8s.io/descheduler/pkg/framework/pluginregistry"
	kustomizetypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"

	"github.com/budgetguard/budgetguard/internal/deschedulerpolicy"
	"github.com/budgetguard/budgetguard/manifests"
	"github.com/budgetguard/budgetguard/plugins/budgetevictor"
	"github.com/budgetguard/budgetguard/plugins/budgetpreemption"
)

// shippedFiles returns the path below manifests/ of every YAML file in the
// directory tree on disk.
func shippedFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && (strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			files = append(files, filepath.ToSlash(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no YAML files under manifests/")
	}
	return files
}

// TestEveryManifestIsEmbedded fails when a YAML file is added under
// manifests/ without being embedded in Files.
func TestEveryManifestIsEmbedded(t *testing.T) {
	for _, path := range shippedFiles(t) {
		if _, err := fs.Stat(manifests.Files, path); err != nil {
			t.Errorf("%s is not embedded in manifests.Files: %v", path, err)
		}
	}
}

// TestEveryManifestDecodes decodes every document of every shipped file
// strictly as its kind: Kubernetes objects with client-go's scheme (plus
// CRDs), KubeSchedulerConfigurations with kube-scheduler's codec and
// validation, DeschedulerPolicies with the descheduler binary's strict
// check, Kustomizations with kustomize's types. Configurations inside a
// ConfigMap's data are decoded too.
func TestEveryManifestDecodes(t *testing.T) {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme))
	strict := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme, json.SerializerOptions{Yaml: true, Strict: true})
	deschedulerpolicy.SetupPlugins(budgetevictor.Options{})
	_ = budgetpreemption.Name // registers the plugin's args with kube-scheduler's scheme

	kinds := map[string]int{}
	var check func(where string, doc []byte)
	check = func(where string, doc []byte) {
		var head struct {
			Kind string            `json:"kind"`
			Data map[string]string `json:"data"`
		}
		if err := yaml.Unmarshal(doc, &head); err != nil {
			t.Errorf("%s: %v", where, err)
			return
		}
		kinds[head.Kind]++
		switch head.Kind {
		case "":
			t.Errorf("%s: a document without a kind", where)
		case "KubeSchedulerConfiguration":
			obj, _, err := schedscheme.Codecs.UniversalDecoder().Decode(doc, nil, nil)
			if err != nil {
				t.Errorf("%s: %v", where, err)
				return
			}
			if err := schedvalidation.ValidateKubeSchedulerConfiguration(obj.(*schedconfig.KubeSchedulerConfiguration)); err != nil {
				t.Errorf("%s: %v", where, err)
			}
		case "DeschedulerPolicy":
			if err := deschedulerpolicy.CheckPolicy(doc, pluginregistry.PluginRegistry); err != nil {
				t.Errorf("%s: %v", where, err)
			}
		case kustomizetypes.KustomizationKind:
			if _, err := decodeKustomization(doc); err != nil {
				t.Errorf("%s: %v", where, err)
			}
		case "Plugin": // krew's index manifest (manifests/krew)
			if err := decodeKrewPlugin(doc); err != nil {
				t.Errorf("%s: %v", where, err)
			}
		default:
			if _, _, err := strict.Decode(doc, nil, nil); err != nil {
				t.Errorf("%s: %v", where, err)
			}
			for key, value := range head.Data {
				if strings.HasSuffix(key, ".yaml") {
					check(where+" data."+key, []byte(value))
				}
			}
		}
	}
	for _, path := range shippedFiles(t) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range bytes.Split(data, []byte("\n---")) {
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			check(fmt.Sprintf("%s document %d", path, i), doc)
		}
	}
	for _, kind := range []string{"KubeSchedulerConfiguration", "DeschedulerPolicy", "CustomResourceDefinition", "Deployment", "CronJob", "ClusterRole", kustomizetypes.KustomizationKind, "Plugin"} {
		if kinds[kind] == 0 {
			t.Errorf("no shipped %s was decoded; kinds seen: %v", kind, kinds)
		}
	}
}

// decodeKustomization decodes a kustomization.yaml strictly (an unknown or
// duplicated field is an error) and rejects a wrong apiVersion or kind and
// the fields kustomize has deprecated.
func decodeKustomization(data []byte) (*kustomizetypes.Kustomization, error) {
	var k kustomizetypes.Kustomization
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		return nil, err
	}
	if k.APIVersion != kustomizetypes.KustomizationVersion || k.Kind != kustomizetypes.KustomizationKind {
		return nil, fmt.Errorf("apiVersion/kind is %q/%q, want %q/%q", k.APIVersion, k.Kind, kustomizetypes.KustomizationVersion, kustomizetypes.KustomizationKind)
	}
	if deprecated := k.CheckDeprecatedFields(); deprecated != nil && len(*deprecated) > 0 {
		return nil, fmt.Errorf("deprecated fields: %s", strings.Join(*deprecated, "; "))
	}
	return &k, nil
}

// TestEveryManifestIsInAKustomization fails when a YAML file in a directory
// that `kubectl apply -k` applies is neither one of its kustomization's
// resources nor a file one of its generators reads, so that no file is
// shipped that the documented way of applying leaves out.
func TestEveryManifestIsInAKustomization(t *testing.T) {
	dirs := map[string]bool{}
	for _, path := range shippedFiles(t) {
		// The CRDs are OpenKruise's, for the sandbox; krew/ is the kubectl
		// plugin's krew index manifest, which krew reads, not a cluster.
		if dir := filepath.Dir(path); dir != "crds" && dir != "krew" {
			dirs[dir] = true
		}
	}
	for dir := range dirs {
		data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
		if err != nil {
			t.Errorf("%s: %v; every directory of manifests is applied with kubectl apply -k", dir, err)
			continue
		}
		k, err := decodeKustomization(data)
		if err != nil {
			t.Errorf("%s/kustomization.yaml: %v", dir, err)
			continue
		}
		used := map[string]bool{"kustomization.yaml": true}
		for _, r := range k.Resources {
			used[r] = true
		}
		for _, g := range k.ConfigMapGenerator {
			for _, f := range g.FileSources {
				_, file, _ := strings.Cut(f, "=")
				if file == "" {
					file = f
				}
				used[file] = true
			}
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if !e.IsDir() && strings.HasSuffix(e.Name(), ".yaml") && !used[e.Name()] {
				t.Errorf("%s/%s is in no resource or generator of %s/kustomization.yaml", dir, e.Name(), dir)
			}
		}
	}
}
