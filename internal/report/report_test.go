package report

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/budgetguard/budgetguard/internal/audit"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

var t0 = time.Date(2026, 11, 21, 18, 0, 0, 0, time.UTC)

const scheduler = "sandbox.test/v0.0.0 (linux/amd64) kubernetes/$Format/sandbox-scheduler"
const descheduler = "sandbox.test/v0.0.0 (linux/amd64) kubernetes/$Format/sandbox-descheduler"

func pdb(ns, name string) audit.BudgetRef {
	return audit.BudgetRef{Kind: audit.KindPDB, Namespace: ns, Name: name}
}

func pub(ns, name string) audit.BudgetRef {
	return audit.BudgetRef{Kind: audit.KindPUB, Namespace: ns, Name: name}
}

func disruption(at time.Duration, c audit.Component, ua string, a audit.Action, pod string, healthy bool, budgets ...audit.BudgetRef) audit.Disruption {
	return audit.Disruption{Time: t0.Add(at), Component: c, UserAgent: ua, Action: a, Namespace: "shop", Pod: pod, Budgets: budgets, WasHealthy: healthy}
}

// upstreamRun is the anchor scenario under DefaultPreemption: two victims
// of one PDB, and the descheduler collecting 429s.
func upstreamRun() Run {
	web := pdb("shop", "web")
	d1 := disruption(2*time.Second, audit.ComponentScheduler, scheduler, audit.ActionDelete, "web-7d9f-abcde", true, web)
	d2 := disruption(2*time.Second+time.Millisecond, audit.ComponentScheduler, scheduler, audit.ActionDelete, "web-7d9f-fghij", true, web)
	return Run{
		Mode:     ModeUpstream,
		Duration: 12*time.Second + 340*time.Millisecond,
		Audit: audit.Result{
			Budgets: []audit.BudgetSummary{
				{Budget: web, Desired: 3, Met: true, LowestHealthy: 2, Disruptions: 2, Short: true},
				{Budget: pub("shop", "db"), Desired: 2, Met: true, LowestHealthy: 2},
				{Budget: pdb("shop", "idle"), Desired: 1, Met: false},
			},
			Disruptions: []audit.Disruption{d1, d2,
				disruption(5*time.Second, audit.ComponentOther, "sandbox-replicaset-controller", audit.ActionDelete, "web-7d9f-klmno", false)},
			Refusals: []audit.Refusal{
				{Time: t0.Add(6 * time.Second), Component: audit.ComponentDescheduler, UserAgent: descheduler, Action: audit.ActionEvict, Namespace: "shop", Pod: "web-7d9f-pqrst", Code: 429, Message: "Cannot evict pod as it would violate the pod's disruption budget."},
				{Time: t0.Add(7 * time.Second), Component: audit.ComponentDescheduler, UserAgent: descheduler, Action: audit.ActionEvict, Namespace: "shop", Pod: "web-7d9f-uvwxy", Code: 429, Message: "Cannot evict pod as it would violate the pod's disruption budget."},
			},
			Violations: []audit.Violation{{Budget: web, Disruption: d2, Healthy: 2, Desired: 3}},
		},
		Notes: []string{"step 5/6 wait podScheduled shop/big: timed out after 20s: pod shop/big is not bound (continueOnTimeout)"},
		Steps: steps(),
		Pods: []Pod{{Namespace: "shop", Name: "big", Node: "node-a", Victims: 2, AutoscalerReason: "Bound",
			Event: &Event{Reason: "FailedScheduling", Message: "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.", Count: 1}}},
	}
}

// steps are the anchor scenario's steps, as a run records them.
func steps() []Step {
	var out []Step
	for i, d := range []string{"apply setup", "wait podsReady shop app=web >=4", "wait budgetsObserved", "apply preempt", "wait podScheduled shop/big", "deschedule"} {
		out = append(out, Step{Number: i + 1, Description: d, Began: t0.Add(time.Duration(i) * 500 * time.Millisecond), Ended: t0.Add(time.Duration(i+1) * 500 * time.Millisecond)})
	}
	return out
}

