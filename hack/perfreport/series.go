package main

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// A comparison sets two variants of a key side by side: plugin=Default
// Preemption against plugin=BudgetAwarePreemption, evictor=DefaultEvictor
// against evictor=BudgetAwareEvictor, cache=none against cache=budget. Base
// is "D" in the tables, Other "B".
type comparison struct {
	Key         string
	Base, Other string
}

var (
	pluginComparison  = comparison{Key: "plugin", Base: "DefaultPreemption", Other: "BudgetAwarePreemption"}
	evictorComparison = comparison{Key: "evictor", Base: "DefaultEvictor", Other: "BudgetAwareEvictor"}
)

// repMode says what one repetition is.
type repMode int

const (
	// byProcess: a repetition is a process (hack/perf.sh runs one a
	// repetition, both plugins in it).
	byProcess repMode = iota
	// byPair: a repetition is a pair of loops, one with each evictor; a
	// process may hold several (PERF_DESCHED_SHARED=1).
	byPair
	// byOccurrence: the k-th result of a benchmark under one variant is
	// paired with the k-th under the other (go test -count runs a
	// benchmark's repetitions back to back in one process).
	byOccurrence
)

// sample is one workload under one variant in one repetition.
type sample struct {
	Result     *result
	Failure    *failure
	Incomplete *startLine // started, never finished (the run was stopped)
	Line       int        // of whichever of the three it is
}

type repetition struct {
	Index    int                    // 1-based, within the batch
	Order    []string               // the variants in the order they ran
	Recorded bool                   // the order is from an order line
	Samples  map[string]*[2]*sample // workload -> [base, other]
}

type series struct {
	Batch     *batch
	Cmp       comparison
	Reps      []*repetition
	Workloads []string // in order of first appearance
}

var pairElem = regexp.MustCompile(`^pair=\d+$`)

// split takes the comparison's key out of a benchmark name: the variant
// and the rest (the workload). A pair=<i> element is dropped too. ok is
// false for a name without the key (a parent benchmark).
func (c comparison) split(name string) (variant, workload string, pair string, ok bool) {
	var rest []string
	for _, e := range strings.Split(name, "/") {
		switch {
		case strings.HasPrefix(e, c.Key+"="):
			variant, ok = strings.TrimPrefix(e, c.Key+"="), true
		case pairElem.MatchString(e):
			pair = e
		default:
			rest = append(rest, e)
		}
	}
	return variant, strings.Join(rest, "/"), pair, ok
}

func (c comparison) index(variant string) int {
	switch variant {
	case c.Base:
		return 0
	case c.Other:
		return 1
	}
	return -1
}

type event struct {
	line  int
	name  string
	s     *sample
	order *orderLine
}

func buildSeries(b *batch, c comparison, mode repMode) (*series, error) {
	s := &series{Batch: b, Cmp: c}
	seenWorkload := map[string]bool{}
	newRep := func() *repetition {
		r := &repetition{Index: len(s.Reps) + 1, Samples: map[string]*[2]*sample{}}
		s.Reps = append(s.Reps, r)
		return r
	}
	occurrence := map[string]int{} // workload/variant -> results so far (byOccurrence)
	for _, proc := range b.Processes {
		events, err := processEvents(b.File.Name, proc, c)
		if err != nil {
			return nil, err
		}
		var rep *repetition
		if mode == byProcess {
			rep = newRep()
		}
		// opened: rep was opened by an order line and holds nothing yet.
		opened := false
		lastPair := ""
		for _, ev := range events {
			if ev.order != nil {
				for _, n := range ev.order.Names {
					if c.index(n) < 0 {
						return nil, fmt.Errorf("%s:%d: the order names %q, which is not %s or %s", b.File.Name, ev.line, n, c.Base, c.Other)
					}
				}
				switch mode {
				case byOccurrence:
					return nil, fmt.Errorf("%s:%d: an order line in a benchmark compared by occurrence", b.File.Name, ev.line)
				case byPair:
					rep, opened = newRep(), true
				case byProcess:
					if rep.Recorded {
						return nil, fmt.Errorf("%s:%d: a second order line in one process", b.File.Name, ev.line)
					}
				}
				rep.Order, rep.Recorded = ev.order.Names, true
				continue
			}
			v, w, pair, _ := c.split(ev.name)
			idx := c.index(v)
			if idx < 0 {
				return nil, fmt.Errorf("%s:%d: %s=%s is neither %s nor %s", b.File.Name, ev.line, c.Key, v, c.Base, c.Other)
			}
			if !seenWorkload[w] {
				seenWorkload[w] = true
				s.Workloads = append(s.Workloads, w)
			}
			switch mode {
			case byPair:
				// A new pair: the first sample of the process, another
				// pair=<i>, or a variant that the current pair has.
				full := rep != nil && rep.Samples[w] != nil && rep.Samples[w][idx] != nil
				if !opened && (rep == nil || (pair != lastPair && lastPair != "") || full) {
					rep = newRep()
				}
				opened = false
				lastPair = pair
			case byOccurrence:
				k := occurrence[w+"\x00"+v]
				occurrence[w+"\x00"+v] = k + 1
				for len(s.Reps) <= k {
					newRep()
				}
				rep = s.Reps[k]
			}
			cell := rep.Samples[w]
			if cell == nil {
				cell = &[2]*sample{}
				rep.Samples[w] = cell
			}
			if cell[idx] != nil {
				return nil, fmt.Errorf("%s:%d: %s under %s twice in one repetition (line %d too)", b.File.Name, ev.line, w, v, cell[idx].Line)
			}
			cell[idx] = ev.s
			if !rep.Recorded && mode != byOccurrence && !containsStr(rep.Order, v) {
				rep.Order = append(rep.Order, v)
			}
		}
	}
	for _, rep := range s.Reps {
		if err := checkOrder(b.File.Name, rep, c); err != nil {
			return nil, err
		}
		if mode == byOccurrence {
			rep.Order = occurrenceOrder(rep, c)
		}
	}
	return s, nil
}

