package main

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// A raw file of docs/perf-data holds the output of one or more runs of a Go
// benchmark binary: hack/perf.sh's (scheduler_perf through test/perf),
// hack/perf-desched.sh's, or go test -bench of a unit benchmark, with
// comment lines ("# ...") written by whoever kept it. Its name says when,
// what, at which size and commit (nameInfo). Its lines are, strictly:
//
//	# ...                       a comment; three forms open a batch (below),
//	                            and "# Benchmark..." is a result kept as a
//	                            comment (a run recorded in the header)
//	goos: / goarch: / pkg: / cpu:   the configuration block of a process;
//	                            goos: starts a process
//	plugin order: A, B          the order a process runs the plugins in
//	evictor order: A, B         the order of the next pair of loops
//	Benchmark<name>[-P] N v unit ...   a result (P: GOMAXPROCS)
//	Benchmark<name>[-P]         a benchmark started (go test -v), or one
//	                            whose result never came (the run was stopped)
//	--- BENCH: / --- FAIL: / --- SKIP: <name>   the start of its log
//	four spaces or a tab, then text   a line of the log of the benchmark
//	                            line or log header before it
//	PASS, FAIL, ok ...          the end of a process
//	2026-11-26T16:23:43Z        a timestamp (date -u) around a run
//	an empty line
//
// Anything else is an error naming the file and the line. A file whose runs
// were made at different settings is split into batches by comment lines
// "## run <n>: <label>", "# raw output of the benchmark at <commit>" and
// "# before:" / "# after:"; without them it is one batch.
type rawFile struct {
	Name     string // base name
	Info     nameInfo
	Comments []comment
	Batches  []*batch
}

type comment struct {
	Line int
	Text string // without the leading "#" and one space
}

type batch struct {
	File      *rawFile
	Label     string // "" when the file is one batch
	Commit    string // the batch's own, when its label names one
	Processes []*process
	// Versions are the Kubernetes versions the logs of its processes name
	// (k8s.io/kubernetes@vX.Y.Z in a path).
	Versions map[string]bool
}

type process struct {
	Line     int // of its goos: line, or of its first result
	Config   map[string]string
	Orders   []orderLine
	Results  []*result
	Failures []*failure
	Started  []startLine // name-only Benchmark lines
	Status   string      // PASS, FAIL, ok, or "" (none: stopped)
}

type orderLine struct {
	Line  int
	Kind  string // plugin or evictor
	Names []string
}

type startLine struct {
	Line int
	Name string
}

type result struct {
	Line      int
	Name      string // without "Benchmark" and the -P suffix
	Procs     int
	N         int64
	Units     []string // in the order of the line
	Values    map[string]float64
	Commented bool
}

type failure struct {
	Line    int
	Name    string
	Message string // scheduler_perf's "Error running workload": the rest of it
}