// budgetguardRun is the same scenario with BudgetAwarePreemption and
// BudgetAwareEvictor.
func budgetguardRun() Run {
	web := pdb("shop", "web")
	return Run{
		Mode:     ModeBudgetguard,
		Duration: 11*time.Second + 960*time.Millisecond,
		Refusals: []PluginRefusal{
			{Component: audit.ComponentScheduler, Reason: "InsufficientBudget", Count: 4},
			{Component: audit.ComponentDescheduler, Reason: "InsufficientBudget", Count: 2, Pods: []RefusedPod{
				{Namespace: "shop", Name: "web-7d9f-pqrst", Message: "pdb shop/web: 3 healthy, 3 desired, 0 disruptions allowed", Count: 1},
				{Namespace: "shop", Name: "web-7d9f-uvwxy", Message: "pdb shop/web: 3 healthy, 3 desired, 0 disruptions allowed", Count: 1},
			}},
			{Component: audit.ComponentDescheduler, Reason: "SafeToEvictFalse", Count: 1, Filtered: true, Pods: []RefusedPod{
				{Namespace: "shop", Name: "checkout-frontend-agent-5f7d8c9b4-x2k9p", Message: "cluster-autoscaler safe-to-evict is \"false\"", Count: 1},
			}},
		},
		Steps: steps(),
		Pods: []Pod{{Namespace: "shop", Name: "big", Unschedulable: true, Blocked: 4, AutoscalerScaleUp: true, AutoscalerReason: "Considered",
			BlockedMessage: "preemption blocked by disruption budgets on 1 node: pdb shop/web: 4 healthy, 3 desired, 1 disruption allowed",
			Event:          &Event{Reason: "PreemptionBlockedByBudget", Message: "preemption blocked by disruption budgets on 1 node: pdb shop/web: 4 healthy, 3 desired, 1 disruption allowed", Count: 4}}},
		Audit: audit.Result{
			Budgets: []audit.BudgetSummary{
				{Budget: web, Desired: 3, Met: true, LowestHealthy: 3, Disruptions: 1},
				{Budget: pub("shop", "db"), Desired: 2, Met: true, LowestHealthy: 2},
				{Budget: pdb("shop", "idle"), Desired: 1, Met: false},
			},
			Disruptions: []audit.Disruption{
				disruption(2*time.Second, audit.ComponentScheduler, scheduler, audit.ActionEvict, "web-7d9f-abcde", true, web),
			},
			Refusals:   []audit.Refusal{},
			Violations: []audit.Violation{},
		},
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/report -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs (-want,+got); run with -update if the change is intended:\n%s", path, diff)
	}
}

func table(t *testing.T, r *Report) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := WriteTable(&b, r); err != nil {
		t.Fatalf("WriteTable: %v", err)
	}
	for i, line := range strings.Split(b.String(), "\n") {
		if len(line) > Width {
			t.Errorf("line %d is %d columns wide, more than %d: %q", i+1, len(line), Width, line)
		}
		if strings.TrimRight(line, " ") != line {
			t.Errorf("line %d ends in spaces: %q", i+1, line)
		}
		for _, c := range line {
			if c < ' ' || c > '~' {
				t.Errorf("line %d has a character that is not printable ASCII: %q", i+1, line)
				break
			}
		}
	}
	return b.Bytes()
}

func TestTableOneRun(t *testing.T) {
	golden(t, "one-run.golden", table(t, New("anchor-preemption", "examples/scenarios/anchor.yaml", budgetguardRun())))
}

func TestTableComparison(t *testing.T) {
	golden(t, "compare.golden", table(t, New("anchor-preemption", "examples/scenarios/anchor.yaml", upstreamRun(), budgetguardRun())))
}

