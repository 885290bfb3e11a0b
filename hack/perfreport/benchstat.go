package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// A benchstat file of docs/perf-data holds benchstat's text output over raw
// files it names in its comments; the report does not use its figures, but
// checks every median in it against the raw files, so that it cannot say
// something they do not.
type benchstatFile struct {
	Name     string
	Comments []comment
	Config   map[string]string
	Cells    []benchstatCell
}

type benchstatCell struct {
	Line      int
	Row       string // benchstat's row: the name without the column's key, with -P
	Column    string // the column's value (a plugin, an evictor)
	Unit      string
	Value     float64
	Text      string  // as printed
	Tolerance float64 // half the last printed digit
}

var (
	siNumber  = regexp.MustCompile(`^(-?[0-9]+(?:\.([0-9]+))?)(n|µ|m|k|M|G|Ki|Mi|Gi)?$`)
	footnote  = regexp.MustCompile(`^[¹²³⁴⁵⁶⁷⁸⁹⁰]+ `)
	siFactors = map[string]float64{"": 1, "n": 1e-9, "µ": 1e-6, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30}
)

func parseSI(tok string) (v, tol float64, ok bool) {
	m := siNumber.FindStringSubmatch(tok)
	if m == nil {
		return 0, 0, false
	}
	x, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, 0, false
	}
	f := siFactors[m[3]]
	return x * f, 0.5 * math.Pow(10, -float64(len(m[2]))) * f, true
}

