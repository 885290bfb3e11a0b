// Command rendermanifests renders charts/budgetguard into manifests/, so that
// the chart is the one source of the shipped objects: the kustomizations of
// manifests/ hold the chart's rendering (release "budgetguard" in
// kube-system, the chart's default values) and their kustomization.yaml
// files, which stay hand-written. The ConfigMaps are written as the files
// their kustomization generates them from (scheduler-config.yaml,
// policy.yaml).
//
//	go run ./rendermanifests CHART_DIR OUT_DIR
//
// hack/update-manifests.sh runs it into manifests/, hack/verify-manifests.sh
// into a temporary directory and compares.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"sigs.k8s.io/yaml"
)

// Release and KubeVersion of the rendering.
const (
	releaseName      = "budgetguard"
	releaseNamespace = "kube-system"
	kubeVersion      = "v1.37.2"
)

// output names where a template's rendering goes below OUT_DIR. A dataKey
// writes that key of the one ConfigMap the template renders instead of the
// template itself.
type output struct {
	path    string
	dataKey string
}

// A rendering of the chart with some values changed, and where each of its
// templates goes. A template that renders anything and is not listed is an
// error, so that nothing the chart adds is silently left out of manifests/.
type rendering struct {
	values  map[string]any
	outputs map[string]output
}

var renderings = []rendering{
	{
		values: map[string]any{},
		outputs: map[string]output{
			"templates/scheduler/rbac.yaml":         {path: "scheduler/rbac.yaml"},
			"templates/scheduler/deployment.yaml":   {path: "scheduler/deployment.yaml"},
			"templates/scheduler/pdb.yaml":          {path: "scheduler/pdb.yaml"},
			"templates/scheduler/configmap.yaml":    {path: "scheduler/scheduler-config.yaml", dataKey: "scheduler-config.yaml"},
			"templates/descheduler/rbac.yaml":       {path: "descheduler/rbac.yaml"},
			"templates/descheduler/deployment.yaml": {path: "descheduler/deployment.yaml"},
			"templates/descheduler/configmap.yaml":  {path: "descheduler/policy.yaml", dataKey: "policy.yaml"},
		},
	},
	{
		// manifests/descheduler-cronjob builds on manifests/descheduler and
		// adds the CronJob; the rest of this rendering must equal the first
		// one's, less the leader election, which its kustomization deletes.
		values: map[string]any{"descheduler": map[string]any{"kind": "CronJob"}},
		outputs: map[string]output{
			"templates/descheduler/cronjob.yaml":   {path: "descheduler-cronjob/cronjob.yaml"},
			"templates/scheduler/rbac.yaml":        {},
			"templates/scheduler/deployment.yaml":  {},
			"templates/scheduler/pdb.yaml":         {},
			"templates/scheduler/configmap.yaml":   {},
			"templates/descheduler/rbac.yaml":      {},
			"templates/descheduler/configmap.yaml": {},
		},
	},
}

const header = "# Rendered from charts/budgetguard by hack/update-manifests.sh (make manifests):\n# edit the chart, not this file.\n"

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: rendermanifests CHART_DIR OUT_DIR")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "rendermanifests:", err)
		os.Exit(1)
	}
}

func run(chartDir, outDir string) error {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return fmt.Errorf("load chart %s: %w", chartDir, err)
	}
	if err := checkREADME(chartDir, ch.Values); err != nil {
		return err
	}
	for _, r := range renderings {
		rendered, err := render(ch, r.values)
		if err != nil {
			return err
		}
		names := make([]string, 0, len(rendered))
		for name := range rendered {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			content := strings.TrimSpace(rendered[name])
			if content == "" || strings.HasSuffix(name, "NOTES.txt") {
				continue
			}
			out, ok := r.outputs[strings.TrimPrefix(name, ch.Name()+"/")]
			if !ok {
				return fmt.Errorf("%s renders objects that no file of manifests/ holds; add it to rendermanifests' outputs", name)
			}
			if out.path == "" {
				continue
			}
			if out.dataKey != "" {
				if content, err = configMapData(content, out.dataKey); err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
			}
			path := filepath.Join(outDir, out.path)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(path, []byte(header+strings.TrimSpace(content)+"\n"), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// render renders ch as `helm template budgetguard CHART -n kube-system
// --kube-version v1.37.2` with values over the chart's defaults.
func render(ch *chart.Chart, values map[string]any) (map[string]string, error) {
	caps := chartutil.DefaultCapabilities.Copy()
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		return nil, err
	}
	caps.KubeVersion = *kv
	vals, err := chartutil.ToRenderValues(ch, values, chartutil.ReleaseOptions{
		Name:      releaseName,
		Namespace: releaseNamespace,
		Revision:  1,
		IsInstall: true,
	}, caps)
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	out, err := engine.Render(ch, vals)
	if err != nil {
		return nil, fmt.Errorf("render chart: %w", err)
	}
	return out, nil
}

// checkREADME fails when a value of the chart is not documented in its
// README.md: a key counts as documented when the README names it, or a key
// above it, as `key.path`.
func checkREADME(chartDir string, values map[string]any) error {
	readme, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		return err
	}
	var missing []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for key, v := range m {
			path := prefix + key
			if strings.Contains(string(readme), "`"+path+"`") {
				continue
			}
			if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
				walk(path+".", sub)
				continue
			}
			missing = append(missing, path)
		}
	}
	walk("", values)
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Errorf("%s/README.md does not document these values: %s", chartDir, strings.Join(missing, ", "))
	}
	return nil
}

// configMapData returns data[key] of the single ConfigMap in doc, with the
// ConfigMap's leading comment, which says what the file is.
func configMapData(doc, key string) (string, error) {
	var cm struct {
		Kind string            `json:"kind"`
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal([]byte(doc), &cm); err != nil {
		return "", err
	}
	if cm.Kind != "ConfigMap" {
		return "", fmt.Errorf("want a ConfigMap, rendered a %q", cm.Kind)
	}
	data, ok := cm.Data[key]
	if !ok {
		return "", fmt.Errorf("the ConfigMap has no key %q", key)
	}
	var comment []string
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(line, "#") {
			break
		}
		comment = append(comment, line)
	}
	return strings.Join(append(comment, data), "\n"), nil
}