func TestTableEmptyRun(t *testing.T) {
	golden(t, "empty.golden", table(t, New("nothing", "empty.yaml", Run{Mode: ModeBudgetguard})))
}

func TestJSONComparison(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSON(&b, New("anchor-preemption", "examples/scenarios/anchor.yaml", upstreamRun(), budgetguardRun())); err != nil {
		t.Fatal(err)
	}
	golden(t, "compare.json.golden", b.Bytes())

	var back Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatalf("the JSON does not decode into Report: %v", err)
	}
	// Nil lists come back empty.
	if diff := cmp.Diff(normalized(New("anchor-preemption", "examples/scenarios/anchor.yaml", upstreamRun(), budgetguardRun())), &back); diff != "" {
		t.Errorf("JSON round trip (-want,+got):\n%s", diff)
	}
}

func TestJSONSetsSchemaVersionAndEmptyLists(t *testing.T) {
	r := &Report{Scenario: "s", Runs: []Run{{Mode: ModeUpstream, Audit: audit.Result{
		Disruptions: []audit.Disruption{{Pod: "p"}},
	}}}}
	var b bytes.Buffer
	if err := WriteJSON(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.Contains(out, `"schemaVersion": "`+SchemaVersion+`"`) {
		t.Errorf("schemaVersion is not set:\n%s", out)
	}
	if strings.Contains(out, "null") {
		t.Errorf("a list is null instead of []:\n%s", out)
	}
	if r.SchemaVersion != "" || r.Runs[0].Refusals != nil || r.Runs[0].Audit.Disruptions[0].Budgets != nil {
		t.Errorf("WriteJSON changed its argument: %+v", r)
	}
}

func TestTableNeedsOneOrTwoRuns(t *testing.T) {
	for _, n := range []int{0, 3} {
		err := WriteTable(&bytes.Buffer{}, New("s", "p", make([]Run, n)...))
		if err == nil || !strings.Contains(err.Error(), "one run, or two") {
			t.Errorf("%d runs: got %v", n, err)
		}
	}
	if err := WriteTable(&bytes.Buffer{}, nil); err == nil {
		t.Error("nil report: no error")
	}
	if err := WriteJSON(&bytes.Buffer{}, nil); err == nil {
		t.Error("nil report: no error")
	}
}

// Long names are shortened so that the table stays within Width.
func TestTableFitsWidthWithLongNames(t *testing.T) {
	long := strings.Repeat("very-long-name-", 8)
	ref := audit.BudgetRef{Kind: audit.KindPUB, Namespace: long, Name: long}
	d := audit.Disruption{Component: audit.Component(long), Action: audit.ActionEvict, Namespace: long, Pod: long + "\tpod", Budgets: []audit.BudgetRef{ref}, WasHealthy: true}
	run := func(mode Mode) Run {
		return Run{
			Mode:     mode,
			Duration: time.Hour,
			Refusals: []PluginRefusal{{Component: audit.Component(long), Reason: long, Count: 123456}},
			Audit: audit.Result{
				Budgets:     []audit.BudgetSummary{{Budget: ref, Desired: 2147483647, LowestHealthy: 2147483646, Met: false}},
				Disruptions: []audit.Disruption{d},
				Refusals:    []audit.Refusal{{Component: audit.Component(long), Code: 429}},
				Violations:  []audit.Violation{{Budget: ref, Disruption: d, Healthy: 2147483646, Desired: 2147483647}},
			},
			Notes: []string{long + " " + long + strings.Repeat("x", 300) + " end"},
		}
	}
	out := table(t, New(long+long, long+long, run(Mode(long)), run(ModeBudgetguard)))
	if !bytes.Contains(out, []byte("...")) {
		t.Errorf("long names were not shortened:\n%s", out)
	}
	if !bytes.Contains(out, []byte(" end\n")) {
		t.Errorf("the wrapped note lost its end:\n%s", out)
	}
}

func TestVerdict(t *testing.T) {
	a, b := pdb("ns", "a"), pub("ns", "b")
	for _, tc := range []struct {
		violations []audit.BudgetRef
		want       string
	}{
		{nil, "no budget broken"},
		{[]audit.BudgetRef{a, a}, "1 budget broken"},
		{[]audit.BudgetRef{a, b, a}, "2 budgets broken"},
	} {
		var run Run
		for _, ref := range tc.violations {
			run.Audit.Violations = append(run.Audit.Violations, audit.Violation{Budget: ref})
		}
		if got := verdict(run); got != tc.want {
			t.Errorf("violations of %v: verdict %q, want %q", tc.violations, got, tc.want)
		}
	}
}

func TestWrap(t *testing.T) {
	got := wrap("upstream: aaa bbb "+strings.Repeat("c", 25)+" dd", 20, "  ")
	want := []string{"upstream: aaa bbb", "  cccccccccccccccccc", "  ccccccc dd"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("wrap (-want,+got):\n%s", diff)
	}
}

// A pod name is cut in its beginning, never in its unique end.
func TestShortenPodKeepsTheUniqueSuffix(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
		want string
	}{
		{"web-7d9f-abcde", 18, "web-7d9f-abcde"},
		// The ReplicaSet's hash and the pod's suffix stay whole.
		{"checkout-frontend-7d9f8c6b5-x2k9p", 24, "check...-7d9f8c6b5-x2k9p"},
		// No room for both: the pod's own suffix stays whole.
		{"checkout-frontend-7d9f8c6b5-x2k9p", 18, "checkout-...-x2k9p"},
		{"checkout-frontend-worker-0", 18, "checko...-worker-0"},
		// No dash: cut at the end, as any other name.
		{"averyveryveryverylongname", 10, "averyve..."},
	} {
		got := shortenPod(tc.name, tc.n)
		if got != tc.want || len(got) > tc.n {
			t.Errorf("shortenPod(%q, %d) = %q, want %q", tc.name, tc.n, got, tc.want)
		}
	}
}

