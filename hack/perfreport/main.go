// Command perfreport regenerates the tables of docs/performance.md from the
// raw benchmark output in docs/perf-data/, so that the page cannot say what
// the raw files do not.
//
// It parses every file of the data directory (a line it cannot read is an
// error naming the file and the line), rewrites each generated section of
// the page (page.go lists the kinds) and applies the rules of rules.go:
// per-repetition ratios, stalls, victims over budget, the 1-second poll
// floor, and whether the goal is met. With -write it writes the page; by
// default (and with -check) it fails, printing the difference, when the page
// differs from what it generates (hack/verify-perf-report.sh, make verify).
//
//	go run ./hack/perfreport -write      # make perf-report
//	go run ./hack/perfreport -check      # hack/verify-perf-report.sh
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

func main() {
	dir := flag.String("data", "docs/perf-data", "the directory of raw files")
	page := flag.String("page", "docs/performance.md", "the page whose generated sections to regenerate")
	write := flag.Bool("write", false, "write the regenerated page")
	check := flag.Bool("check", false, "fail if the page differs from what the raw files give (the default without -write)")
	flag.Parse()
	if *write && *check {
		fmt.Fprintln(os.Stderr, "perfreport: -write and -check exclude each other")
		os.Exit(2)
	}
	if err := run(*dir, *page, *write); err != nil {
		fmt.Fprintf(os.Stderr, "perfreport: %v\n", err)
		os.Exit(1)
	}
}

func run(dir, pagePath string, write bool) error {
	d, err := loadData(dir)
	if err != nil {
		return err
	}
	old, err := os.ReadFile(pagePath)
	if err != nil {
		return err
	}
	updated, err := generate(string(old), d)
	if err != nil {
		return fmt.Errorf("%s: %w", pagePath, err)
	}
	if write {
		if updated == string(old) {
			return nil
		}
		return os.WriteFile(pagePath, []byte(updated), 0o644)
	}
	if updated != string(old) {
		fmt.Fprint(os.Stderr, lineDiff(pagePath, string(old), updated))
		return fmt.Errorf("%s differs from what %s gives: run make perf-report and commit the result", pagePath, dir)
	}
	return nil
}

// lineDiff prints the lines that differ, each with its line number in its
// own version (- committed, + generated): a
// longest-common-subsequence diff, enough for a page of a few thousand
// lines.
func lineDiff(name, a, b string) string {
	x, y := strings.Split(a, "\n"), strings.Split(b, "\n")
	n, m := len(x), len(y)
	lcs := make([][]int32, n+1)
	for i := range lcs {
		lcs[i] = make([]int32, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s (as committed)\n+++ %s (as generated)\n", name, name)
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && x[i] == y[j]:
			i++
			j++
		case j < m && (i == n || lcs[i][j+1] >= lcs[i+1][j]):
			fmt.Fprintf(&out, "+%d: %s\n", j+1, y[j])
			j++
		default:
			fmt.Fprintf(&out, "-%d: %s\n", i+1, x[i])
			i++
		}
	}
	return out.String()
}