// processEvents lists a process's order lines and the samples of the
// comparison (results, leaf failures, benchmarks started and never
// finished), in the order of their lines.
func processEvents(file string, proc *process, c comparison) ([]event, error) {
	var events []event
	for i := range proc.Orders {
		o := &proc.Orders[i]
		events = append(events, event{line: o.Line, order: o})
	}
	names := map[string]bool{}
	for _, r := range proc.Results {
		names[r.Name] = true
	}
	for _, f := range proc.Failures {
		names[f.Name] = true
	}
	isParent := func(name string) bool {
		for n := range names {
			if strings.HasPrefix(n, name+"/") {
				return true
			}
		}
		return false
	}
	for _, r := range proc.Results {
		if _, _, _, ok := c.split(r.Name); !ok {
			return nil, fmt.Errorf("%s:%d: %s has no %s= element", file, r.Line, r.Name, c.Key)
		}
		events = append(events, event{line: r.Line, name: r.Name, s: &sample{Result: r, Line: r.Line}})
	}
	for _, f := range proc.Failures {
		if _, _, _, ok := c.split(f.Name); !ok || isParent(f.Name) {
			continue
		}
		events = append(events, event{line: f.Line, name: f.Name, s: &sample{Failure: f, Line: f.Line}})
	}
	for i := range proc.Started {
		st := &proc.Started[i]
		if _, _, _, ok := c.split(st.Name); !ok || isParent(st.Name) {
			continue
		}
		// Finished later in the process (go test -v names a benchmark
		// before its result)?
		finished := false
		for _, r := range proc.Results {
			if r.Name == st.Name && r.Line > st.Line {
				finished = true
			}
		}
		for _, f := range proc.Failures {
			if f.Name == st.Name && f.Line > st.Line {
				finished = true
			}
		}
		if !finished {
			events = append(events, event{line: st.Line, name: st.Name, s: &sample{Incomplete: st, Line: st.Line}})
		}
	}
	sort.SliceStable(events, func(i, j int) bool { return events[i].line < events[j].line })
	return events, nil
}

// checkOrder fails when a repetition's recorded order disagrees with the
// order of its lines.
func checkOrder(file string, rep *repetition, c comparison) error {
	if !rep.Recorded {
		return nil
	}
	first := map[string]int{}
	for _, cell := range rep.Samples {
		for i, sm := range cell {
			if sm == nil {
				continue
			}
			v := c.Base
			if i == 1 {
				v = c.Other
			}
			if l, ok := first[v]; !ok || sm.Line < l {
				first[v] = sm.Line
			}
		}
	}
	a, b := rep.Order[0], rep.Order[len(rep.Order)-1]
	la, oka := first[a]
	lb, okb := first[b]
	if oka && okb && la > lb {
		return fmt.Errorf("%s:%d: repetition %d records the order %s but %s's first line comes first", file, lb, rep.Index, strings.Join(rep.Order, ", "), b)
	}
	return nil
}

// occurrenceOrder is, for a repetition of paired occurrences, the variant
// whose sample comes first in most workloads.
func occurrenceOrder(rep *repetition, c comparison) []string {
	baseFirst, otherFirst := 0, 0
	for _, cell := range rep.Samples {
		if cell[0] == nil || cell[1] == nil {
			continue
		}
		if cell[0].Line < cell[1].Line {
			baseFirst++
		} else {
			otherFirst++
		}
	}
	switch {
	case baseFirst > 0 && otherFirst == 0:
		return []string{c.Base, c.Other}
	case otherFirst > 0 && baseFirst == 0:
		return []string{c.Other, c.Base}
	}
	return nil
}

func containsStr(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}