// The BUDGETS table never shows a budget whose lowest healthy count fell
// below desired as if it were met: BROKEN with a violation, RACED with a
// race, "short" with neither; and the verdict counts races and
// disagreements.
func TestBudgetCellNeverShowsAShortBudgetAsMet(t *testing.T) {
	web := pdb("shop", "web")
	short := audit.BudgetSummary{Budget: web, Desired: 3, Met: true, LowestHealthy: 2, Short: true}
	d := disruption(time.Second, audit.ComponentScheduler, "s", audit.ActionDelete, "a", true, web)
	for _, tc := range []struct {
		name string
		res  audit.Result
		cell string
		verd string
	}{
		{"short", audit.Result{Budgets: []audit.BudgetSummary{short}}, "2/3 short", "no budget broken"},
		{"raced", audit.Result{Budgets: []audit.BudgetSummary{short}, Races: []audit.Race{{Budget: web, Disruption: d, Healthy: 2, Desired: 3, KnownHealthy: 3, KnownDesired: 3}}}, "2/3 RACED", "no budget broken; 1 race"},
		{"broken", audit.Result{Budgets: []audit.BudgetSummary{short}, Violations: []audit.Violation{{Budget: web, Disruption: d, Healthy: 2, Desired: 3}},
			Disagreements: []audit.Disagreement{{Budget: web, Disruption: d}, {Budget: web, Disruption: d}}}, "2/3 BROKEN", "1 budget broken; 2 disagreements with a budget's status"},
		{"whole", audit.Result{Budgets: []audit.BudgetSummary{{Budget: web, Desired: 3, Met: true, LowestHealthy: 3}}}, "3/3", "no budget broken"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := Run{Audit: tc.res}
			if got := budgetCell(run, web); got != tc.cell {
				t.Errorf("cell %q, want %q", got, tc.cell)
			}
			if got := verdict(run); got != tc.verd {
				t.Errorf("verdict %q, want %q", got, tc.verd)
			}
		})
	}
}
