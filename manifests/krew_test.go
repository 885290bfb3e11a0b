package manifests_test

import (
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// krewPlugin is krew's index Plugin (sigs.k8s.io/krew/pkg/index, API
// krew.googlecontainertools.github.com/v1alpha2), the fields krew reads; krew
// itself is not a dependency.
type krewPlugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string `json:"version"`
		ShortDescription string `json:"shortDescription"`
		Description      string `json:"description"`
		Caveats          string `json:"caveats"`
		Homepage         string `json:"homepage"`
		Platforms        []struct {
			Selector *metav1.LabelSelector `json:"selector"`
			URI      string                `json:"uri"`
			Sha256   string                `json:"sha256"`
			Bin      string                `json:"bin"`
			Files    []struct {
				From string `json:"from"`
				To   string `json:"to"`
			} `json:"files"`
		} `json:"platforms"`
	} `json:"spec"`
}

// completionBin is what kubectl 1.26+ runs for completions of "kubectl
// budgetguard" (cmd/kubectl-budgetguard/kubectl_complete-budgetguard).
const completionBin = "kubectl_complete-budgetguard"

var (
	krewVersion = regexp.MustCompile(`^v\d+\.\d+\.\d+`)
	sha256Hex   = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// decodeKrewPlugin decodes a krew plugin manifest strictly and checks what
// krew's own validation checks (pkg/index/validation): the API, a name, a
// semantic version with a leading v, a short description, and per platform
// a selector, an https URI, a sha256 and the bin kubectl runs, here
// kubectl-budgetguard, which the archive must hold; and, budgetguard's own
// rule, the completion executable kubectl_complete-budgetguard beside it
// (a shell script: on every platform but windows).
func decodeKrewPlugin(data []byte) error {
	var p krewPlugin
	if err := yaml.UnmarshalStrict(data, &p); err != nil {
		return err
	}
	var errs []string
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Sprintf(format, args...))
		}
	}
	check(p.APIVersion == "krew.googlecontainertools.github.com/v1alpha2" && p.Kind == "Plugin", "apiVersion/kind %s/%s", p.APIVersion, p.Kind)
	check(p.Metadata.Name == "budgetguard", "metadata.name %q, want budgetguard (kubectl budgetguard)", p.Metadata.Name)
	check(krewVersion.MatchString(p.Spec.Version), "spec.version %q is not vMAJOR.MINOR.PATCH", p.Spec.Version)
	check(p.Spec.ShortDescription != "" && len(p.Spec.ShortDescription) <= 70, "spec.shortDescription must be set and at most 70 characters")
	check(len(p.Spec.Platforms) > 0, "no spec.platforms")
	for i, pl := range p.Spec.Platforms {
		u, err := url.Parse(pl.URI)
		check(err == nil && u.Scheme == "https", "platforms[%d].uri %q is not https", i, pl.URI)
		check(strings.Contains(pl.URI, p.Spec.Version), "platforms[%d].uri %q does not name version %s", i, pl.URI, p.Spec.Version)
		check(sha256Hex.MatchString(pl.Sha256), "platforms[%d].sha256 %q is not 64 hex digits", i, pl.Sha256)
		wantBin := "kubectl-budgetguard"
		if pl.Selector != nil && pl.Selector.MatchLabels["os"] == "windows" {
			wantBin += ".exe"
		}
		check(pl.Bin == wantBin, "platforms[%d].bin %q, want %s", i, pl.Bin, wantBin)
		check(pl.Selector != nil && pl.Selector.MatchLabels["os"] != "" && pl.Selector.MatchLabels["arch"] != "", "platforms[%d].selector must match os and arch", i)
		shipsBin, shipsCompletion := false, false
		for _, f := range pl.Files {
			shipsBin = shipsBin || f.From == pl.Bin
			shipsCompletion = shipsCompletion || (f.From == completionBin && f.To == ".")
		}
		check(shipsBin, "platforms[%d].files do not include the bin %q", i, pl.Bin)
		// The completion executable is a shell script: not for windows.
		windows := pl.Selector != nil && pl.Selector.MatchLabels["os"] == "windows"
		check(shipsCompletion != windows, "platforms[%d].files: %s beside the bin is %v, want it on every platform but windows", i, completionBin, shipsCompletion)
	}
	if len(errs) > 0 {
		return fmt.Errorf("krew plugin: %s", strings.Join(errs, "; "))
	}
	return nil
}

// TestKrewPluginCheckFails: the check refuses what krew would: an unknown
// field, a bin other than kubectl-budgetguard, a sha256 that is not one;
// and a platform without the completion executable.
func TestKrewPluginCheckFails(t *testing.T) {
	good, err := os.ReadFile("krew/budgetguard.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := decodeKrewPlugin(good); err != nil {
		t.Fatalf("the shipped manifest: %v", err)
	}
	for name, edit := range map[string]func(string) string{
		"unknown field": func(s string) string { return strings.Replace(s, "  homepage:", "  homepag:", 1) },
		"wrong bin":     func(s string) string { return strings.Replace(s, "bin: kubectl-budgetguard", "bin: budgetguard", 1) },
		"short sha256":  func(s string) string { return strings.Replace(s, `sha256: "0000`, `sha256: "`, 1) },
		"no version v":  func(s string) string { return strings.Replace(s, "version: v0", "version: 0", 1) },
		"no completion": func(s string) string {
			return strings.ReplaceAll(s, "    - from: kubectl_complete-budgetguard\n      to: .\n", "")
		},
	} {
		if err := decodeKrewPlugin([]byte(edit(string(good)))); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
