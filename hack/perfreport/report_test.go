package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSchedTableTellsEveryOverBudgetVictim(t *testing.T) {
	// 5bac4a3, repetitions 1 and 3: DefaultPreemption took one PUB victim
	// over budget in the second of these; the table must name it and must
	// not say "0 in all".
	f := readTestdata(t, "2026-11-28-perf-100nodes-2reps-excerpt-5bac4a3.txt")
	out, err := renderSched([]*rawFile{f})
	if err != nil {
		t.Fatal(err)
	}
	var row string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "| PreemptionBasicBudgets/nodes=100 |") {
			row = l
		}
	}
	if !strings.Contains(row, "**1 in rep 2** (1 PUB) of 2; 0 in all 2") {
		t.Errorf("the over-budget cell of:\n%s", row)
	}
	if !strings.Contains(out, "order: DefaultPreemption first in all 2, not alternated (read from the order of the result lines)") {
		t.Errorf("the order is not stated:\n%s", out)
	}
}

func TestSchedTableTellsEveryStall(t *testing.T) {
	f := readTestdata(t, "2026-11-27-perf-100nodes-5reps-excerpt-f758601.txt")
	out, err := renderSched([]*rawFile{f})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "B: **rep 3 stalled: 320.1 s**") || !strings.Contains(out, "**missed**: B rep 3 stalled: 320.1 s") {
		t.Errorf("the stall of repetition 3:\n%s", out)
	}
	// PreemptionBasicBudgets' phases (6 to 14 s) are resolved by the poll
	// only to bounds: no single ratio is printed.
	if !strings.Contains(out, "1-s poll)") {
		t.Errorf("the throughput is not shown as poll bounds:\n%s", out)
	}
}

func TestSchedTableFailures(t *testing.T) {
	f := readTestdata(t, "2026-11-27-perf-1000nodes-1rep-excerpt-69f5e57.txt")
	out, err := renderSched([]*rawFile{f})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"D: **rep 1 failed: op 7: error in waiting for pods to get scheduled",
		"| PodGroupBudgets nodes=1000/NoPodGroup | 0 of 1 |",
		"D: rep 1: not run; B: **rep 1 failed: op 4: failed to create namespace for Pod: budgets**",
		"**missed**: B rep 1 failed: op 4: failed to create namespace for Pod: budgets",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
}

// The bind clock's rate replaces the poll's where every repetition of a row
// has it; a pods/s that is not measured-pods over SchedulingDuration is an
// error.
func TestThroughputSource(t *testing.T) {
	bound := strings.NewReplacer(
		"47.96 pods/s", "47.96 pods/s\t100 bound-pods\t1.5 bound-span-s\t66.67 bound-pods/s",
		"47.85 pods/s", "47.85 pods/s\t100 bound-pods\t1.25 bound-span-s\t80 bound-pods/s",
	).Replace(oneProcess)
	var text string
	for range 6 {
		text += bound
	}
	f, err := parseRaw("2026-11-29-perf-100nodes-6reps-abcdef1.txt", strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	out, err := renderSched([]*rawFile{f})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "66.67 → 80.00 (1.20×, 95 % CI 1.20–1.20×)") || !strings.Contains(out, "Throughput: `bound-pods/s`") {
		t.Errorf("the bind clock's rate:\n%s", out)
	}
	bad := strings.Replace(oneProcess, "47.96 pods/s", "52.00 pods/s", 1)
	f, err = parseRaw("2026-11-29-perf-100nodes-1rep-abcdef1.txt", strings.NewReader(bad))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := renderSched([]*rawFile{f}); err == nil || !strings.Contains(err.Error(), ":5: ") || !strings.Contains(err.Error(), "pods/s 52 is not") {
		t.Errorf("an inconsistent pods/s: %v", err)
	}
}

