package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// The page's generated sections lie between
//
//	<!-- BEGIN GENERATED: <kind> <argument>... -->
//	<!-- END GENERATED -->
//
// and are rewritten whole. Kinds:
//
//	rules                      the rules, from rules.go
//	sched <file>...            scheduler_perf: throughput, PostFilter, heap,
//	                           victims, over budget, stalls, failures, goal
//	calls <file>...            scheduler_perf: PostFilter calls by status
//	desched <file>...          the descheduling loop, a row per file
//	micro <key> <file>...      unit benchmarks, the two values of <key>
//	                           (plugin, or cache: none against budget)
//	benchstat <file>           a benchstat file, checked against the raw
//	                           files it names
//
// Every raw file of the data directory must appear in some section, and a
// table may stand outside the generated sections only under the heading
// "History (no raw data kept)".
const (
	beginPrefix    = "<!-- BEGIN GENERATED: "
	markerSuffix   = " -->"
	endMarker      = "<!-- END GENERATED -->"
	historyHeading = "## History (no raw data kept)"
)

type data struct {
	raw       map[string]*rawFile
	benchstat map[string]*benchstatFile
}

// loadData parses every file of dir; any file it cannot parse is an error.
func loadData(dir string) (*data, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	d := &data{raw: map[string]*rawFile{}, benchstat: map[string]*benchstatFile{}}
	for _, e := range entries {
		if e.IsDir() {
			return nil, fmt.Errorf("%s: a directory in the data directory", e.Name())
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		info, err := parseName(e.Name())
		if err != nil {
			f.Close()
			return nil, err
		}
		if info.Benchstat {
			bf, err := parseBenchstat(e.Name(), f)
			f.Close()
			if err != nil {
				return nil, err
			}
			d.benchstat[e.Name()] = bf
			continue
		}
		rf, err := parseRaw(e.Name(), f)
		f.Close()
		if err != nil {
			return nil, err
		}
		d.raw[e.Name()] = rf
	}
	return d, nil
}

// generate returns the page with every generated section rewritten from d.
func generate(page string, d *data) (string, error) {
	lines := strings.Split(page, "\n")
	var out []string
	used := map[string]bool{}
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.HasPrefix(l, endMarker) {
			return "", fmt.Errorf("page line %d: an end marker without a begin marker", i+1)
		}
		if !strings.HasPrefix(l, beginPrefix) {
			out = append(out, l)
			continue
		}
		if !strings.HasSuffix(l, markerSuffix) {
			return "", fmt.Errorf("page line %d: a begin marker that does not end with %q", i+1, markerSuffix)
		}
		spec := strings.Fields(strings.TrimSuffix(strings.TrimPrefix(l, beginPrefix), markerSuffix))
		end := -1
		for j := i + 1; j < len(lines); j++ {
			if strings.HasPrefix(lines[j], beginPrefix) {
				return "", fmt.Errorf("page line %d: a begin marker inside the section of line %d", j+1, i+1)
			}
			if lines[j] == endMarker {
				end = j
				break
			}
		}
		if end < 0 {
			return "", fmt.Errorf("page line %d: no %s after it", i+1, endMarker)
		}
		body, files, err := section(spec, d)
		if err != nil {
			return "", fmt.Errorf("page line %d (%s): %w", i+1, strings.Join(spec, " "), err)
		}
		for _, f := range files {
			used[f] = true
		}
		out = append(out, l, "", strings.TrimRight(body, "\n"), "", endMarker)
		i = end
	}
	var unused []string
	for name := range d.raw {
		if !used[name] {
			unused = append(unused, name)
		}
	}
	for name := range d.benchstat {
		if !used[name] {
			unused = append(unused, name)
		}
	}
	if len(unused) > 0 {
		sort.Strings(unused)
		return "", fmt.Errorf("raw files no generated section of the page uses: %s", strings.Join(unused, ", "))
	}
	result := strings.Join(out, "\n")
	if err := checkStrayTables(result); err != nil {
		return "", err
	}
	return result, nil
}

func section(spec []string, d *data) (string, []string, error) {
	if len(spec) == 0 {
		return "", nil, fmt.Errorf("a begin marker without a kind")
	}
	kind, args := spec[0], spec[1:]
	rawArgs := func(args []string) ([]*rawFile, error) {
		if len(args) == 0 {
			return nil, fmt.Errorf("no raw file named")
		}
		var out []*rawFile
		for _, a := range args {
			f, ok := d.raw[a]
			if !ok {
				return nil, fmt.Errorf("%s is not a raw file of the data directory", a)
			}
			out = append(out, f)
		}
		return out, nil
	}
	switch kind {
	case "rules":
		if len(args) > 0 {
			return "", nil, fmt.Errorf("rules takes no argument")
		}
		return rulesText(), nil, nil
	case "sched", "calls", "desched":
		files, err := rawArgs(args)
		if err != nil {
			return "", nil, err
		}
		var s string
		switch kind {
		case "sched":
			s, err = renderSched(files)
		case "calls":
			s, err = renderCalls(files)
		default:
			s, err = renderDesched(files)
		}
		return s, args, err
	case "micro":
		if len(args) < 2 {
			return "", nil, fmt.Errorf("micro wants a key (plugin or cache) and raw files")
		}
		files, err := rawArgs(args[1:])
		if err != nil {
			return "", nil, err
		}
		var c comparison
		var short [2]string
		switch args[0] {
		case "plugin":
			c, short = pluginComparison, [2]string{"D", "B"}
		case "cache":
			c, short = comparison{Key: "cache", Base: "none", Other: "budget"}, [2]string{"none", "budget"}
		default:
			return "", nil, fmt.Errorf("micro: key %q is neither plugin nor cache", args[0])
		}
		s, err := renderMicro(files, c, short)
		return s, args[1:], err
	case "benchstat":
		if len(args) != 1 {
			return "", nil, fmt.Errorf("benchstat wants one benchstat file")
		}
		bf, ok := d.benchstat[args[0]]
		if !ok {
			return "", nil, fmt.Errorf("%s is not a benchstat file of the data directory", args[0])
		}
		s, err := renderBenchstat(bf, d.raw)
		return s, args, err
	}
	return "", nil, fmt.Errorf("unknown kind %q", kind)
}

// checkStrayTables fails on a table outside the generated sections, but for
// those under the history heading: a table there cannot be regenerated.
func checkStrayTables(page string) error {
	inGenerated, inHistory, inFence := false, false, false
	for i, l := range strings.Split(page, "\n") {
		switch {
		case strings.HasPrefix(l, "```"):
			inFence = !inFence
		case inFence:
		case strings.HasPrefix(l, beginPrefix):
			inGenerated = true
		case l == endMarker:
			inGenerated = false
		case strings.HasPrefix(l, "## "):
			inHistory = strings.HasPrefix(l, historyHeading)
		case strings.HasPrefix(l, "|") && !inGenerated && !inHistory:
			return fmt.Errorf("page line %d: a table outside the generated sections (and outside %q): figures must come from the raw files", i+1, historyHeading)
		}
	}
	return nil
}
