package report

import (
	"bytes"
	"encoding/json"
	"flag"
	"html"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/budgetguard/budgetguard/internal/audit"
)

var htmlOut = flag.String("html-out", "", "also write the comparison's HTML page to this file, to look at it in a browser")

// series is a budget's healthy count: at, healthy, desired, met per point,
// from t0.
func series(ref audit.BudgetRef, points ...any) audit.BudgetSeries {
	s := audit.BudgetSeries{Budget: ref}
	for i := 0; i+3 < len(points)+1; i += 4 {
		s.Points = append(s.Points, audit.HealthyPoint{At: t0.Add(points[i].(time.Duration)), Healthy: int32(points[i+1].(int)), Desired: int32(points[i+2].(int)), Met: points[i+3].(bool)})
	}
	return s
}

// timelineRuns are the comparison's runs with their timelines: upstream's
// web falls to 2 of 3 when its second victim goes, budgetguard's stays at
// 4 while the scheduler refuses.
func timelineRuns() (Run, Run) {
	up, bg := upstreamRun(), budgetguardRun()
	ms := time.Millisecond
	up.Timeline.Budgets = []audit.BudgetSeries{
		series(pdb("shop", "idle"), 1000*ms, 0, 1, false),
		series(pdb("shop", "web"), 1000*ms, 4, 0, false, 1200*ms, 4, 3, true, 2000*ms+500*time.Microsecond, 3, 3, true, 2003*ms, 2, 3, true),
		series(pub("shop", "db"), 900*ms, 2, 2, true),
	}
	bg.Timeline.Budgets = []audit.BudgetSeries{
		series(pdb("shop", "web"), 1000*ms, 4, 3, true, 2000*ms+500*time.Microsecond, 3, 3, true),
		series(pub("shop", "db"), 900*ms, 2, 2, true),
	}
	bg.Timeline.Refusals = []TimedRefusal{
		{Time: t0.Add(1500 * ms), Component: audit.ComponentScheduler, Reason: "PreemptionBlockedByBudget", Namespace: "shop", Name: "big", Message: "preemption blocked by disruption budgets on 1 node: pdb shop/web: 4 healthy, 3 desired, 1 disruption allowed"},
		{Time: t0.Add(2800 * ms), Component: audit.ComponentDescheduler, Reason: "InsufficientBudget", Namespace: "shop", Name: "web-7d9f-pqrst", Message: "pdb shop/web: 3 healthy, 3 desired, 0 disruptions allowed"},
	}
	return up, bg
}

func writeHTML(t *testing.T, r *Report) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteHTML(&b, r); err != nil {
		t.Fatalf("WriteHTML: %v", err)
	}
	return b.String()
}