func parseBenchstat(name string, r io.Reader) (*benchstatFile, error) {
	bf := &benchstatFile{Name: name, Config: map[string]string{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	line := 0
	var cols []struct {
		lo, hi int
		name   string
		unit   string
	}
	var pendingHeader []string // the column names' line, waiting for the units' line
	fail := func(format string, a ...any) error {
		return fmt.Errorf("%s:%d: %s", name, line, fmt.Sprintf(format, a...))
	}
	for sc.Scan() {
		line++
		s := strings.TrimRight(sc.Text(), " \r")
		trimmed := strings.TrimSpace(s)
		switch {
		case trimmed == "":
			cols, pendingHeader = nil, nil
		case strings.HasPrefix(s, "#"):
			bf.Comments = append(bf.Comments, comment{Line: line, Text: strings.TrimPrefix(strings.TrimPrefix(s, "#"), " ")})
		case configLine.MatchString(s):
			m := configLine.FindStringSubmatch(s)
			bf.Config[m[1]] = strings.TrimSpace(m[2])
		case strings.HasPrefix(trimmed, "│"):
			if pendingHeader == nil {
				pendingHeader = []string{s}
				cols = nil
				// Column bounds: between consecutive │ (in runes).
				var seps []int
				for i, r := range []rune(s) {
					if r == '│' {
						seps = append(seps, i)
					}
				}
				if len(seps) < 2 {
					return nil, fail("a table header without columns")
				}
				rs := []rune(s)
				for i := 0; i+1 < len(seps); i++ {
					cols = append(cols, struct {
						lo, hi int
						name   string
						unit   string
					}{seps[i], seps[i+1], strings.TrimSpace(string(rs[seps[i]+1 : seps[i+1]])), ""})
				}
				continue
			}
			rs := []rune(s)
			for i := range cols {
				if cols[i].hi > len(rs) {
					return nil, fail("the units' line is shorter than the header")
				}
				f := strings.Fields(string(rs[cols[i].lo+1 : cols[i].hi]))
				if len(f) == 0 {
					return nil, fail("column %q has no unit", cols[i].name)
				}
				cols[i].unit = f[0]
			}
			pendingHeader = nil
		case footnote.MatchString(trimmed):
		case strings.HasPrefix(s, "geomean"):
		default:
			if cols == nil || pendingHeader != nil {
				return nil, fail("unrecognised line %q", clip(s))
			}
			rs := []rune(s)
			toks := runeFields(rs)
			if len(toks) < 3 {
				return nil, fail("a row without values: %q", clip(s))
			}
			row := toks[0].text
			found := 0
			for i := 1; i+1 < len(toks); i++ {
				if toks[i+1].text != "±" {
					continue
				}
				v, tol, ok := parseSI(toks[i].text)
				if !ok {
					return nil, fail("%q before ± is not a number", toks[i].text)
				}
				col := -1
				for c := range cols {
					if toks[i].pos > cols[c].lo && toks[i].pos < cols[c].hi {
						col = c
					}
				}
				if col < 0 {
					return nil, fail("the value %q is under no column", toks[i].text)
				}
				bf.Cells = append(bf.Cells, benchstatCell{Line: line, Row: row, Column: cols[col].name, Unit: cols[col].unit, Value: v, Text: toks[i].text, Tolerance: tol})
				found++
			}
			if found == 0 {
				return nil, fail("a row without a median: %q", clip(s))
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(bf.Cells) == 0 {
		return nil, fmt.Errorf("%s: no benchstat table", name)
	}
	return bf, nil
}

type runeTok struct {
	text string
	pos  int
}

func runeFields(rs []rune) []runeTok {
	var out []runeTok
	start := -1
	for i, r := range rs {
		space := r == ' ' || r == '\t'
		if !space && start < 0 {
			start = i
		}
		if space && start >= 0 {
			out = append(out, runeTok{string(rs[start:i]), start})
			start = -1
		}
	}
	if start >= 0 {
		out = append(out, runeTok{string(rs[start:]), start})
	}
	return out
}

var txtToken = regexp.MustCompile(`[A-Za-z0-9._-]+\.txt`)

// inputs are the raw files the benchstat file's comments name.
func (bf *benchstatFile) inputs(raw map[string]*rawFile) ([]*rawFile, error) {
	var out []*rawFile
	seen := map[string]bool{}
	for _, c := range bf.Comments {
		for _, tok := range txtToken.FindAllString(c.Text, -1) {
			if tok == bf.Name || seen[tok] {
				continue
			}
			f, ok := raw[tok]
			if !ok {
				return nil, fmt.Errorf("%s:%d: names %s, which is not a raw file of the data directory", bf.Name, c.Line, tok)
			}
			seen[tok] = true
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: its comments name no raw file it summarises", bf.Name)
	}
	return out, nil
}

// check compares every median of the benchstat file with the median of the
// same figures in its inputs.
func (bf *benchstatFile) check(inputs []*rawFile) error {
	var c comparison
	for _, cand := range []comparison{pluginComparison, evictorComparison} {
		if cand.index(bf.Cells[0].Column) >= 0 {
			c = cand
		}
	}
	if c.Key == "" {
		return fmt.Errorf("%s:%d: column %q is no plugin or evictor", bf.Name, bf.Cells[0].Line, bf.Cells[0].Column)
	}
	values := map[string][]float64{}
	for _, f := range inputs {
		for _, b := range f.Batches {
			for _, p := range b.Processes {
				for _, r := range p.Results {
					if r.Commented {
						continue
					}
					v, w, _, ok := c.split(r.Name)
					if !ok {
						continue
					}
					row := w
					if r.Procs > 1 {
						row += fmt.Sprintf("-%d", r.Procs)
					}
					for unit, x := range r.Values {
						k := row + "\x00" + v + "\x00" + unit
						values[k] = append(values[k], x)
					}
				}
			}
		}
	}
	for _, cell := range bf.Cells {
		xs := values[cell.Row+"\x00"+cell.Column+"\x00"+cell.Unit]
		if len(xs) == 0 {
			return fmt.Errorf("%s:%d: %s under %s (%s) is in none of the raw files it names", bf.Name, cell.Line, cell.Row, cell.Column, cell.Unit)
		}
		m := median(xs)
		if math.Abs(m-cell.Value) > cell.Tolerance+1e-9*math.Abs(m) {
			return fmt.Errorf("%s:%d: benchstat's median %s of %s under %s (%s) is not the raw files' %g", bf.Name, cell.Line, cell.Text, cell.Row, cell.Column, cell.Unit, m)
		}
	}
	return nil
}

func renderBenchstat(bf *benchstatFile, raw map[string]*rawFile) (string, error) {
	inputs, err := bf.inputs(raw)
	if err != nil {
		return "", err
	}
	if err := bf.check(inputs); err != nil {
		return "", err
	}
	var links []string
	commits, machines := map[string]bool{}, map[string]bool{}
	for _, f := range inputs {
		links = append(links, fmt.Sprintf("[`%s`](perf-data/%s)", f.Name, f.Name))
		for _, b := range f.Batches {
			commits[b.commit()] = true
			machines[b.machine()] = true
		}
	}
	s := fmt.Sprintf("[`%s`](perf-data/%s) is benchstat's summary of %s: its %d medians agree with those files (checked by the report tool).",
		bf.Name, bf.Name, strings.Join(links, ", "), len(bf.Cells))
	if len(commits) > 1 || len(machines) > 1 {
		s += fmt.Sprintf(" It pools batches of %d commits on %d machine(s), so no table of this page uses it.", len(commits), len(machines))
	}
	return s + "\n", nil
}
