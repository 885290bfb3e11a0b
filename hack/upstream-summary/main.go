// Command upstream-summary reads `go test -json` output of upstream's
// preemption integration suites run against BudgetAwarePreemption
// (hack/upstream-preemption.sh) and prints one line per upstream test:
// passed, failed, skipped by upstream, or differs by design. A test differs
// by design only when docs/upstream-preemption.md lists it, for this
// variant, in its table of differences. It exits non-zero when a test
// failed that the table does not list, when a listed test passed (the list
// must be kept true), or when a package failed outside any test (a build
// failure, a timeout).
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
)

// event is one line of test2json's output.
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// result is one test's outcome.
type result struct {
	pkg, test, action string
}

func main() {
	variant := flag.String("variant", "", "the variant that ran: StrictEvict or BestEffortDelete")
	doc := flag.String("doc", "docs/upstream-preemption.md", "the document whose table lists the differences by design")
	skip := flag.Bool("skip-pattern", false, "print a go test -skip pattern that leaves out the tests the document lists for the variant, and exit")
	flag.Parse()
	if *variant == "" {
		fmt.Fprintln(os.Stderr, "upstream-summary: -variant is required")
		os.Exit(2)
	}
	differ, err := differences(*doc, *variant)
	if err != nil {
		fmt.Fprintf(os.Stderr, "upstream-summary: %v\n", err)
		os.Exit(2)
	}
	if *skip {
		fmt.Println(skipPattern(differ))
		return
	}
	results, pkgFailed, err := read(os.Stdin)
	if err != nil {
		fmt.Fprintf(os.Stderr, "upstream-summary: %v\n", err)
		os.Exit(2)
	}
	os.Exit(report(os.Stdout, *variant, results, pkgFailed, differ))
}

// differences returns the tests the document's table lists for variant.
// The table is the one whose header row starts "| variant | test |".
func differences(path, variant string) (map[string]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]bool{}
	in := false
	s := bufio.NewScanner(f)
	for line := 1; s.Scan(); line++ {
		text := strings.TrimSpace(s.Text())
		if !strings.HasPrefix(text, "|") {
			in = false
			continue
		}
		cells := strings.Split(strings.Trim(text, "|"), "|")
		for i := range cells {
			cells[i] = strings.Trim(strings.TrimSpace(cells[i]), "`")
		}
		if len(cells) >= 2 && strings.EqualFold(cells[0], "variant") && strings.EqualFold(cells[1], "test") {
			in = true
			continue
		}
		if !in || strings.HasPrefix(cells[0], "-") {
			continue
		}
		if len(cells) < 5 {
			return nil, fmt.Errorf("%s:%d: a difference needs variant, test, upstream's expectation, ours and why; got %d cells", path, line, len(cells))
		}
		if cells[0] != "StrictEvict" && cells[0] != "BestEffortDelete" {
			return nil, fmt.Errorf("%s:%d: variant %q is neither StrictEvict nor BestEffortDelete", path, line, cells[0])
		}
		if cells[0] == variant {
			out[cells[1]] = true
		}
	}
	return out, s.Err()
}

// read collects each test's last action, and the packages that failed
// with no failing test.
func read(r io.Reader) ([]result, []string, error) {
	last := map[[2]string]string{}
	var order [][2]string
	pkgFail := map[string]bool{}
	testFail := map[string]bool{}
	dec := json.NewDecoder(r)
	for {
		var e event
		if err := dec.Decode(&e); err == io.EOF {
			break
		} else if err != nil {
			return nil, nil, fmt.Errorf("decode go test -json output: %w", err)
		}
		switch e.Action {
		case "pass", "fail", "skip":
		default:
			continue
		}
		if e.Test == "" {
			if e.Action == "fail" {
				pkgFail[e.Package] = true
			}
			continue
		}
		k := [2]string{e.Package, e.Test}
		if _, ok := last[k]; !ok {
			order = append(order, k)
		}
		last[k] = e.Action
		if e.Action == "fail" {
			testFail[e.Package] = true
		}
	}
	var out []result
	for _, k := range order {
		// Only the leaves: a test with subtests is reported through them.
		parent := false
		for _, o := range order {
			if o[0] == k[0] && strings.HasPrefix(o[1], k[1]+"/") {
				parent = true
				break
			}
		}
		if !parent {
			out = append(out, result{pkg: k[0], test: k[1], action: last[k]})
		}
	}
	var failed []string
	for p := range pkgFail {
		if !testFail[p] {
			failed = append(failed, p)
		}
	}
	sort.Strings(failed)
	return out, failed, nil
}

// skipPattern is a go test -skip pattern matching exactly the listed
// tests: per level, alternatives anchored and quoted. Listed tests under
// different top-level tests are grouped by top-level test; go test splits
// a pattern into levels at slashes outside parentheses, so the groups are
// joined at the top level only when there is one (else the pattern skips
// the union of their subtests in each, a superset that is printed with the
// pattern so that nobody mistakes it).
func skipPattern(differ map[string]bool) string {
	byTop := map[string][]string{}
	for name := range differ {
		top, sub, _ := strings.Cut(name, "/")
		byTop[top] = append(byTop[top], sub)
	}
	var tops, subs []string
	wholeTest := false
	for top, ss := range byTop {
		tops = append(tops, regexp.QuoteMeta(top))
		for _, sub := range ss {
			if sub == "" {
				wholeTest = true
				continue
			}
			subs = append(subs, regexp.QuoteMeta(sub))
		}
	}
	if len(tops) == 0 {
		return ""
	}
	sort.Strings(tops)
	sort.Strings(subs)
	pattern := "^(" + strings.Join(tops, "|") + ")$"
	if len(subs) > 0 && !wholeTest {
		pattern += "/^(" + strings.Join(subs, "|") + ")$"
	}
	return pattern
}

// report prints the lines and returns the exit code.
func report(w io.Writer, variant string, results []result, pkgFailed []string, differ map[string]bool) int {
	code := 0
	counts := map[string]int{}
	for _, r := range results {
		pkg := r.pkg[strings.LastIndex(r.pkg, "/")+1:]
		listed := differ[r.test]
		var verdict string
		switch {
		case r.action == "pass" && listed:
			verdict = "PASSED-BUT-LISTED"
			code = 1
		case r.action == "pass":
			verdict = "passed"
		case r.action == "skip":
			verdict = "skipped-by-upstream"
		case listed:
			verdict = "differs-by-design"
		default:
			verdict = "FAILED"
			code = 1
		}
		counts[verdict]++
		fmt.Fprintf(w, "%-16s %-20s %-18s %s\n", variant, verdict, pkg, r.test)
	}
	// Listed tests that did not run (left out with -skip, or filtered by
	// -run) are said so, not counted as passed or failed.
	ran := map[string]bool{}
	for _, r := range results {
		ran[r.test] = true
	}
	var absent []string
	for name := range differ {
		if !ran[name] {
			absent = append(absent, name)
		}
	}
	sort.Strings(absent)
	for _, name := range absent {
		counts["listed-not-run"]++
		fmt.Fprintf(w, "%-16s %-20s %-18s %s\n", variant, "listed-not-run", "-", name)
	}
	for _, p := range pkgFailed {
		fmt.Fprintf(w, "%-16s %-20s %s (outside any test: build failure or timeout)\n", variant, "FAILED", p)
		code = 1
	}
	var keys []string
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d %s", counts[k], k))
	}
	fmt.Fprintf(w, "%s: %s\n", variant, strings.Join(parts, ", "))
	return code
}
