package scenarios

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/budgetguard/budgetguard/internal/report"
	"github.com/budgetguard/budgetguard/internal/scenario"
)

// screenshot: also take a screenshot of the timeline page, 1400x1000, to
// this file; docs/images/demo-timeline.png is the demo's:
//
//	go test ./test/scenarios -run '^TestScenarioPreemptionUnderPDB$' -args -timeline.screenshot=$PWD/docs/images/demo-timeline.png
var screenshot = flag.String("timeline.screenshot", "", "take a screenshot (1400x1000 PNG) of the demo's HTML timeline to this file")

// chromiumFlags run Chromium headless without anything that reaches the
// network (it tries to without the background-networking flags) and
// with its console messages on stderr.
var chromiumFlags = []string{
	"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
	"--disable-background-networking", "--disable-component-update", "--disable-sync",
	"--enable-logging=stderr", "--v=0",
}

// installChromium returns Chromium's path, installed by the project's own
// script (hack/install-chromium.sh: Debian's package chromium, when
// /usr/bin/chromium is missing). The test fails where the script cannot
// install it; CI runs as root on Debian.
func installChromium(t *testing.T) string {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(filepath.Join("..", "..", "hack", "install-chromium.sh"))
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/install-chromium.sh: %v\n%s", err, stderr.String())
	}
	path := strings.TrimSpace(string(out))
	if stderr.Len() > 0 {
		t.Logf("hack/install-chromium.sh:\n%s", stderr.String())
	}
	return path
}

// browse runs Chromium headless on the page at path with args (what to
// do: --dump-dom, --screenshot=...) and a fresh profile, and returns its
// stdout. It fails the test on any message of the page's console, which
// Chromium logs on stderr as INFO:CONSOLE whatever its level (the page
// writes none: an uncaught exception or a resource that failed to load is
// one).
func browse(t *testing.T, chromium, path string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	page := (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String()
	all := append(append(append([]string{}, chromiumFlags...), "--user-data-dir="+t.TempDir()), args...)
	cmd := exec.CommandContext(ctx, chromium, append(all, page)...)
	// Chromium's launcher script and the browser's own processes are one
	// group, stopped together on a timeout.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", chromium, strings.Join(args, " "), err, stderr.String())
	}
	for _, line := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(line, ":CONSOLE") || strings.Contains(line, "Uncaught") {
			t.Errorf("the page's console: %s", line)
		}
	}
	return stdout.String()
}

// chart is a budget's chart in the dumped DOM.
type chart struct {
	desired    string
	points     []point
	violations []map[string]string
}

// point is a point of a chart's healthy line.
type point struct {
	t                float64
	healthy, desired int
	met              bool
}

// attrs returns n's attributes.
func attrs(n *html.Node) map[string]string {
	m := map[string]string{}
	for _, a := range n.Attr {
		m[a.Key] = a.Val
	}
	return m
}

// walk calls f on n and every node under it.
func walk(n *html.Node, f func(*html.Node)) {
	f(n)
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		walk(c, f)
	}
}

// readDOM returns the charts of the dumped DOM by mode and budget key, and
// how many disruption and refusal marks each mode's activity chart holds.
func readDOM(t *testing.T, dom string) (charts map[string]map[string]*chart, disruptions, refusals map[string]int) {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(dom))
	if err != nil {
		t.Fatalf("parse the dumped DOM: %v", err)
	}
	charts = map[string]map[string]*chart{}
	disruptions, refusals = map[string]int{}, map[string]int{}
	rendered := false
	num := func(s string) float64 {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Errorf("not a number: %q", s)
		}
		return f
	}
	walk(doc, func(n *html.Node) {
		a := attrs(n)
		if a["id"] == "timeline" && a["data-rendered"] == "true" {
			rendered = true
		}
		mode := a["data-mode"]
		if _, ok := a["data-activity"]; ok && mode != "" {
			walk(n, func(m *html.Node) {
				ma := attrs(m)
				if _, ok := ma["data-disruption"]; ok {
					disruptions[mode]++
				}
				if _, ok := ma["data-refusal"]; ok {
					refusals[mode]++
				}
			})
			return
		}
		if n.Data != "figure" || a["data-budget"] == "" || mode == "" {
			return
		}
		c := &chart{desired: a["data-desired"]}
		walk(n, func(m *html.Node) {
			ma := attrs(m)
			if _, ok := ma["data-violation"]; ok {
				c.violations = append(c.violations, ma)
			}
			if h, ok := ma["data-healthy"]; ok && m.Data == "circle" {
				c.points = append(c.points, point{t: num(ma["data-t"]), healthy: int(num(h)), desired: int(num(ma["data-desired"])), met: ma["data-met"] == "true"})
			}
		})
		if charts[mode] == nil {
			charts[mode] = map[string]*chart{}
		}
		charts[mode][a["data-budget"]] = c
	})
	if !rendered {
		t.Error(`the page's script did not finish: no #timeline[data-rendered="true"]`)
	}
	return charts, disruptions, refusals
}

