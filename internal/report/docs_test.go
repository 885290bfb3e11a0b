package report

import (
	"bytes"
	"encoding/json"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// docsPath is docs/report.md, relative to this package.
var docsPath = filepath.Join("..", "..", "docs", "report.md")

func readDocs(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(docsPath)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// docSections returns the text under each "### <Name>" heading of the docs.
func docSections(doc string) map[string]string {
	out := map[string]string{}
	parts := regexp.MustCompile(`(?m)^### `).Split(doc, -1)
	for _, p := range parts[1:] {
		name, body, _ := strings.Cut(p, "\n")
		out[strings.TrimSpace(name)] = body
	}
	return out
}

var fieldRow = regexp.MustCompile("(?m)^\\| `([A-Za-z]+)` \\|")

// jsonStructs returns every struct type reachable from t through its JSON
// fields, by Go type name, leaving out time.Time and time.Duration, which
// the docs describe as values.
func jsonStructs(t reflect.Type, out map[string]reflect.Type) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	// time.Time and metav1.Duration are strings in JSON.
	if t.Kind() != reflect.Struct || t == reflect.TypeFor[time.Time]() || t == reflect.TypeFor[metav1.Duration]() {
		return
	}
	if _, seen := out[t.Name()]; seen {
		return
	}
	out[t.Name()] = t
	for f := range t.Fields() {
		if f.IsExported() && f.Tag.Get("json") != "-" {
			jsonStructs(f.Type, out)
		}
	}
}

func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "" {
		return f.Name
	}
	return name
}

// TestDocsDescribeEveryJSONField checks that docs/report.md has a section
// per JSON object with a table row for each of its fields, and no row for a
// field that does not exist, so the documentation cannot drift from the
// types.
func TestDocsDescribeEveryJSONField(t *testing.T) {
	doc := readDocs(t)
	sections := docSections(doc)
	types := map[string]reflect.Type{}
	jsonStructs(reflect.TypeFor[Report](), types)
	// Report, Run, Step, Pod, Event, PluginRefusal, RefusedPod, Result,
	// BudgetSummary, BudgetRef, Disruption, Refusal, Violation, Race,
	// Disagreement, Windows.
	if len(types) != 16 {
		t.Errorf("found %d JSON object types, want 16; add the new one to %s", len(types), docsPath)
	}
	for name, typ := range types {
		body, ok := sections[name]
		if !ok {
			t.Errorf("%s has no section \"### %s\"", docsPath, name)
			continue
		}
		var fields []string
		for f := range typ.Fields() {
			if f.IsExported() && f.Tag.Get("json") != "-" {
				fields = append(fields, jsonName(f))
			}
		}
		var rows []string
		for _, m := range fieldRow.FindAllStringSubmatch(body, -1) {
			rows = append(rows, m[1])
		}
		for _, f := range fields {
			if !slices.Contains(rows, f) {
				t.Errorf("%s, section %s: no row for field %q", docsPath, name, f)
			}
		}
		for _, r := range rows {
			if !slices.Contains(fields, r) {
				t.Errorf("%s, section %s: row for %q, which %s does not have", docsPath, name, r, typ)
			}
		}
	}
	if !strings.Contains(doc, SchemaVersion) {
		t.Errorf("%s does not name the schema version %s", docsPath, SchemaVersion)
	}
}

// TestDocsExampleDecodes decodes the ```json example of docs/report.md
// into Report, rejecting unknown fields, and checks that WriteJSON writes it
// back with the same content.
func TestDocsExampleDecodes(t *testing.T) {
	m := regexp.MustCompile("(?s)```json\n(.*?)```").FindStringSubmatch(readDocs(t))
	if m == nil {
		t.Fatalf("%s has no ```json example", docsPath)
	}
	dec := json.NewDecoder(strings.NewReader(m[1]))
	dec.DisallowUnknownFields()
	var r Report
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("%s: the example is not a report: %v", docsPath, err)
	}
	if r.SchemaVersion != SchemaVersion || len(r.Runs) != 2 {
		t.Errorf("the example has schema %q and %d runs, want %q and 2", r.SchemaVersion, len(r.Runs), SchemaVersion)
	}
	var b bytes.Buffer
	if err := WriteJSON(&b, &r); err != nil {
		t.Fatal(err)
	}
	var got, want any
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(m[1]), &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("WriteJSON does not reproduce the example of %s:\n%s", docsPath, b.String())
	}
}

// TestDocsTableIsTheGolden checks that the table shown in docs/report.md is
// the comparison golden file.
func TestDocsTableIsTheGolden(t *testing.T) {
	golden, err := os.ReadFile(filepath.Join("testdata", "compare.golden"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(readDocs(t), "```\n"+string(golden)+"```") {
		t.Errorf("the table in %s is not testdata/compare.golden; copy it over", docsPath)
	}
}
