package scenario

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docsPath is docs/scenarios.md, relative to this package.
var docsPath = filepath.Join("..", "..", "docs", "scenarios.md")

// docsBaseDir is where the documentation's examples say they are saved, so
// that their relative scheduler.config and descheduler.policy resolve.
var docsBaseDir = filepath.Join("..", "..", "examples", "scenarios")

var yamlBlock = regexp.MustCompile("(?s)```yaml\n(.*?)```")

// docsExamples returns the ```yaml blocks of docs/scenarios.md.
func docsExamples(t testing.TB) []string {
	t.Helper()
	data, err := os.ReadFile(docsPath)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range yamlBlock.FindAllStringSubmatch(string(data), -1) {
		out = append(out, m[1])
	}
	if len(out) == 0 {
		t.Fatalf("%s has no ```yaml block", docsPath)
	}
	return out
}

// TestDocsExamplesParse parses every ```yaml block of docs/scenarios.md as a
// complete scenario, so the documentation cannot drift from the parser.
func TestDocsExamplesParse(t *testing.T) {
	for i, ex := range docsExamples(t) {
		name := fmt.Sprintf("%s yaml block %d", docsPath, i)
		s, err := Parse([]byte(ex), name, docsBaseDir)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if len(s.Objects) == 0 {
			t.Errorf("%s: no manifests", name)
		}
		for _, f := range []string{s.SchedulerConfig, s.DeschedulerPolicy} {
			if f == "" {
				continue
			}
			if _, err := os.Stat(f); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	}
}

// TestDocsListEveryKind checks that the documentation's table of kinds has
// a row for each supported kind, with its apiVersion and scope.
func TestDocsListEveryKind(t *testing.T) {
	data, err := os.ReadFile(docsPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range supportedKinds {
		scope := "cluster"
		if k.namespaced {
			scope = "namespaced"
		}
		row := regexp.MustCompile(fmt.Sprintf("(?m)^\\| `%s` \\| `%s`[^|]*\\| %s \\|$",
			regexp.QuoteMeta(k.gvk.GroupVersion().String()), k.gvk.Kind, scope))
		if !row.Match(data) {
			t.Errorf("%s has no table row for %s %s (%s)", docsPath, k.gvk.GroupVersion(), k.gvk.Kind, scope)
		}
	}
	for _, key := range append(append([]string{}, stepKeys...), waitConditions...) {
		if !strings.Contains(string(data), "`"+key) {
			t.Errorf("%s does not document %q", docsPath, key)
		}
	}
}