// pageData decodes the page's JSON block.
func pageData(t *testing.T, doc string) page {
	t.Helper()
	m := regexp.MustCompile(`(?s)<script type="application/json" id="timeline-data">(.*?)</script>`).FindStringSubmatch(doc)
	if m == nil {
		t.Fatalf("the page has no timeline-data block:\n%s", doc)
	}
	var p page
	dec := json.NewDecoder(strings.NewReader(m[1]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("the timeline-data block: %v", err)
	}
	return p
}

func TestHTMLComparison(t *testing.T) {
	up, bg := timelineRuns()
	r := New("anchor-preemption", "examples/scenarios/anchor.yaml", up, bg)
	doc := writeHTML(t, r)
	if *htmlOut != "" {
		if err := os.WriteFile(*htmlOut, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The text report follows the charts, escaped.
	if tbl := string(table(t, r)); !strings.Contains(doc, "<pre>"+html.EscapeString(tbl)+"</pre>") {
		t.Error("the page does not hold the table WriteTable writes")
	}
	for _, want := range []string{`data-verdict="upstream"`, "1 budget broken", `data-verdict="budgetguard"`, "no budget broken", `<main id="timeline"`} {
		if !strings.Contains(doc, want) {
			t.Errorf("the page does not hold %q", want)
		}
	}

	p := pageData(t, doc)
	if p.Span != 7 { // the API server refused the descheduler 7 s after the first step began
		t.Errorf("span %v, want 7", p.Span)
	}
	var keys []string
	for _, b := range p.Budgets {
		keys = append(keys, b.Key+" "+b.Label)
	}
	if diff := cmp.Diff([]string{"PodDisruptionBudget/shop/idle pdb shop/idle", "PodDisruptionBudget/shop/web pdb shop/web", "PodUnavailableBudget/shop/db pub shop/db"}, keys); diff != "" {
		t.Errorf("budgets (-want,+got):\n%s", diff)
	}
	u := p.Runs[0]
	if diff := cmp.Diff([]pageCharge{{T: 2.001, Budget: "PodDisruptionBudget/shop/web", Pod: "shop/web-7d9f-fghij", Component: "scheduler", Action: "delete", Healthy: 2, Desired: 3}}, u.Violations); diff != "" {
		t.Errorf("upstream violations (-want,+got):\n%s", diff)
	}
	web := u.Budgets[1]
	if web.Key != "PodDisruptionBudget/shop/web" || web.Cell != "2/3 BROKEN" || web.Desired != 3 || web.Lowest != 2 {
		t.Errorf("upstream web: %+v", web)
	}
	if diff := cmp.Diff([]pagePoint{{T: 1, Healthy: 4}, {T: 1.2, Healthy: 4, Desired: 3, Met: true}, {T: 2.001, Healthy: 3, Desired: 3, Met: true}, {T: 2.003, Healthy: 2, Desired: 3, Met: true}}, web.Points); diff != "" {
		t.Errorf("upstream web's points (-want,+got):\n%s", diff)
	}
	if len(u.Refusals) != 2 || u.Refusals[0].By != "apiserver" || u.Refusals[0].Label != "apiserver 429 to descheduler" || u.Refusals[0].T != 6 {
		t.Errorf("upstream refusals: %+v", u.Refusals)
	}
	b := p.Runs[1]
	if len(b.Refusals) != 2 || b.Refusals[0].By != "budgetguard" || b.Refusals[0].Label != "scheduler PreemptionBlockedByBudget" || b.Refusals[0].T != 1.5 || b.Refusals[1].Pod != "shop/web-7d9f-pqrst" {
		t.Errorf("budgetguard refusals: %+v", b.Refusals)
	}
	if len(b.Disruptions) != 1 || b.Disruptions[0].Action != "evict" || b.Disruptions[0].Budgets[0] != "PodDisruptionBudget/shop/web" {
		t.Errorf("budgetguard disruptions: %+v", b.Disruptions)
	}
}

// The page loads nothing: no address, no file, no font, no image.
func TestHTMLIsSelfContained(t *testing.T) {
	up, bg := timelineRuns()
	doc := writeHTML(t, New("anchor-preemption", "examples/scenarios/anchor.yaml", up, bg))
	// The one address is SVG's namespace, a name the script passes to
	// createElementNS, which loads nothing; the one url() is the clip
	// path's, a fragment of the page itself.
	rest := strings.ReplaceAll(doc, "'http://www.w3.org/2000/svg'", "")
	rest = strings.ReplaceAll(rest, "'url(#'", "")
	for _, bad := range []string{"http:", "https:", "//cdn", "src=", "href=", "@import", "url(", "@font-face", "<link", "<img", "<iframe", "fetch(", "XMLHttpRequest", "import("} {
		if strings.Contains(rest, bad) {
			t.Errorf("the page holds %q, which could load something", bad)
		}
	}
	if strings.Count(doc, "<script") != 2 {
		t.Errorf("the page has %d scripts, want the data and the drawing script", strings.Count(doc, "<script"))
	}
}

// Names from the scenario cannot end the data's script or add markup.
func TestHTMLEscapes(t *testing.T) {
	run := budgetguardRun()
	run.Audit.Disruptions[0].Pod = "</script><script>alert(1)</script>"
	doc := writeHTML(t, New(`<b>"x"</b>`, "a&b.yaml", run))
	if strings.Contains(doc, `<b>"x"`) || strings.Contains(doc, "alert(1)</script>") {
		t.Errorf("a name reached the page unescaped:\n%s", doc)
	}
	if p := pageData(t, doc); p.Scenario != `<b>"x"</b>` || p.Runs[0].Disruptions[0].Pod != "shop/</script><script>alert(1)</script>" {
		t.Errorf("the data does not hold the names as they are: %+v", p)
	}
}

func TestHTMLNeedsAReport(t *testing.T) {
	if err := WriteHTML(&bytes.Buffer{}, nil); err == nil {
		t.Error("WriteHTML(nil) returned no error")
	}
	if err := WriteHTML(&bytes.Buffer{}, New("none", "none.yaml")); err == nil {
		t.Error("WriteHTML of a report without runs returned no error (the table needs one or two)")
	}
}

// A run without steps counts from its earliest event; times before the
// origin are 0.
func TestOriginAndSeconds(t *testing.T) {
	run := budgetguardRun()
	if got := Origin(run); !got.Equal(t0) {
		t.Errorf("Origin = %v, want the first step's beginning %v", got, t0)
	}
	run.Steps = nil
	run.Timeline.Budgets = []audit.BudgetSeries{series(pdb("shop", "web"), 1500*time.Millisecond, 4, 3, true)}
	if got := Origin(run); !got.Equal(t0.Add(1500 * time.Millisecond)) {
		t.Errorf("Origin without steps = %v, want the first point's time", got)
	}
	if got := Seconds(t0.Add(1234567*time.Microsecond), t0); got != 1.235 {
		t.Errorf("Seconds = %v, want 1.235", got)
	}
	if got := Seconds(t0, t0.Add(time.Second)); got != 0 {
		t.Errorf("Seconds before the origin = %v, want 0", got)
	}
}