// belowWithin reports whether the line is below its desired count, once
// the budget was met, at some moment from from to to: at the point in
// force at from, or at a point after it.
func (c *chart) belowWithin(from, to float64) bool {
	for i, p := range c.points {
		next := to + 1
		if i+1 < len(c.points) {
			next = c.points[i+1].t
		}
		if p.met && p.healthy < p.desired && p.t <= to && next > from {
			return true
		}
	}
	return false
}

// chargeWindow is how long after a violation's request the line must be
// below desired: the request is received before its pod stops counting.
const chargeWindow = 5.0

// checkTimeline writes the comparison's HTML page as sandbox run --compare
// --html does, loads it in headless Chromium, and checks the DOM its
// script drew against the audit: every budget has a chart per run with
// its desired count; upstream's line is below desired at each violation
// the audit charged it with, whose marker is there; budgetguard's never
// is, once met. Then, if asked, it takes the screenshot.
func checkTimeline(t *testing.T, file string, up, bg outcome) {
	t.Helper()
	sc, err := scenario.Load(filepath.Join("..", "..", "examples", "scenarios", file))
	if err != nil {
		t.Fatal(err)
	}
	chromium := installChromium(t)
	page := filepath.Join(t.TempDir(), "report.html")
	var b bytes.Buffer
	// The scenario's path as make demo gives it, from the repository's root.
	if err := report.WriteHTML(&b, report.New(sc.Name, filepath.Join("examples", "scenarios", file), up.run, bg.run)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(page, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	charts, disruptions, refusals := readDOM(t, browse(t, chromium, page, "--dump-dom"))

	for _, o := range []outcome{up, bg} {
		mode := string(o.run.Mode)
		origin := report.Origin(o.run)
		if disruptions[mode] != len(o.run.Audit.Disruptions) {
			t.Errorf("%s: %d disruption marks, want the audit's %d", mode, disruptions[mode], len(o.run.Audit.Disruptions))
		}
		if want := len(o.run.Audit.Refusals) + len(o.run.Timeline.Refusals); refusals[mode] != want {
			t.Errorf("%s: %d refusal marks, want %d", mode, refusals[mode], want)
		}
		for _, s := range o.run.Audit.Budgets {
			c := charts[mode][report.BudgetKey(s.Budget)]
			if c == nil {
				t.Errorf("%s: no chart of %v", mode, s.Budget)
				continue
			}
			if c.desired != fmt.Sprint(s.Desired) || len(c.points) == 0 {
				t.Errorf("%s %v: chart with desired %q and %d points, want desired %d and its line", mode, s.Budget, c.desired, len(c.points), s.Desired)
			}
		}
		marks := 0
		for _, c := range charts[mode] {
			marks += len(c.violations)
		}
		if marks != len(o.run.Audit.Violations) {
			t.Errorf("%s: %d violation marks, want the audit's %d", mode, marks, len(o.run.Audit.Violations))
		}
		for _, v := range o.run.Audit.Violations {
			key := report.BudgetKey(v.Budget)
			c := charts[mode][key]
			if c == nil {
				t.Errorf("%s: violation %+v has no chart", mode, v)
				continue
			}
			at := report.Seconds(v.Disruption.Time, origin)
			found := false
			for _, m := range c.violations {
				if m["data-t"] == strconv.FormatFloat(at, 'f', -1, 64) && m["data-pod"] == v.Disruption.Namespace+"/"+v.Disruption.Pod && m["data-budget"] == key {
					found = true
				}
			}
			if !found {
				t.Errorf("%s: no marker of the violation of %s by %s at %vs: %v", mode, key, v.Disruption.Pod, at, c.violations)
			}
			if !c.belowWithin(at, at+chargeWindow) {
				t.Errorf("%s: the line of %s is not below desired within %vs of the violation at %vs: %+v", mode, key, chargeWindow, at, c.points)
			}
		}
	}
	if len(up.run.Audit.Violations) == 0 {
		t.Error("upstream: the audit charged no violation; the demo shows one")
	}
	for key, c := range charts[string(report.ModeBudgetguard)] {
		for _, p := range c.points {
			if p.met && p.healthy < p.desired {
				t.Errorf("budgetguard: the line of %s goes below desired: %d of %d at %vs", key, p.healthy, p.desired, p.t)
			}
		}
	}
	if *screenshot != "" {
		browse(t, chromium, page, "--screenshot="+*screenshot, "--window-size=1400,1000", "--hide-scrollbars")
		if fi, err := os.Stat(*screenshot); err != nil || fi.Size() == 0 {
			t.Errorf("no screenshot at %s: %v", *screenshot, err)
		}
	}
}
