package promqlcheck

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Exposition is what one /metrics answer serves: each sample name (a
// histogram's name_bucket, name_sum and name_count apart) with the label
// names its samples carry. A metric vector with no series yet serves no
// sample, and is not in it.
type Exposition map[string]map[string]bool

// ParseExposition reads a Prometheus text exposition (format 0.0.4).
// Comment lines (# HELP, # TYPE) are skipped: only samples count.
func ParseExposition(text string) (Exposition, error) {
	out := Exposition{}
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, labels, err := parseSample(line)
		if err != nil {
			return nil, fmt.Errorf("line %d %q: %w", n+1, line, err)
		}
		if out[name] == nil {
			out[name] = map[string]bool{}
		}
		for _, l := range labels {
			out[name][l] = true
		}
	}
	return out, nil
}

// parseSample returns a sample line's name and label names.
func parseSample(line string) (string, []string, error) {
	i := 0
	for i < len(line) && isIdentChar(line[i]) {
		i++
	}
	name := line[:i]
	if !isMetricName(name) {
		return "", nil, fmt.Errorf("no metric name")
	}
	var labels []string
	if i < len(line) && line[i] == '{' {
		i++
		for {
			for i < len(line) && (line[i] == ' ' || line[i] == ',') {
				i++
			}
			if i < len(line) && line[i] == '}' {
				i++
				break
			}
			j := i
			for j < len(line) && isIdentChar(line[j]) {
				j++
			}
			label := line[i:j]
			if !isLabelName(label) || j+1 >= len(line) || line[j] != '=' || line[j+1] != '"' {
				return "", nil, fmt.Errorf("bad label at %d", i)
			}
			// The value: quoted, with \\, \" and \n escaped.
			k := j + 2
			for k < len(line) && line[k] != '"' {
				if line[k] == '\\' {
					k++
				}
				k++
			}
			if k >= len(line) {
				return "", nil, fmt.Errorf("unterminated value of %s", label)
			}
			labels = append(labels, label)
			i = k + 1
		}
	}
	if rest := strings.Fields(line[i:]); len(rest) < 1 || len(rest) > 2 {
		return "", nil, fmt.Errorf("want a value and an optional timestamp after the labels")
	}
	return name, labels, nil
}

// Check says which of the scrapes (binary -> its exposition) serve sel's
// metric with every label sel needs, sorted. It fails when none does,
// saying which serve the metric without the labels, or that none serves
// it at all.
func Check(sel Selector, scrapes map[string]Exposition) ([]string, error) {
	binaries := make([]string, 0, len(scrapes))
	for b := range scrapes {
		binaries = append(binaries, b)
	}
	sort.Strings(binaries)
	var ok, partial []string
	for _, b := range binaries {
		labels, found := scrapes[b][sel.Metric]
		if !found {
			continue
		}
		var missing []string
		for _, l := range sel.Labels {
			if !labels[l] {
				missing = append(missing, l)
			}
		}
		if len(missing) == 0 {
			ok = append(ok, b)
			continue
		}
		have := make([]string, 0, len(labels))
		for l := range labels {
			have = append(have, l)
		}
		slices.Sort(have)
		partial = append(partial, fmt.Sprintf("the %s's has no label %s (it has %s)", b, strings.Join(missing, ", "), strings.Join(have, ", ")))
	}
	switch {
	case len(ok) > 0:
		return ok, nil
	case len(partial) > 0:
		return nil, fmt.Errorf("%s: %s", sel.Metric, strings.Join(partial, "; "))
	default:
		return nil, fmt.Errorf("%s: no metric of that name on the /metrics of the %s", sel.Metric, strings.Join(binaries, " or the "))
	}
}