var (
	runMarker      = regexp.MustCompile(`^## run (\d+): (.+)$`)
	commitMarker   = regexp.MustCompile(`^# raw output of the benchmark at ([0-9a-f]{7,40})$`)
	labelMarker    = regexp.MustCompile(`^# (before|after):$`)
	configLine     = regexp.MustCompile(`^(goos|goarch|pkg|cpu): (.*)$`)
	orderLineRe    = regexp.MustCompile(`^(plugin|evictor) order: (.+)$`)
	logHeader      = regexp.MustCompile(`^--- (BENCH|FAIL|SKIP): (\S+)(?: \([0-9.]+s\))?$`)
	timestampLine  = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$`)
	procsSuffix    = regexp.MustCompile(`-(\d+)$`)
	versionInLog   = regexp.MustCompile(`k8s\.io/kubernetes@(v\d+\.\d+\.\d+)`)
	workloadErrorR = regexp.MustCompile(`Error running workload \S+: (.*)$`)
)

// parseRaw reads a raw file. name is its base name, for the errors and the
// name's fields.
func parseRaw(name string, r io.Reader) (*rawFile, error) {
	info, err := parseName(name)
	if err != nil {
		return nil, err
	}
	f := &rawFile{Name: name, Info: info}
	p := &rawParser{file: f}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		p.line++
		if err := p.parseLine(strings.TrimRight(sc.Text(), "\r")); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, p.line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := p.finish(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return f, nil
}

type rawParser struct {
	file   *rawFile
	line   int
	batch  *batch
	proc   *process
	logOf  *failure // the FAIL block being read, if any
	inLog  bool
	marked bool // the file has batch markers
}

func (p *rawParser) currentBatch() *batch {
	if p.batch == nil {
		p.batch = &batch{File: p.file, Versions: map[string]bool{}}
		p.file.Batches = append(p.file.Batches, p.batch)
	}
	return p.batch
}

func (p *rawParser) newBatch(label, commit string) error {
	if !p.marked && p.batch != nil && len(p.batch.Processes) > 0 {
		return fmt.Errorf("batch marker %q after results that no marker opened", label)
	}
	p.marked = true
	p.batch = &batch{File: p.file, Label: label, Commit: commit, Versions: map[string]bool{}}
	p.file.Batches = append(p.file.Batches, p.batch)
	p.proc, p.logOf, p.inLog = nil, nil, false
	return nil
}

// currentProcess is the process a result belongs to: the open one, or a new
// one without configuration (a result kept as a comment, or output whose
// goos: block was cut).
func (p *rawParser) currentProcess() *process {
	if p.proc == nil || p.proc.Status != "" {
		p.proc = &process{Line: p.line, Config: map[string]string{}}
		b := p.currentBatch()
		b.Processes = append(b.Processes, p.proc)
	}
	return p.proc
}

func (p *rawParser) parseLine(s string) error {
	switch {
	case s == "":
		p.inLog, p.logOf = false, nil
		return nil
	case strings.HasPrefix(s, "#"):
		return p.parseComment(s)
	case strings.HasPrefix(s, "    ") || strings.HasPrefix(s, "\t"):
		if !p.inLog {
			return fmt.Errorf("an indented line outside a benchmark's log: %q", clip(s))
		}
		if m := versionInLog.FindStringSubmatch(s); m != nil {
			p.currentBatch().Versions[m[1]] = true
		}
		if p.logOf != nil && p.logOf.Message == "" {
			if m := workloadErrorR.FindStringSubmatch(s); m != nil {
				p.logOf.Message = strings.TrimSpace(m[1])
			}
		}
		return nil
	}
	p.inLog, p.logOf = false, nil
	switch {
	case timestampLine.MatchString(s):
		return nil
	case s == "PASS" || s == "FAIL" || strings.HasPrefix(s, "ok  ") || strings.HasPrefix(s, "ok\t"):
		if p.proc == nil || p.proc.Status != "" {
			return fmt.Errorf("%q without a process before it", clip(s))
		}
		p.proc.Status = strings.Fields(s)[0]
		return nil
	}
	if m := configLine.FindStringSubmatch(s); m != nil {
		if m[1] == "goos" || p.proc == nil || p.proc.Status != "" {
			p.proc = &process{Line: p.line, Config: map[string]string{}}
			b := p.currentBatch()
			b.Processes = append(b.Processes, p.proc)
		}
		if len(p.proc.Results) > 0 || len(p.proc.Failures) > 0 {
			return fmt.Errorf("configuration line %q after the process's results", clip(s))
		}
		if _, dup := p.proc.Config[m[1]]; dup {
			return fmt.Errorf("configuration %q given twice in one process", m[1])
		}
		p.proc.Config[m[1]] = strings.TrimSpace(m[2])
		return nil
	}
	if m := orderLineRe.FindStringSubmatch(s); m != nil {
		var names []string
		for _, n := range strings.Split(m[2], ",") {
			n = strings.TrimSpace(n)
			if n == "" {
				return fmt.Errorf("an empty name in %q", clip(s))
			}
			names = append(names, n)
		}
		proc := p.currentProcess()
		proc.Orders = append(proc.Orders, orderLine{Line: p.line, Kind: m[1], Names: names})
		return nil
	}
	if m := logHeader.FindStringSubmatch(s); m != nil {
		p.inLog = true
		if m[1] == "FAIL" {
			proc := p.currentProcess()
			f := &failure{Line: p.line, Name: strings.TrimPrefix(m[2], "Benchmark")}
			if !strings.HasPrefix(m[2], "Benchmark") {
				return fmt.Errorf("a failure of %q, which is not a benchmark", m[2])
			}
			proc.Failures = append(proc.Failures, f)
			p.logOf = f
		}
		return nil
	}
	if strings.HasPrefix(s, "Benchmark") {
		// Its log may follow without a "--- BENCH:" line (go test -v, or
		// hack/perf-desched.sh, which keeps the log but not that line).
		p.inLog = true
		return p.parseBenchmark(s, false)
	}
	return fmt.Errorf("unrecognised line %q", clip(s))
}

func (p *rawParser) parseComment(s string) error {
	if m := runMarker.FindStringSubmatch(s); m != nil {
		return p.newBatch("run "+m[1]+": "+strings.TrimSpace(m[2]), "")
	}
	if m := commitMarker.FindStringSubmatch(s); m != nil {
		return p.newBatch("at "+m[1], m[1])
	}
	if m := labelMarker.FindStringSubmatch(s); m != nil {
		return p.newBatch(m[1], "")
	}
	text := strings.TrimPrefix(strings.TrimPrefix(s, "#"), " ")
	if strings.HasPrefix(text, "Benchmark") {
		return p.parseBenchmark(text, true)
	}
	p.file.Comments = append(p.file.Comments, comment{Line: p.line, Text: text})
	return nil
}

func (p *rawParser) parseBenchmark(s string, commented bool) error {
	r, started, err := parseResultLine(s)
	if err != nil {
		return err
	}
	proc := p.currentProcess()
	if started {
		proc.Started = append(proc.Started, startLine{Line: p.line, Name: r.Name})
		return nil
	}
	r.Line, r.Commented = p.line, commented
	proc.Results = append(proc.Results, r)
	return nil
}

// parseResultLine reads "Benchmark<name>[-P] N v unit v unit ...". A line
// with the name alone is a benchmark started (started is true).
func parseResultLine(s string) (r *result, started bool, err error) {
	fields := strings.Fields(s)
	if len(fields) == 0 || !strings.HasPrefix(fields[0], "Benchmark") || len(fields[0]) == len("Benchmark") {
		return nil, false, fmt.Errorf("not a benchmark line: %q", clip(s))
	}
	r = &result{Procs: 1, Values: map[string]float64{}}
	name := strings.TrimPrefix(fields[0], "Benchmark")
	if m := procsSuffix.FindStringSubmatch(name); m != nil {
		r.Procs, _ = strconv.Atoi(m[1])
		name = strings.TrimSuffix(name, m[0])
	}
	r.Name = name
	if len(fields) == 1 {
		return r, true, nil
	}
	r.N, err = strconv.ParseInt(fields[1], 10, 64)
	if err != nil || r.N <= 0 {
		return nil, false, fmt.Errorf("benchmark %s: iterations %q are not a positive integer", name, fields[1])
	}
	rest := fields[2:]
	if len(rest) == 0 || len(rest)%2 != 0 {
		return nil, false, fmt.Errorf("benchmark %s: want value-unit pairs after the iterations, got %d fields", name, len(rest))
	}
	for i := 0; i < len(rest); i += 2 {
		v, err := strconv.ParseFloat(rest[i], 64)
		if err != nil {
			return nil, false, fmt.Errorf("benchmark %s: value %q before %q is not a number", name, rest[i], rest[i+1])
		}
		unit := rest[i+1]
		if _, dup := r.Values[unit]; dup {
			return nil, false, fmt.Errorf("benchmark %s: unit %q twice", name, unit)
		}
		r.Units = append(r.Units, unit)
		r.Values[unit] = v
	}
	return r, false, nil
}

func (p *rawParser) finish() error {
	f := p.file
	if len(f.Batches) == 0 {
		return fmt.Errorf("no benchmark output")
	}
	for _, b := range f.Batches {
		if len(b.Processes) == 0 {
			return fmt.Errorf("batch %q has no benchmark output", b.Label)
		}
		for _, proc := range b.Processes {
			if len(proc.Results) == 0 && len(proc.Failures) == 0 && len(proc.Started) == 0 {
				return fmt.Errorf("the process at line %d has no result, failure or started benchmark", proc.Line)
			}
			if len(proc.Orders) > 0 && proc.Orders[0].Kind == "plugin" && len(proc.Orders) > 1 {
				return fmt.Errorf("the process at line %d prints its plugin order %d times", proc.Line, len(proc.Orders))
			}
		}
		if len(b.Versions) > 1 {
			return fmt.Errorf("batch %q: its logs name more than one Kubernetes version (%s)", b.Label, strings.Join(sortedKeys(b.Versions), ", "))
		}
		cpus := map[string]bool{}
		for _, proc := range b.Processes {
			if c, ok := proc.Config["cpu"]; ok {
				cpus[c] = true
			}
		}
		if len(cpus) > 1 {
			return fmt.Errorf("batch %q ran on more than one machine (cpu: %s): split it into batches", b.Label, strings.Join(sortedKeys(cpus), "; "))
		}
	}
	return checkNameAgainstContent(f)
}

// clip shortens a line for an error message.
func clip(s string) string {
	if len(s) > 120 {
		return s[:120] + "..."
	}
	return s
}
