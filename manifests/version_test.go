package manifests_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/budgetguard/budgetguard"
)

// TestOneVersionEverywhere: the source tree names one release, VERSION's
// (budgetguard.Release): the chart's version (without the v) and appVersion,
// the image every shipped manifest pulls, the krew manifest's version and
// archive URIs. make release writes a build's version into the same places
// (hack/release.sh checks its output); this keeps the source from drifting.
func TestOneVersionEverywhere(t *testing.T) {
	release := budgetguard.Release()
	if !regexp.MustCompile(`^v\d+\.\d+\.\d+$`).MatchString(release) {
		t.Fatalf("VERSION is %q, want vMAJOR.MINOR.PATCH", release)
	}

	data, err := os.ReadFile("../charts/budgetguard/Chart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(data, &chart); err != nil {
		t.Fatal(err)
	}
	if chart.Version != strings.TrimPrefix(release, "v") || chart.AppVersion != release {
		t.Errorf("Chart.yaml: version %q, appVersion %q; VERSION says %q and %q", chart.Version, chart.AppVersion, strings.TrimPrefix(release, "v"), release)
	}

	image := regexp.MustCompile(`image:\s*(\S+)`)
	images := 0
	for _, path := range shippedFiles(t) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range image.FindAllStringSubmatch(string(data), -1) {
			images++
			if _, tag, _ := strings.Cut(m[1], ":"); tag != release {
				t.Errorf("%s pulls %s; VERSION says tag %s", path, m[1], release)
			}
		}
	}
	if images == 0 {
		t.Error("no shipped manifest pulls an image")
	}

	data, err = os.ReadFile("krew/budgetguard.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var krew struct {
		Spec struct {
			Version   string `json:"version"`
			Platforms []struct {
				URI string `json:"uri"`
			} `json:"platforms"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &krew); err != nil {
		t.Fatal(err)
	}
	if krew.Spec.Version != release {
		t.Errorf("krew manifest: spec.version %q; VERSION says %q", krew.Spec.Version, release)
	}
	for _, p := range krew.Spec.Platforms {
		if !strings.Contains(p.URI, "/download/"+release+"/") {
			t.Errorf("krew manifest: uri %s is not release %s's", p.URI, release)
		}
	}
}