func TestBenchstatCheck(t *testing.T) {
	raw := map[string]*rawFile{}
	f, err := parseRaw("2026-11-29-perf-100nodes-1rep-abcdef1.txt", strings.NewReader(oneProcess))
	if err != nil {
		t.Fatal(err)
	}
	raw[f.Name] = f
	text := `# command: benchstat -col /plugin 2026-11-29-perf-100nodes-1rep-abcdef1.txt
goos: linux
                                           │ DefaultPreemption │    BudgetAwarePreemption    │
                                           │      pods/s       │   pods/s     vs base        │
PerfScheduling/PreemptionBasic/nodes=100-2        47.96 ± ∞ ¹     47.85 ± ∞ ¹  ~ (p=1.000 n=1)
¹ need >= 6 samples for confidence interval at level 0.95
`
	bf, err := parseBenchstat("2026-11-29-perf-100nodes-1rep.benchstat.txt", strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if len(bf.Cells) != 2 || bf.Cells[1].Column != "BudgetAwarePreemption" || bf.Cells[1].Unit != "pods/s" {
		t.Fatalf("cells %+v", bf.Cells)
	}
	if _, err := renderBenchstat(bf, raw); err != nil {
		t.Errorf("a benchstat that agrees: %v", err)
	}
	bf, err = parseBenchstat("2026-11-29-perf-100nodes-1rep.benchstat.txt", strings.NewReader(strings.Replace(text, "47.85 ±", "49.85 ±", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := renderBenchstat(bf, raw); err == nil || !strings.Contains(err.Error(), ":5: benchstat's median 49.85") {
		t.Errorf("a benchstat that disagrees: %v", err)
	}
	if _, err := parseBenchstat("x.benchstat.txt", strings.NewReader("goos: linux\nsomething else\n")); err == nil {
		t.Error("an unrecognised line in a benchstat file")
	}
	if v, tol, ok := parseSI("861.3m"); !ok || v != 0.8613 || tol != 0.00005 {
		t.Errorf("parseSI: %g %g %v", v, tol, ok)
	}
}

func writeData(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "2026-11-29-perf-100nodes-1rep-abcdef1.txt"), []byte(oneProcess), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestGenerate(t *testing.T) {
	d, err := loadData(writeData(t))
	if err != nil {
		t.Fatal(err)
	}
	page := "# p\n\n<!-- BEGIN GENERATED: sched 2026-11-29-perf-100nodes-1rep-abcdef1.txt -->\nstale\n<!-- END GENERATED -->\n\nText.\n"
	out, err := generate(page, d)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "stale") || !strings.Contains(out, "| PreemptionBasic/nodes=100 | 1 |") || !strings.HasSuffix(out, "<!-- END GENERATED -->\n\nText.\n") {
		t.Errorf("generated:\n%s", out)
	}
	again, err := generate(out, d)
	if err != nil || again != out {
		t.Errorf("not idempotent: %v", err)
	}
	for _, c := range []struct{ page, want string }{
		{"# p\n", "raw files no generated section of the page uses: 2026-11-29-perf-100nodes-1rep-abcdef1.txt"},
		{page + "\n| a | b |\n|---|---|\n", "a table outside the generated sections"},
		{page + "\n## History (no raw data kept)\n\n| a | b |\n|---|---|\n", ""},
		{strings.Replace(page, "<!-- END GENERATED -->\n", "", 1), "no <!-- END GENERATED --> after it"},
		{strings.Replace(page, "sched 2026", "tables 2026", 1), "unknown kind"},
		{strings.Replace(page, "sched 2026-11-29-perf-100nodes-1rep-abcdef1.txt", "sched 2026-11-29-none-abcdef1.txt", 1), "is not a raw file"},
		{page + "<!-- END GENERATED -->\n", "an end marker without a begin marker"},
	} {
		_, err := generate(c.page, d)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v", c.page, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q: %v; want %q", c.page, err, c.want)
		}
	}
}

func TestRunCheck(t *testing.T) {
	dir := writeData(t)
	pagePath := filepath.Join(t.TempDir(), "performance.md")
	page := "<!-- BEGIN GENERATED: sched 2026-11-29-perf-100nodes-1rep-abcdef1.txt -->\n<!-- END GENERATED -->\n"
	if err := os.WriteFile(pagePath, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(dir, pagePath, false); err == nil || !strings.Contains(err.Error(), "make perf-report") {
		t.Errorf("a stale page passed the check: %v", err)
	}
	if err := run(dir, pagePath, true); err != nil {
		t.Fatal(err)
	}
	if err := run(dir, pagePath, false); err != nil {
		t.Errorf("the regenerated page fails the check: %v", err)
	}
	// A raw file the tool cannot parse fails the check, naming it and the line.
	bad := filepath.Join(dir, "2026-11-29-perf-100nodes-1rep-abcdef2.txt")
	if err := os.WriteFile(bad, []byte(strings.Replace(oneProcess, "PASS", "PASSED", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(dir, pagePath, false); err == nil || !strings.Contains(err.Error(), "2026-11-29-perf-100nodes-1rep-abcdef2.txt:7: unrecognised line") {
		t.Errorf("an unreadable raw file: %v", err)
	}
}

// The committed raw files all parse and the committed page is what they
// give: the same check as hack/verify-perf-report.sh, from the test.
func TestCommittedPage(t *testing.T) {
	if err := run(filepath.Join("..", "..", "docs", "perf-data"), filepath.Join("..", "..", "docs", "performance.md"), false); err != nil {
		t.Error(err)
	}
}
