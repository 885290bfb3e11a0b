package report

import (
	"fmt"
	"slices"
	"text/tabwriter"
)

// tally counts something per run by key, for a section with one column of
// numbers per run.
type tally[K comparable] struct {
	keys   []K
	counts []map[K]int
}

func newTally[K comparable](runs int) *tally[K] {
	t := &tally[K]{counts: make([]map[K]int, runs)}
	for i := range t.counts {
		t.counts[i] = map[K]int{}
	}
	return t
}

// add counts n more of k in run i; a key added with 0 still gets a row.
func (t *tally[K]) add(i int, k K, n int) {
	if !slices.Contains(t.keys, k) {
		t.keys = append(t.keys, k)
	}
	t.counts[i][k] += n
}

// write writes one row per key, in the order of compare: the key's cells,
// then its count in each run.
func (t *tally[K]) write(tw *tabwriter.Writer, compare func(a, b K) int, cells func(K) []string) {
	slices.SortFunc(t.keys, compare)
	for _, k := range t.keys {
		row := cells(k)
		for i := range t.counts {
			row = append(row, fmt.Sprint(t.counts[i][k]))
		}
		fmt.Fprintln(tw, joinCells(row))
	}
}
