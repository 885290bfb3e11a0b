package runner

import (
	"fmt"
	"sort"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/budgetguard/budgetguard/internal/audit"
	"github.com/budgetguard/budgetguard/internal/report"
)

// The counters of budgetguard's refusals, as plugins/budgetevictor and
// plugins/budgetpreemption register them in the legacy registry.
const (
	// evictorRefusedMetric has labels extension_point and reason.
	evictorRefusedMetric = "budgetguard_evictor_evictions_refused_total"
	// preemptionBlockedMetric has the label reason.
	preemptionBlockedMetric = "budgetguard_preemption_blocked_total"
)

// refusalKey is one series of refusals, summed over the evictor's
// extension points.
type refusalKey struct {
	component audit.Component
	reason    string
}

// refusalCounts reads budgetguard's refusal counters from g.
func refusalCounts(g metrics.Gatherer) (map[refusalKey]float64, error) {
	families, err := g.Gather()
	if err != nil {
		return nil, fmt.Errorf("gather budgetguard's metrics: %w", err)
	}
	counts := map[refusalKey]float64{}
	for _, f := range families {
		var component audit.Component
		switch f.GetName() {
		case evictorRefusedMetric:
			component = audit.ComponentDescheduler
		case preemptionBlockedMetric:
			component = audit.ComponentScheduler
		default:
			continue
		}
		for _, m := range f.GetMetric() {
			key := refusalKey{component: component}
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" {
					key.reason = l.GetValue()
				}
			}
			counts[key] += m.GetCounter().GetValue()
		}
	}
	return counts, nil
}

// refusalDelta returns what after counts beyond before, sorted by
// component and reason.
func refusalDelta(before, after map[refusalKey]float64) []report.PluginRefusal {
	out := []report.PluginRefusal{}
	for k, v := range after {
		if n := int(v - before[k]); n > 0 {
			out = append(out, report.PluginRefusal{Component: k.component, Reason: k.reason, Count: n})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Component != out[j].Component {
			return out[i].Component < out[j].Component
		}
		return out[i].Reason < out[j].Reason
	})
	return out
}

// legacyGatherer is where both plugins register their metrics.
var legacyGatherer metrics.Gatherer = legacyregistry.DefaultGatherer

// pluginRefusals is what budgetguard's plugins refused during a run: the
// scheduler's blocked preemptions from its counter (once per preemptor per
// scheduling cycle, or per candidate refused at actuation), and the
// descheduler's refusals from the evictor's log entries, once per pod per
// descheduling loop (see deschedulerRefusals). The evictor's counter is not
// used: it counts a pod at every extension point that refused it, and counts
// the API server's 429s, which the auditor reports.
func pluginRefusals(before, after map[refusalKey]float64, records []refusalRecord) []report.PluginRefusal {
	out := deschedulerRefusals(records)
	for _, p := range refusalDelta(before, after) {
		if p.Component == audit.ComponentScheduler {
			out = append(out, p)
		}
	}
	return out
}
