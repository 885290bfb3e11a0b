package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The files under testdata/ are excerpts of docs/perf-data/'s raw files:
// whole lines, some left out, named as the raw files are.

func readTestdata(t *testing.T, name string) *rawFile {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rf, err := parseRaw(name, f)
	if err != nil {
		t.Fatal(err)
	}
	return rf
}

func mustFail(t *testing.T, name, text, want string) {
	t.Helper()
	_, err := parseRaw(name, strings.NewReader(text))
	if err == nil {
		t.Fatalf("%s parsed; want an error with %q", name, want)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q; want it to contain %q", err, want)
	}
}

func TestParseResultLine(t *testing.T) {
	line := "BenchmarkPerfScheduling/plugin=DefaultPreemption/PreemptionBasicBudgets/nodes=100-2   \t       1\t         9.067 SchedulingDuration/Duration\t       100.0 measured-pods\t         0 overbudget-pdb-victims\t         1.000 overbudget-pub-victims\t         1.000 overbudget-victims\t11.03 pods/s"
	r, started, err := parseResultLine(line)
	if err != nil || started {
		t.Fatalf("parseResultLine: %v, started %v", err, started)
	}
	if r.Name != "PerfScheduling/plugin=DefaultPreemption/PreemptionBasicBudgets/nodes=100" || r.Procs != 2 || r.N != 1 {
		t.Errorf("name %q procs %d N %d", r.Name, r.Procs, r.N)
	}
	if r.Values["overbudget-pub-victims"] != 1 || r.Values[unitDuration] != 9.067 || r.Values["pods/s"] != 11.03 {
		t.Errorf("values %v", r.Values)
	}
	r, started, err = parseResultLine("BenchmarkDeschedulingLoop/evictor=DefaultEvictor-2         \t")
	if err != nil || !started || r.Name != "DeschedulingLoop/evictor=DefaultEvictor" {
		t.Errorf("a name-only line: %v %v %+v", err, started, r)
	}
	for _, bad := range []string{
		"BenchmarkX-2 \t 1\t 9.0 a\t 3",            // a value without its unit
		"BenchmarkX-2 \t 1\t nine a",               // not a number
		"BenchmarkX-2 \t 0\t 9 a",                  // no iterations
		"BenchmarkX-2 \t x\t 9 a",                  // iterations not a number
		"BenchmarkX-2 \t 1\t 9 loop-s\t 10 loop-s", // a unit twice
		"Benchmark \t 1\t 9 a",                     // no name
		"BenchmarkX-2 \t 1",                        // no figure
	} {
		if _, _, err := parseResultLine(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestParseName(t *testing.T) {
	for name, want := range map[string]nameInfo{
		"2026-11-27-perf-100nodes-10reps-d7ea37d.txt":         {Date: "2026-11-27", What: "perf-100nodes-10reps", Commit: "d7ea37d", Nodes: 100, Reps: 10},
		"2026-11-28-perf-1000nodes-rep2-gate-6dae4e7.txt":     {Date: "2026-11-28", What: "perf-1000nodes-rep2-gate", Commit: "6dae4e7", Nodes: 1000, Reps: 1},
		"2026-11-28-perf-1000nodes-3reps-gate.benchstat.txt":  {Date: "2026-11-28", What: "perf-1000nodes-3reps-gate", Nodes: 1000, Reps: 3, Benchstat: true},
		"2026-11-27-cachesync-30000pods.txt":                  {Date: "2026-11-27", What: "cachesync-30000pods"},
		"2026-11-27-desched-1000nodes-pair2-bde345b.txt":      {Date: "2026-11-27", What: "desched-1000nodes-pair2", Commit: "bde345b", Nodes: 1000},
		"2026-11-27-perf-1000nodes-1rep-69f5e57.txt":          {Date: "2026-11-27", What: "perf-1000nodes-1rep", Commit: "69f5e57", Nodes: 1000, Reps: 1},
		"2026-11-27-postfilter-shortpath-excerpt-f238d5c.txt": {Date: "2026-11-27", What: "postfilter-shortpath-excerpt", Commit: "f238d5c"},
	} {
		got, err := parseName(name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if got != want {
			t.Errorf("%s: %+v, want %+v", name, got, want)
		}
	}
	for _, bad := range []string{"perf-100nodes.txt", "2026-11-27-perf.log", "2026-11-27-Perf-x.txt", "2026-11-27-perf-0reps-abcdef1.txt"} {
		if _, err := parseName(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func TestParseSchedulerPerf(t *testing.T) {
	f := readTestdata(t, "2026-11-28-perf-100nodes-2reps-excerpt-5bac4a3.txt")
	if len(f.Batches) != 1 || len(f.Batches[0].Processes) != 2 {
		t.Fatalf("%d batches; want 1 of 2 processes", len(f.Batches))
	}
	b := f.Batches[0]
	if got := b.version(); got != "v1.37.2 (from the log)" {
		t.Errorf("version %q", got)
	}
	if got := b.machine(); got != "`AMD EPYC`, GOMAXPROCS 2" {
		t.Errorf("machine %q", got)
	}
	if got := b.commit(); got != "5bac4a3" {
		t.Errorf("commit %q", got)
	}
	p := b.Processes[1]
	if p.Status != "PASS" || len(p.Results) != 4 {
		t.Fatalf("process 2: status %q, %d results", p.Status, len(p.Results))
	}
	r := p.Results[1]
	if r.Name != "PerfScheduling/plugin=DefaultPreemption/PreemptionBasicBudgets/nodes=100" || r.Values[unitOverPUB] != 1 || r.Values[unitOver] != 1 {
		t.Errorf("the third repetition's DefaultPreemption over budget: %s %v", r.Name, r.Values)
	}
	if f.headerField("commit") == "" {
		t.Error("no commit: comment")
	}
}

func TestParseFailures(t *testing.T) {
	f := readTestdata(t, "2026-11-27-perf-1000nodes-1rep-excerpt-69f5e57.txt")
	p := f.Batches[0].Processes[0]
	if p.Status != "FAIL" {
		t.Errorf("status %q", p.Status)
	}
	s, err := buildSeries(f.Batches[0], pluginComparison, byProcess)
	if err != nil {
		t.Fatal(err)
	}
	cell := s.Reps[0].Samples["PerfScheduling/PreemptionBasicBudgets/nodes=1000"]
	if cell == nil || cell[0] == nil || cell[0].Failure == nil || cell[1] == nil || cell[1].Result == nil {
		t.Fatalf("PreemptionBasicBudgets: want Default failed and BudgetAware a result, got %+v", cell)
	}
	if !strings.Contains(cell[0].Failure.Message, "op 7: error in waiting for pods to get scheduled") {
		t.Errorf("message %q", cell[0].Failure.Message)
	}
	// Parents ("plugin=DefaultPreemption", "PreemptionBasicBudgets") are no
	// samples; the gang workload that never ran under Default is absent.
	if c := s.Reps[0].Samples["PerfScheduling/PreemptionPodGroupBudgets/nodes=1000/NoPodGroup"]; c == nil || c[0] != nil || c[1].Failure == nil {
		t.Errorf("NoPodGroup: %+v", c)
	}
	if _, ok := s.Reps[0].Samples["PerfScheduling/PreemptionBasicBudgets"]; ok {
		t.Error("a parent benchmark's failure became a sample")
	}
}

func TestParseDeschedAndMarkers(t *testing.T) {
	// A run stopped by hand: the second DefaultEvictor loop has a name and
	// no result.
	f := readTestdata(t, "2026-11-27-desched-1000nodes-partial-5b5cf1c.txt")
	s, err := buildSeries(f.Batches[0], evictorComparison, byPair)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Reps) != 2 || s.Reps[1].Samples["DeschedulingLoop"][0].Incomplete == nil {
		t.Fatalf("want 2 pairs, the second stopped: %d", len(s.Reps))
	}
	// go test -v: the name comes before the log and the result.
	f = readTestdata(t, "2026-11-27-desched-1000nodes-budgetaware-d7ea37d.txt")
	s, err = buildSeries(f.Batches[0], evictorComparison, byPair)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Reps) != 1 || s.Reps[0].Samples["DeschedulingLoop"][1].Result == nil || s.Reps[0].Samples["DeschedulingLoop"][0] != nil {
		t.Fatalf("BudgetAwareEvictor alone: %+v", s.Reps)
	}
	// Two commits in one file, marked.
	f = readTestdata(t, "2026-11-27-postfilter-shortpath-excerpt-f238d5c.txt")
	if len(f.Batches) != 2 || f.Batches[0].commit() != "0547628" || f.Batches[1].commit() != "f238d5c" || len(f.Batches[1].Processes) != 2 {
		t.Fatalf("batches: %d", len(f.Batches))
	}
	// A run kept as a comment, before the marked "after" runs.
	f = readTestdata(t, "2026-11-27-cachesync-30000pods.txt")
	if len(f.Batches) != 2 || f.Batches[0].Label != "before" || !f.Batches[0].Processes[0].Results[0].Commented || f.Batches[1].machine() == "not recorded" {
		t.Fatalf("cachesync batches %+v", f.Batches)
	}
	if f.Batches[0].machine() != "not recorded" {
		t.Errorf("the commented run's machine: %q", f.Batches[0].machine())
	}
}

const oneProcess = `goos: linux
goarch: amd64
pkg: github.com/budgetguard/budgetguard/test/perf
cpu: AMD EPYC
BenchmarkPerfScheduling/plugin=DefaultPreemption/PreemptionBasic/nodes=100-2 	       1	         2.085 SchedulingDuration/Duration	       100.0 measured-pods	47.96 pods/s
BenchmarkPerfScheduling/plugin=BudgetAwarePreemption/PreemptionBasic/nodes=100-2 	       1	         2.090 SchedulingDuration/Duration	       100.0 measured-pods	47.85 pods/s
PASS
`

func TestParseRejects(t *testing.T) {
	name := "2026-11-29-perf-100nodes-1rep-abcdef1.txt"
	if _, err := parseRaw(name, strings.NewReader(oneProcess)); err != nil {
		t.Fatalf("the well-formed input: %v", err)
	}
	mustFail(t, name, strings.Replace(oneProcess, "PASS\n", "PASS\nok, done\n", 1), name+":8: unrecognised line")
	mustFail(t, name, "    a log line\n"+oneProcess, name+":1: an indented line outside a benchmark's log")
	mustFail(t, name, strings.Replace(oneProcess, "PASS\n", "cpu: Intel\nPASS\n", 1), "configuration line")
	mustFail(t, name, strings.Replace(oneProcess, "47.85 pods/s", "47.85", 1), name+":6: benchmark")
	mustFail(t, "2026-11-29-perf-100nodes-3reps-abcdef1.txt", oneProcess, "the name says 3 repetition(s), the file holds 1")
	mustFail(t, "2026-11-29-perf-500nodes-1rep-abcdef1.txt", oneProcess, "a 100-node workload in a file named for 500 nodes")
	mustFail(t, "2026-11-29-perf-100nodes-2reps-abcdef1.txt", oneProcess+strings.Replace(oneProcess, "AMD EPYC", "Intel(R) Xeon(R) Processor", 1), "ran on more than one machine")
	twoVersions := strings.Replace(oneProcess, "PASS\n", "--- BENCH: BenchmarkX\n    k8s.io/kubernetes@v1.37.2/x\n    k8s.io/kubernetes@v1.36.3/x\nPASS\n", 1)
	mustFail(t, name, twoVersions, "more than one Kubernetes version")
	mustFail(t, "perf.txt", oneProcess, "the name is not")
	mustFail(t, name, "# only a comment\n", "no benchmark output")
	withDuration := strings.Replace(oneProcess, "PASS\n", "--- FAIL: BenchmarkPerfScheduling/plugin=DefaultPreemption/X (12.50s)\n    a log line\nFAIL\n", 1)
	if f, err := parseRaw(name, strings.NewReader(withDuration)); err != nil || f.Batches[0].Processes[0].Failures[0].Name != "PerfScheduling/plugin=DefaultPreemption/X" {
		t.Errorf("a failure with its duration: %v", err)
	}
	marked := "# raw output of the benchmark at abcdef2\n" + oneProcess
	if _, err := parseRaw(name, strings.NewReader(marked)); err != nil {
		t.Errorf("a marked batch: %v", err)
	}
	mustFail(t, "2026-11-29-perf-100nodes-2reps-abcdef1.txt", oneProcess+"# raw output of the benchmark at abcdef2\n"+oneProcess, "after results that no marker opened")
}

// The order the plugins ran in: recorded by the new harness, or read from
// the lines; a recorded order the lines contradict is an error.
func TestOrder(t *testing.T) {
	name := "2026-11-29-perf-100nodes-2reps-abcdef1.txt"
	reversed := strings.Replace(oneProcess, "cpu: AMD EPYC\n", "cpu: AMD EPYC\nplugin order: BudgetAwarePreemption, DefaultPreemption\n", 1)
	lines := strings.Split(reversed, "\n")
	lines[5], lines[6] = lines[6], lines[5]
	reversed = strings.Join(lines, "\n")
	forward := strings.Replace(oneProcess, "cpu: AMD EPYC\n", "cpu: AMD EPYC\nplugin order: DefaultPreemption, BudgetAwarePreemption\n", 1)
	f, err := parseRaw(name, strings.NewReader(forward+reversed))
	if err != nil {
		t.Fatal(err)
	}
	s, err := buildSeries(f.Batches[0], pluginComparison, byProcess)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.orderText(); got != "DefaultPreemption first in 1; BudgetAwarePreemption first in 2 (recorded in the raw output)" {
		t.Errorf("order: %q", got)
	}
	// Recorded one way, run the other.
	wrong := strings.Replace(oneProcess, "cpu: AMD EPYC\n", "cpu: AMD EPYC\nplugin order: BudgetAwarePreemption, DefaultPreemption\n", 1)
	f, err = parseRaw("2026-11-29-perf-100nodes-1rep-abcdef1.txt", strings.NewReader(wrong))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := buildSeries(f.Batches[0], pluginComparison, byProcess); err == nil || !strings.Contains(err.Error(), "records the order") {
		t.Errorf("a recorded order the lines contradict: %v", err)
	}
	// Unrecorded: read from the lines, and said so.
	f, _ = parseRaw("2026-11-29-perf-100nodes-1rep-abcdef1.txt", strings.NewReader(oneProcess))
	s, _ = buildSeries(f.Batches[0], pluginComparison, byProcess)
	if got := s.orderText(); got != "DefaultPreemption first (read from the order of the result lines)" {
		t.Errorf("order: %q", got)
	}
}

// Pairs of descheduling loops in one process (PERF_DESCHED_SHARED=1), their
// order alternated and recorded before each pair.
func TestDeschedPairs(t *testing.T) {
	text := `goos: linux
cpu: AMD EPYC
evictor order: DefaultEvictor, BudgetAwareEvictor
BenchmarkDeschedulingLoop/pair=1/evictor=DefaultEvictor-2 	1	10 cluster-build-s	4500 evictions	100 loop-s	2000 refused-429	101 run-s
BenchmarkDeschedulingLoop/pair=1/evictor=BudgetAwareEvictor-2 	1	10 cluster-build-s	4500 evictions	50 loop-s	0 refused-429	51 run-s
evictor order: BudgetAwareEvictor, DefaultEvictor
BenchmarkDeschedulingLoop/pair=2/evictor=BudgetAwareEvictor-2 	1	10 cluster-build-s	4500 evictions	52 loop-s	0 refused-429	53 run-s
BenchmarkDeschedulingLoop/pair=2/evictor=DefaultEvictor-2 	1	10 cluster-build-s	4500 evictions	98 loop-s	1990 refused-429	99 run-s
PASS
`
	f, err := parseRaw("2026-11-29-desched-100nodes-abcdef1.txt", strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	s, err := buildSeries(f.Batches[0], evictorComparison, byPair)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Reps) != 2 || len(s.Workloads) != 1 || s.Workloads[0] != "DeschedulingLoop" {
		t.Fatalf("pairs %d, workloads %v", len(s.Reps), s.Workloads)
	}
	if got := s.orderText(); got != "DefaultEvictor first in 1; BudgetAwareEvictor first in 2 (recorded in the raw output)" {
		t.Errorf("order: %q", got)
	}
	out, err := renderDesched([]*rawFile{f})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "| A | 2 | 99.00 → 51.00 (0.52×, range 0.50–0.53×)") {
		t.Errorf("desched table:\n%s", out)
	}
}
