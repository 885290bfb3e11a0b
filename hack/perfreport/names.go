package main

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// nameInfo is what a raw file's name says:
// <date>-<what>[-<commit>][.benchstat].txt, where what may carry
// <n>nodes, <n>reps (or 1rep), rep<i> (one repetition, the i-th of a
// series) and other words.
type nameInfo struct {
	Date      string
	What      string
	Commit    string // "" when the name has none
	Nodes     int    // 0 when the name says none
	Reps      int    // processes the file must hold; 0 when the name says none
	Benchstat bool
}

var (
	fileName  = regexp.MustCompile(`^(\d{4}-\d{2}-\d{2})-([a-z0-9][a-z0-9-]*?)(?:-([0-9a-f]{7,40}))?(\.benchstat)?\.txt$`)
	nodesWord = regexp.MustCompile(`^(\d+)nodes$`)
	repsWord  = regexp.MustCompile(`^(\d+)reps?$`)
	repIndex  = regexp.MustCompile(`^rep(\d+)$`)
)

func parseName(name string) (nameInfo, error) {
	m := fileName.FindStringSubmatch(name)
	if m == nil {
		return nameInfo{}, fmt.Errorf("%s: the name is not <yyyy-mm-dd>-<what>[-<commit>][.benchstat].txt", name)
	}
	info := nameInfo{Date: m[1], What: m[2], Commit: m[3], Benchstat: m[4] != ""}
	for _, w := range strings.Split(info.What, "-") {
		if n := nodesWord.FindStringSubmatch(w); n != nil {
			info.Nodes, _ = strconv.Atoi(n[1])
		}
		if n := repsWord.FindStringSubmatch(w); n != nil {
			info.Reps, _ = strconv.Atoi(n[1])
			if info.Reps == 0 {
				return nameInfo{}, fmt.Errorf("%s: 0 repetitions in the name", name)
			}
		}
		if repIndex.MatchString(w) {
			info.Reps = 1
		}
	}
	return info, nil
}

// checkNameAgainstContent fails when the name's repetitions or size disagree
// with what the file holds. A benchstat file is checked elsewhere.
func checkNameAgainstContent(f *rawFile) error {
	if f.Info.Benchstat {
		return nil
	}
	if f.Info.Reps > 0 {
		n := 0
		for _, b := range f.Batches {
			n += len(b.Processes)
		}
		if n != f.Info.Reps {
			return fmt.Errorf("the name says %d repetition(s), the file holds %d process(es)", f.Info.Reps, n)
		}
	}
	if f.Info.Nodes > 0 {
		for _, b := range f.Batches {
			for _, proc := range b.Processes {
				for _, r := range proc.Results {
					if n, ok := workloadNodes(r.Name); ok && n != f.Info.Nodes {
						return fmt.Errorf("line %d: %s is a %d-node workload in a file named for %d nodes", r.Line, r.Name, n, f.Info.Nodes)
					}
				}
			}
		}
	}
	return nil
}

var (
	nodesParam    = regexp.MustCompile(`(?:^|/)nodes=(\d+)(?:/|$)`)
	upstreamNodes = regexp.MustCompile(`(?:^|/)(\d+)Nodes_`)
)

// workloadNodes is the node count a scheduler_perf workload's name carries.
func workloadNodes(name string) (int, bool) {
	for _, re := range []*regexp.Regexp{nodesParam, upstreamNodes} {
		if m := re.FindStringSubmatch(name); m != nil {
			n, _ := strconv.Atoi(m[1])
			return n, true
		}
	}
	return 0, false
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
