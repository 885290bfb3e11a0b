package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const doc = `# differences

| variant | test | upstream expects | budgetguard | why |
|---|---|---|---|---|
| StrictEvict | TestPDB/fewer | a victim beyond its PDB | none | Strict |
`

func writeDoc(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "doc.md")
	if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func run(t *testing.T, variant, events string) (string, int) {
	t.Helper()
	differ, err := differences(writeDoc(t), variant)
	if err != nil {
		t.Fatal(err)
	}
	results, failed, err := read(strings.NewReader(events))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	code := report(&b, variant, results, failed, differ)
	return b.String(), code
}

const events = `{"Action":"run","Package":"p/misc","Test":"TestPDB"}
{"Action":"fail","Package":"p/misc","Test":"TestPDB/fewer"}
{"Action":"pass","Package":"p/misc","Test":"TestPDB/other"}
{"Action":"fail","Package":"p/misc","Test":"TestPDB"}
{"Action":"skip","Package":"p/misc","Test":"TestSkipped"}
{"Action":"fail","Package":"p/misc"}
`

func TestListedFailureDiffersByDesign(t *testing.T) {
	out, code := run(t, "StrictEvict", events)
	if code != 0 {
		t.Errorf("exit %d, want 0:\n%s", code, out)
	}
	for _, want := range []string{"StrictEvict differs-by-design misc TestPDB/fewer", "StrictEvict passed misc TestPDB/other", "StrictEvict skipped-by-upstream misc TestSkipped", "StrictEvict: 1 differs-by-design, 1 passed, 1 skipped-by-upstream"} {
		if !hasLine(out, want) {
			t.Errorf("output lacks the line %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, " TestPDB\n") {
		t.Errorf("the parent test is reported beside its subtests:\n%s", out)
	}
}

func TestUnlistedFailureFails(t *testing.T) {
	out, code := run(t, "BestEffortDelete", events)
	if code == 0 || !strings.Contains(out, "FAILED") {
		t.Errorf("exit %d, want non-zero with a FAILED line:\n%s", code, out)
	}
}

func TestListedTestThatPassesFails(t *testing.T) {
	out, code := run(t, "StrictEvict", `{"Action":"pass","Package":"p/misc","Test":"TestPDB/fewer"}
`)
	if code == 0 || !strings.Contains(out, "PASSED-BUT-LISTED") {
		t.Errorf("exit %d, want non-zero with PASSED-BUT-LISTED:\n%s", code, out)
	}
}

func TestPackageFailureOutsideTestsFails(t *testing.T) {
	out, code := run(t, "StrictEvict", `{"Action":"fail","Package":"p/misc"}
`)
	if code == 0 || !strings.Contains(out, "outside any test") {
		t.Errorf("exit %d, want non-zero naming the package:\n%s", code, out)
	}
}

func TestMalformedTableRow(t *testing.T) {
	p := filepath.Join(t.TempDir(), "doc.md")
	if err := os.WriteFile(p, []byte("| variant | test |\n|---|---|\n| StrictEvict | TestX |\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := differences(p, "StrictEvict"); err == nil || !strings.Contains(err.Error(), ":3:") {
		t.Errorf("error %v, want one naming line 3", err)
	}
}

// hasLine reports whether out has a line whose fields are want's.
func hasLine(out, want string) bool {
	for _, l := range strings.Split(out, "\n") {
		if strings.Join(strings.Fields(l), " ") == want {
			return true
		}
	}
	return false
}

func TestSkipPattern(t *testing.T) {
	differ := map[string]bool{"TestPDB/a_(x:_true)": true, "TestPDB/b": true}
	pattern := skipPattern(differ)
	want := `^(TestPDB)$/^(a_\(x:_true\)|b)$`
	if pattern != want {
		t.Errorf("pattern %q, want %q", pattern, want)
	}
	if got := skipPattern(map[string]bool{"TestWhole": true}); got != "^(TestWhole)$" {
		t.Errorf("whole test: %q", got)
	}
	if got := skipPattern(nil); got != "" {
		t.Errorf("nothing listed: %q", got)
	}
}

func TestListedNotRun(t *testing.T) {
	out, code := run(t, "StrictEvict", `{"Action":"pass","Package":"p/misc","Test":"TestPDB/other"}
`)
	if code != 0 || !hasLine(out, "StrictEvict listed-not-run - TestPDB/fewer") {
		t.Errorf("exit %d; want 0 and a listed-not-run line:\n%s", code, out)
	}
}
