package runner

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/budgetguard/budgetguard/internal/report"
	"github.com/budgetguard/budgetguard/internal/scenario"
)

// Unmet returns how run differs from the scenario's expect block for the
// run's mode, one sentence each; none when it matches, or when the block
// says nothing of the mode.
func Unmet(sc *scenario.Scenario, run report.Run) []string {
	e := sc.Expect.For(string(run.Mode))
	if e == nil {
		return nil
	}
	var out []string
	check := func(what string, c *scenario.Count, got int) {
		if c != nil && !c.Holds(got) {
			out = append(out, fmt.Sprintf("expect.%s.%s: want %s, got %d", run.Mode, what, c, got))
		}
	}
	check("disruptions", e.Disruptions, len(run.Audit.Disruptions))
	check("violations", e.Violations, len(run.Audit.Violations))
	for _, reason := range slices.Sorted(maps.Keys(e.Refusals)) {
		c := e.Refusals[reason]
		check("refusals["+reason+"]", &c, refusalCount(run, reason))
	}
	if e.Pods != nil {
		for i, ref := range e.Pods.Bound {
			if p, ok := findPod(run, ref); !ok || p.Node == "" {
				out = append(out, fmt.Sprintf("expect.%s.pods.bound[%d]: pod %s is %s, want it bound", run.Mode, i, ref, podState(p, ok)))
			}
		}
		for i, ref := range e.Pods.Pending {
			if p, ok := findPod(run, ref); !ok || p.Node != "" {
				out = append(out, fmt.Sprintf("expect.%s.pods.pending[%d]: pod %s is %s, want it Pending", run.Mode, i, ref, podState(p, ok)))
			}
		}
	}
	return out
}

// refusalCount counts a run's refusals of reason as the report does: a
// plugin reason over both components, its filtered pods (reason/filtered),
// or apiserver-<code>.
func refusalCount(run report.Run, reason string) int {
	n := 0
	if m := scenario.APIServerRefusalKey.FindStringSubmatch(reason); m != nil {
		code, _ := strconv.Atoi(m[1])
		for _, r := range run.Audit.Refusals {
			if r.Code == code {
				n++
			}
		}
		return n
	}
	m := scenario.ReasonKey.FindStringSubmatch(reason)
	if m == nil {
		return 0
	}
	for _, p := range run.Refusals {
		if p.Reason == m[1] && p.Filtered == (m[2] != "") {
			n += p.Count
		}
	}
	return n
}

func findPod(run report.Run, ref string) (report.Pod, bool) {
	for _, p := range run.Pods {
		if p.Namespace+"/"+p.Name == ref {
			return p, true
		}
	}
	return report.Pod{}, false
}

func podState(p report.Pod, found bool) string {
	switch {
	case !found:
		return "gone"
	case p.Node != "":
		return "bound to " + p.Node
	}
	return "Pending"
}
