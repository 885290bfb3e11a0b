// Package scenarios runs every scenario under examples/scenarios through the
// sandbox binary's runner, upstream first and then budgetguard, each on its
// own in-process control plane, and asserts the outcome each one exists to
// show: the scenario's own expect block for the mode, which every example
// carries, as sandbox run checks it, and what each test adds. The runs are
// sequential: one control plane runs in a process at a time.
package scenarios

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/budgetguard/budgetguard/internal/audit"
	"github.com/budgetguard/budgetguard/internal/report"
	"github.com/budgetguard/budgetguard/internal/runner"
	"github.com/budgetguard/budgetguard/internal/scenario"
)

// outcome is what one run of a scenario did.
type outcome struct {
	run   report.Run
	table string
}

// run executes the scenario file in mode and returns what the auditor saw.
func run(t *testing.T, file string, mode report.Mode) outcome {
	t.Helper()
	sc, err := scenario.Load(filepath.Join("..", "..", "examples", "scenarios", file))
	if err != nil {
		t.Fatalf("load %s: %v", file, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var progress strings.Builder
	r, err := runner.Run(ctx, sc, mode, runner.Options{Progress: &progress})
	t.Logf("%s, %s run:\n%s", file, mode, progress.String())
	if err != nil {
		t.Fatalf("%s run of %s: %v", mode, file, err)
	}
	var table strings.Builder
	if err := report.WriteTable(&table, report.New(sc.Name, sc.Path, r)); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s report:\n%s", mode, table.String())
	if sc.Expect.For(string(mode)) == nil {
		t.Errorf("%s has no expect block for %s", file, mode)
	}
	for _, u := range runner.Unmet(sc, r) {
		t.Errorf("%s: %s", file, u)
	}
	return outcome{run: r, table: table.String()}
}

// disruptions counts the disruptions by component of pods whose name starts
// with prefix.
func (o outcome) disruptions(component audit.Component, prefix string) int {
	n := 0
	for _, d := range o.run.Audit.Disruptions {
		if d.Component == component && strings.HasPrefix(d.Pod, prefix) {
			n++
		}
	}
	return n
}

// apiRefusals counts the API server's refusals with code of pods whose name
// starts with prefix.
func (o outcome) apiRefusals(code int, prefix string) int {
	n := 0
	for _, r := range o.run.Audit.Refusals {
		if r.Code == code && strings.HasPrefix(r.Pod, prefix) {
			n++
		}
	}
	return n
}

// violations lists the violated budgets as kind/namespace/name.
func (o outcome) violations() []string {
	var out []string
	for _, v := range o.run.Audit.Violations {
		out = append(out, fmt.Sprintf("%s/%s/%s", v.Budget.Kind, v.Budget.Namespace, v.Budget.Name))
	}
	return out
}

func (o outcome) pluginRefusals(component audit.Component, reason string) int {
	n := 0
	for _, r := range o.run.Refusals {
		if r.Component == component && r.Reason == reason {
			n += r.Count
		}
	}
	return n
}

func (o outcome) budget(kind, ns, name string) (audit.BudgetSummary, bool) {
	for _, b := range o.run.Audit.Budgets {
		if b.Budget.Kind == kind && b.Budget.Namespace == ns && b.Budget.Name == name {
			return b, true
		}
	}
	return audit.BudgetSummary{}, false
}

// Every file in examples/scenarios has a test here.
func TestEveryExampleScenarioIsTested(t *testing.T) {
	tested := map[string]bool{
		"preemption-under-pdb.yaml":   true,
		"crashloop-always-allow.yaml": true,
		"pub-protected.yaml":          true,
		"pub-without-webhook.yaml":    true,
		"autoscaler-annotations.yaml": true,
		"autoscaler-scale-up.yaml":    true,
		"deschedule-twice-pub.yaml":   true,
	}
	entries, err := os.ReadDir(filepath.Join("..", "..", "examples", "scenarios"))
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, e := range entries {
		if e.IsDir() || filepath.Ext(e.Name()) != ".yaml" {
			continue
		}
		found++
		if !tested[e.Name()] {
			t.Errorf("examples/scenarios/%s has no test in this package", e.Name())
		}
	}
	if found != len(tested) {
		t.Errorf("examples/scenarios holds %d scenarios, this package tests %d", found, len(tested))
	}
}

// The showcase (make demo): upstream preemption deletes 2 of the 4 pods and
// leaves the PDB at 2 healthy against 3 desired; budgetguard breaks nothing.
// The HTML timeline of both runs, loaded in headless Chromium, shows it
// (checkTimeline).
func TestScenarioPreemptionUnderPDB(t *testing.T) {
	up := run(t, "preemption-under-pdb.yaml", report.ModeUpstream)
	if n := up.disruptions(audit.ComponentScheduler, ""); n < 2 {
		t.Errorf("upstream: the scheduler disrupted %d pods, want at least 2", n)
	}
	if v := up.violations(); len(v) == 0 {
		t.Error("upstream: no violation, want the PDB broken")
	}
	bg := run(t, "preemption-under-pdb.yaml", report.ModeBudgetguard)
	if n := bg.disruptions(audit.ComponentScheduler, ""); n > 1 {
		t.Errorf("budgetguard: the scheduler disrupted %d pods, want at most 1", n)
	}
	if v := bg.violations(); len(v) != 0 {
		t.Errorf("budgetguard: violations %v, want none", v)
	}
	checkTimeline(t, "preemption-under-pdb.yaml", up, bg)
}

// Crash-looping worker pods under AlwaysAllow are evicted at budget 0 in both
// runs; api's under IfHealthyBudget are not. Upstream learns that from 429s,
// budgetguard refuses before asking.
func TestScenarioCrashloopAlwaysAllow(t *testing.T) {
	for _, mode := range []report.Mode{report.ModeUpstream, report.ModeBudgetguard} {
		o := run(t, "crashloop-always-allow.yaml", mode)
		if n := o.disruptions(audit.ComponentDescheduler, "worker-"); n != 4 {
			t.Errorf("%s: the descheduler evicted %d crash-looping worker pods, want 4", mode, n)
		}
		if n := o.disruptions(audit.ComponentDescheduler, "api-"); n != 0 {
			t.Errorf("%s: the descheduler evicted %d api pods, want 0 (IfHealthyBudget while disrupted)", mode, n)
		}
		if v := o.violations(); len(v) != 0 {
			t.Errorf("%s: violations %v, want none", mode, v)
		}
		refused := o.apiRefusals(429, "api-")
		switch mode {
		case report.ModeUpstream:
			if refused != 3 {
				t.Errorf("upstream: the API server refused %d api evictions, want 3", refused)
			}
		case report.ModeBudgetguard:
			if refused != 0 {
				t.Errorf("budgetguard: the API server refused %d api evictions, want 0", refused)
			}
			if n := o.pluginRefusals(audit.ComponentDescheduler, "InsufficientBudget"); n < 3 {
				t.Errorf("budgetguard: BudgetAwareEvictor refused %d evictions for InsufficientBudget, want at least 3", n)
			}
		}
	}
}

// A PUB that OpenKruise's webhook enforces: upstream evicts 1 cart pod and
// the API server refuses the other 2 with kruise's 403; budgetguard evicts
// the 1 it allows and asks for no more.
func TestScenarioPUBProtected(t *testing.T) {
	up := run(t, "pub-protected.yaml", report.ModeUpstream)
	if n := up.disruptions(audit.ComponentDescheduler, "cart-"); n != 1 {
		t.Errorf("upstream: the descheduler evicted %d cart pods, want 1", n)
	}
	if n := up.apiRefusals(http.StatusForbidden, "cart-"); n != 2 {
		t.Errorf("upstream: the API server refused %d evictions of cart pods with 403, want 2 (OpenKruise's webhook)", n)
	}
	if v := up.violations(); len(v) != 0 {
		t.Errorf("upstream: violations %v, want none (the webhook enforces the PUB)", v)
	}
	checkCartKept(t, run(t, "pub-protected.yaml", report.ModeBudgetguard), true)
}

// checkCartKept checks a budgetguard run of a cart-PUB scenario: the
// descheduler evicted the 1 cart pod the PUB allows, broke nothing, and,
// when summary is set, the auditor saw the PUB met and never below its
// desired count. Where OpenKruise's webhook runs, no eviction met its 403:
// budgetguard asked for no more than the PUB allows.
func checkCartKept(t *testing.T, bg outcome, summary bool) {
	t.Helper()
	if n := bg.disruptions(audit.ComponentDescheduler, "cart-"); n != 1 {
		t.Errorf("budgetguard: the descheduler evicted %d cart pods, want 1", n)
	}
	if n := bg.apiRefusals(http.StatusForbidden, "cart-"); n != 0 {
		t.Errorf("budgetguard: the API server refused %d evictions of cart pods with 403, want 0 (asked for more than the PUB allows)", n)
	}
	if v := bg.violations(); len(v) != 0 {
		t.Errorf("budgetguard: violations %v, want none", v)
	}
	if !summary {
		return
	}
	if b, ok := bg.budget("PodUnavailableBudget", "shop", "cart"); !ok || !b.Met || b.LowestHealthy < b.Desired {
		t.Errorf("budgetguard: PUB shop/cart summary %+v (found %v), want met and never below desired", b, ok)
	}
}

// The same PUB with no webhook to enforce it: upstream evicts 3 cart pods
// and breaks it; budgetguard evicts the 1 it allows.
func TestScenarioPUBWithoutWebhook(t *testing.T) {
	up := run(t, "pub-without-webhook.yaml", report.ModeUpstream)
	if n := up.disruptions(audit.ComponentDescheduler, "cart-"); n != 3 {
		t.Errorf("upstream: the descheduler evicted %d cart pods, want 3", n)
	}
	if v := up.violations(); len(v) == 0 || !strings.Contains(strings.Join(v, " "), "PodUnavailableBudget/shop/cart") {
		t.Errorf("upstream: violations %v, want PodUnavailableBudget shop/cart broken", v)
	}
	checkCartKept(t, run(t, "pub-without-webhook.yaml", report.ModeBudgetguard), true)
}

// Two deschedule steps, the descheduler built anew for each on the same
// client: the eviction gate decides on the second step's cache, so the PUB
// created between the steps holds (1 eviction). Bound to the first step's
// stopped cache, the gate let all 3 through and the PUB broke, as upstream's
// does; with OpenKruise's webhook in front, such a gate meets 403s instead.
// Only the budgetguard run: upstream's is the reference of
// pub-protected.yaml.
func TestScenarioDescheduleTwicePUB(t *testing.T) {
	checkCartKept(t, run(t, "deschedule-twice-pub.yaml", report.ModeBudgetguard), false)
}

// safe-to-evict "false" pods: upstream evicts them, budgetguard does not. The
// web pods under their PDB lose 2 in both runs.
func TestScenarioAutoscalerAnnotations(t *testing.T) {
	up := run(t, "autoscaler-annotations.yaml", report.ModeUpstream)
	if n := up.disruptions(audit.ComponentDescheduler, "agent-"); n != 3 {
		t.Errorf("upstream: the descheduler evicted %d safe-to-evict=false agent pods, want 3", n)
	}
	bg := run(t, "autoscaler-annotations.yaml", report.ModeBudgetguard)
	if n := bg.disruptions(audit.ComponentDescheduler, "agent-"); n != 0 {
		t.Errorf("budgetguard: the descheduler evicted %d safe-to-evict=false agent pods, want 0", n)
	}
	// Filter turns the agents down while RemoveDuplicates lists them: they
	// are filtered, not refused evictions.
	if n := bg.pluginRefusals(audit.ComponentDescheduler, "SafeToEvictFalse"); n == 0 {
		t.Error("budgetguard: no SafeToEvictFalse refusal reported")
	}
	for _, r := range bg.run.Refusals {
		if r.Reason == "SafeToEvictFalse" && !r.Filtered {
			t.Errorf("budgetguard: %d SafeToEvictFalse refusals of evictions the descheduler asked for, want them filtered", r.Count)
		}
	}
	for _, o := range []struct {
		mode report.Mode
		o    outcome
	}{{report.ModeUpstream, up}, {report.ModeBudgetguard, bg}} {
		if n := o.o.disruptions(audit.ComponentDescheduler, "web-"); n != 2 {
			t.Errorf("%s: the descheduler evicted %d web pods, want the 2 the PDB allows", o.mode, n)
		}
		if v := o.o.violations(); len(v) != 0 {
			t.Errorf("%s: violations %v, want none", o.mode, v)
		}
	}
	if n := bg.apiRefusals(429, ""); n != 0 {
		t.Errorf("budgetguard: %d 429s from the API server, want 0", n)
	}
}

// A preemptor whose only victims are under a PDB that allows 0 disruptions
// (after a patch step): upstream preempts one and breaks the PDB; budgetguard
// refuses, and the preemptor is left as cluster-autoscaler scales up for:
// Pending, Unschedulable, not nominated, with an event naming the budget.
func TestScenarioAutoscalerScaleUp(t *testing.T) {
	up := run(t, "autoscaler-scale-up.yaml", report.ModeUpstream)
	if n := up.disruptions(audit.ComponentScheduler, "web-"); n != 1 {
		t.Errorf("upstream: the scheduler disrupted %d web pods, want 1", n)
	}
	bg := run(t, "autoscaler-scale-up.yaml", report.ModeBudgetguard)
	if len(bg.run.Pods) != 1 {
		t.Fatalf("budgetguard: pods %+v, want checkout only", bg.run.Pods)
	}
	p := bg.run.Pods[0]
	if p.Node != "" || p.NominatedNode != "" || !p.Unschedulable || !p.AutoscalerScaleUp || p.Blocked == 0 {
		t.Errorf("budgetguard: checkout %+v, want Pending, not nominated, Unschedulable, blocked, and a scale-up", p)
	}
	if p.Event == nil || !strings.Contains(p.Event.Message, "pdb shop/web: 4 healthy, 4 desired, 0 disruptions allowed") {
		t.Errorf("budgetguard: checkout's last event %+v, want one naming pdb shop/web and its numbers", p.Event)
	}
	for _, want := range []string{"shop/checkout Pending, not nominated, Unschedulable; cluster-autoscaler would scale up: yes"} {
		if !strings.Contains(strings.Join(strings.Fields(bg.table), " "), want) {
			t.Errorf("budgetguard: the report does not say %q:\n%s", want, bg.table)
		}
	}
}
