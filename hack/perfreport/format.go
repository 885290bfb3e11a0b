package main

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// fmtNum prints a figure with three or four significant digits and
// thousands separators, as the page writes numbers.
func fmtNum(v float64) string {
	a := math.Abs(v)
	switch {
	case math.IsNaN(v):
		return "n/a"
	case a >= 1000:
		return groupThousands(strconv.FormatFloat(v, 'f', 0, 64))
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case a == 0:
		return "0"
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

func groupThousands(s string) string {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

// fmtCount prints a count (victims, calls, evictions).
func fmtCount(v float64) string {
	if v == math.Trunc(v) {
		return groupThousands(strconv.FormatFloat(v, 'f', 0, 64))
	}
	return fmtNum(v)
}

func fmtRatio(r float64) string {
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return "n/a"
	}
	if r >= 10 {
		return strconv.FormatFloat(r, 'f', 1, 64) + "×"
	}
	return strconv.FormatFloat(r, 'f', 2, 64) + "×"
}

// fmtSpread is a ratio's spread over the repetitions: the 95 % interval of
// its median where there are enough repetitions, else the range.
func fmtSpread(ratios []float64) string {
	if len(ratios) == 1 {
		return "n=1"
	}
	if lo, hi, ok := medianInterval(ratios, goalConfidence); ok {
		return fmt.Sprintf("%.0f %% CI %s–%s", 100*goalConfidence, trimX(fmtRatio(lo)), fmtRatio(hi))
	}
	lo, hi := minMax(ratios)
	return fmt.Sprintf("range %s–%s", trimX(fmtRatio(lo)), fmtRatio(hi))
}

func trimX(s string) string { return strings.TrimSuffix(s, "×") }

// fmtDuration prints seconds with a unit that fits.
func fmtDuration(sec float64) string {
	a := math.Abs(sec)
	switch {
	case a >= 1:
		return fmtNum(sec) + " s"
	case a >= 1e-3:
		return fmtNum(sec*1e3) + " ms"
	case a >= 1e-6:
		return fmtNum(sec*1e6) + " µs"
	}
	return fmtNum(sec*1e9) + " ns"
}

// fmtReps lists repetition numbers: "1, 3 and 5".
func fmtReps(reps []int) string {
	var s []string
	for _, r := range reps {
		s = append(s, strconv.Itoa(r))
	}
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

var headerVersion = regexp.MustCompile(`(?:k8s\.io/kubernetes v|Kubernetes )(\d+\.\d+\.\d+)`)

// version is the batch's Kubernetes version: from its logs, else from what
// the file's comments say.
func (b *batch) version() string {
	for v := range b.Versions {
		return v + " (from the log)"
	}
	found := map[string]bool{}
	for _, c := range b.File.Comments {
		for _, m := range headerVersion.FindAllStringSubmatch(c.Text, -1) {
			found["v"+m[1]] = true
		}
	}
	if len(found) == 1 {
		for v := range found {
			return v + " (from the file's comments)"
		}
	}
	return "not recorded"
}

var hexWord = regexp.MustCompile(`\b[0-9a-f]{7,40}\b`)

// headerField is the text of the first comment "key: text".
func (f *rawFile) headerField(key string) string {
	for _, c := range f.Comments {
		if strings.HasPrefix(c.Text, key+": ") {
			return strings.TrimPrefix(c.Text, key+": ")
		}
	}
	return ""
}

// commit is the batch's commit: its label's, else the file name's, else
// the first hash of the comment "commit:"; with a note when the comment
// names another commit first (the binary's, built from a later tree).
func (b *batch) commit() string {
	c := b.Commit
	if c == "" {
		c = b.File.Info.Commit
	}
	hdr := hexWord.FindString(b.File.headerField("commit"))
	switch {
	case c == "" && hdr == "":
		return "not recorded"
	case c == "":
		return hdr + " (from the file's comments)"
	case b.Commit == "" && hdr != "" && hdr != c:
		return c + " (test binary built from " + hdr + ", as the file's comments say)"
	}
	return c
}

// machine is the batch's cpu line and GOMAXPROCS (the results' -P suffix).
func (b *batch) machine() string {
	cpu := ""
	procs := map[int]bool{}
	for _, p := range b.Processes {
		if c, ok := p.Config["cpu"]; ok {
			cpu = c
		}
		for _, r := range p.Results {
			procs[r.Procs] = true
		}
	}
	if cpu == "" {
		return "not recorded"
	}
	s := "`" + cpu + "`"
	if len(procs) == 1 {
		for n := range procs {
			s += fmt.Sprintf(", GOMAXPROCS %d", n)
		}
	}
	return s
}

// orderText says in which order the variants ran, over the repetitions.
func (s *series) orderText() string {
	byFirst := map[string][]int{}
	var unknown []int
	recorded := true
	for _, r := range s.Reps {
		if !r.Recorded {
			recorded = false
		}
		if len(r.Order) == 0 {
			unknown = append(unknown, r.Index)
			continue
		}
		byFirst[r.Order[0]] = append(byFirst[r.Order[0]], r.Index)
	}
	how := "recorded in the raw output"
	if !recorded {
		how = "read from the order of the result lines"
	}
	var parts []string
	for _, v := range []string{s.Cmp.Base, s.Cmp.Other} {
		reps := byFirst[v]
		name := v
		if s.Cmp.Key != pluginComparison.Key && s.Cmp.Key != evictorComparison.Key {
			name = s.Cmp.Key + "=" + v
		}
		switch {
		case len(reps) == 0:
		case len(reps) == len(s.Reps) && len(reps) > 1:
			parts = append(parts, fmt.Sprintf("%s first in all %d", name, len(reps)))
		case len(reps) == len(s.Reps):
			parts = append(parts, name+" first")
		default:
			parts = append(parts, fmt.Sprintf("%s first in %s", name, fmtReps(reps)))
		}
	}
	if len(unknown) > 0 {
		parts = append(parts, "not known in "+fmtReps(unknown)+" (one variant only)")
	}
	text := strings.Join(parts, "; ")
	if len(byFirst) == 1 && len(s.Reps) > 1 {
		text += ", not alternated"
	}
	return text + " (" + how + ")"
}

// legend is the line that names a batch's raw data, Kubernetes version,
// commit, machine, repetitions and order.
func legend(letter string, s *series, repsWord string) string {
	b := s.Batch
	link := fmt.Sprintf("[`%s`](perf-data/%s)", b.File.Name, b.File.Name)
	if b.Label != "" {
		link += " (" + b.Label + ")"
	}
	n := len(s.Reps)
	word := repsWord
	if n != 1 {
		word += "s"
	}
	return fmt.Sprintf("- **%s**: %s: Kubernetes %s; commit %s; machine %s; %d %s; order: %s.",
		letter, link, b.version(), b.commit(), b.machine(), n, word, s.orderText())
}

func letters(i int) string { return string(rune('A' + i)) }
