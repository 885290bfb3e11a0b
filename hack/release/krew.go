package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

func krewCmd(args []string) error {
	fs := flag.NewFlagSet("krew", flag.ContinueOnError)
	version := fs.String("version", "", "budgetguard's version, e.g. v0.1.0")
	urlPrefix := fs.String("url-prefix", "https://github.com/budgetguard/budgetguard/releases/download", "where the release's archives are published: URL/VERSION/ARCHIVE")
	out := fs.String("out", "", "the krew manifest to write")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *version == "" || *out == "" || fs.NArg() < 2 {
		return errors.New("usage: release krew --version V [--url-prefix URL] --out FILE TEMPLATE ARCHIVE [ARCHIVE]")
	}
	data, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		return err
	}
	manifest, err := krewManifest(data, *version, *urlPrefix, fs.Args()[1:])
	if err != nil {
		return fmt.Errorf("%s: %w", fs.Arg(0), err)
	}
	return writeFile(*out, func(w io.Writer) error {
		_, err := w.Write(manifest)
		return err
	})
}

// krewManifest returns the krew plugin manifest tmpl with spec.version set
// to version and, for each platform (selector matchLabels os and arch), the
// uri and sha256 of the archive kubectl-budgetguard_<os>_<arch>.tar.gz (.zip
// on windows) among archives. A platform without its archive, or an archive
// no platform takes, is an error.
func krewManifest(tmpl []byte, version, urlPrefix string, archives []string) ([]byte, error) {
	var m map[string]any
	if err := yaml.Unmarshal(tmpl, &m); err != nil {
		return nil, err
	}
	spec, ok := m["spec"].(map[string]any)
	if !ok {
		return nil, errors.New("no spec")
	}
	spec["version"] = version
	platforms, ok := spec["platforms"].([]any)
	if !ok || len(platforms) == 0 {
		return nil, errors.New("no spec.platforms")
	}
	byName := map[string]string{}
	for _, a := range archives {
		byName[filepath.Base(a)] = a
	}
	used := map[string]bool{}
	for i, p := range platforms {
		pm, _ := p.(map[string]any)
		sel, _ := pm["selector"].(map[string]any)
		labels, _ := sel["matchLabels"].(map[string]any)
		osName, _ := labels["os"].(string)
		arch, _ := labels["arch"].(string)
		if osName == "" || arch == "" {
			return nil, fmt.Errorf("spec.platforms[%d]: selector.matchLabels must name os and arch", i)
		}
		name := "kubectl-budgetguard_" + osName + "_" + arch + ".tar.gz"
		if osName == "windows" {
			name = strings.TrimSuffix(name, ".tar.gz") + ".zip"
		}
		path, ok := byName[name]
		if !ok {
			return nil, fmt.Errorf("spec.platforms[%d] (%s/%s): no archive %s", i, osName, arch, name)
		}
		sum, err := sha256File(path)
		if err != nil {
			return nil, err
		}
		used[name] = true
		pm["uri"] = strings.TrimSuffix(urlPrefix, "/") + "/" + version + "/" + name
		pm["sha256"] = sum
	}
	for name := range byName {
		if !used[name] {
			return nil, fmt.Errorf("archive %s: no platform of the manifest takes it", name)
		}
	}
	out, err := yaml.Marshal(m)
	if err != nil {
		return nil, err
	}
	header := "# The krew plugin manifest of kubectl-budgetguard " + version + ", written by make release:\n" +
		"#   kubectl krew install --manifest=budgetguard.yaml --archive=kubectl-budgetguard_<os>_<arch>.tar.gz\n"
	return append([]byte(header), out...), nil
}
