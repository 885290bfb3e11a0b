package runner

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"

	"github.com/budgetguard/budgetguard/internal/audit"
	"github.com/budgetguard/budgetguard/internal/report"
	"github.com/budgetguard/budgetguard/plugins/budget"
)

// evictorRefusedLog is the message BudgetAwareEvictor logs, at V(2), for
// each refusal at Filter, PreEvictionFilter and its eviction gate, with the
// keys extensionPoint, pod, reason and message. The metrics do not name
// pods, so the runner reads the refusals from these log entries.
const evictorRefusedLog = "Eviction refused by budget"

// refusalRecord is one refusal BudgetAwareEvictor logged, at.
type refusalRecord struct {
	at        time.Time
	loop      int
	point     string
	namespace string
	name      string
	reason    string
	message   string
}

// refusalLog collects the evictor's refusals, tagged with the descheduling
// loop that was running.
type refusalLog struct {
	mu      sync.Mutex
	loop    int
	records []refusalRecord
}

// startLoop numbers the descheduling loop that runs next.
func (l *refusalLog) startLoop(loop int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.loop = loop
}

func (l *refusalLog) add(kv []any) {
	rec := refusalRecord{at: time.Now()}
	for i := 0; i+1 < len(kv); i += 2 {
		key, _ := kv[i].(string)
		switch v := kv[i+1].(type) {
		case klog.ObjectRef:
			if key == "pod" {
				rec.namespace, rec.name = v.Namespace, v.Name
			}
		case string:
			switch key {
			case "extensionPoint":
				rec.point = v
			case "reason":
				rec.reason = v
			case "message":
				rec.message = v
			}
		}
	}
	if rec.name == "" || rec.reason == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	rec.loop = l.loop
	l.records = append(l.records, rec)
}

func (l *refusalLog) snapshot() []refusalRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.records)
}

// withRefusalLog returns logger with a sink that also hands the evictor's
// refusal entries to l. Everything else goes on to logger as before.
func withRefusalLog(logger logr.Logger, l *refusalLog) logr.Logger {
	return logr.New(&captureSink{next: logger.GetSink(), log: l})
}

// captureSink passes every call on to next, and records the evictor's
// refusal entries, whatever next's verbosity.
type captureSink struct {
	next   logr.LogSink
	log    *refusalLog
	values []any
}

// capturedLevel is the verbosity of the entries captureSink records.
const capturedLevel = 2

func (s *captureSink) Init(info logr.RuntimeInfo) {
	if s.next != nil {
		s.next.Init(info)
	}
}

func (s *captureSink) Enabled(level int) bool {
	return level <= capturedLevel || (s.next != nil && s.next.Enabled(level))
}

func (s *captureSink) Info(level int, msg string, kv ...any) {
	if msg == evictorRefusedLog {
		s.log.add(append(slices.Clone(s.values), kv...))
	}
	if s.next != nil && s.next.Enabled(level) {
		s.next.Info(level, msg, kv...)
	}
}

func (s *captureSink) Error(err error, msg string, kv ...any) {
	if s.next != nil {
		s.next.Error(err, msg, kv...)
	}
}

func (s *captureSink) WithValues(kv ...any) logr.LogSink {
	out := &captureSink{next: s.next, log: s.log, values: append(slices.Clone(s.values), kv...)}
	if s.next != nil {
		out.next = s.next.WithValues(kv...)
	}
	return out
}

func (s *captureSink) WithName(name string) logr.LogSink {
	out := &captureSink{next: s.next, log: s.log, values: s.values}
	if s.next != nil {
		out.next = s.next.WithName(name)
	}
	return out
}

// pointOrder ranks the evictor's extension points by how far a pod got
// towards its eviction: the filter while the strategy lists pods, the
// pre-eviction filter, then the eviction request itself (the gate).
func pointOrder(point string) int {
	switch point {
	case "Filter":
		return 0
	case "PreEvictionFilter":
		return 1
	case "EvictionRequest":
		return 2
	}
	return -1
}

// askedPoint is the gate's extension point: the descheduler asked to evict
// the pod.
const askedPoint = "EvictionRequest"

// deschedulerRefusals counts the evictor's refusals once per pod per
// descheduling loop, with the reason and sentence of the furthest point the
// pod reached. A pod whose eviction the descheduler asked for and the gate
// refused is a refusal. A pod that Filter or PreEvictionFilter refused and
// whose eviction was never asked for is only filtered: strategies run both
// filters over every pod they list, including pods they would have kept, so
// such a pod is not a refusal of anything the strategy meant to do. The API
// server's own 429s are not here: the auditor reports them, with the
// component that received them.
func deschedulerRefusals(records []refusalRecord) []report.PluginRefusal {
	type podLoop struct {
		loop            int
		namespace, name string
	}
	last := map[podLoop]refusalRecord{}
	var order []podLoop
	for _, r := range records {
		k := podLoop{r.loop, r.namespace, r.name}
		old, seen := last[k]
		if !seen {
			order = append(order, k)
		}
		if !seen || pointOrder(r.point) >= pointOrder(old.point) {
			last[k] = r
		}
	}
	type key struct {
		reason   string
		filtered bool
	}
	byKey := map[key]*report.PluginRefusal{}
	for _, k := range order {
		r := last[k]
		filtered := r.point != askedPoint
		p := byKey[key{r.reason, filtered}]
		if p == nil {
			p = &report.PluginRefusal{Component: audit.ComponentDescheduler, Reason: r.reason, Filtered: filtered, Pods: []report.RefusedPod{}}
			byKey[key{r.reason, filtered}] = p
		}
		p.Count++
		i := slices.IndexFunc(p.Pods, func(rp report.RefusedPod) bool { return rp.Namespace == r.namespace && rp.Name == r.name })
		if i < 0 {
			p.Pods = append(p.Pods, report.RefusedPod{Namespace: r.namespace, Name: r.name})
			i = len(p.Pods) - 1
		}
		p.Pods[i].Count++
		p.Pods[i].Message = r.message
	}
	out := make([]report.PluginRefusal, 0, len(byKey))
	for _, p := range byKey {
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b report.PluginRefusal) int {
		return cmp.Or(cmp.Compare(a.Reason, b.Reason), cmp.Compare(boolOrder(a.Filtered), boolOrder(b.Filtered)))
	})
	return out
}

func boolOrder(b bool) int {
	if b {
		return 1
	}
	return 0
}

// timedRefusals lists budgetguard's refusals with their times, for the
// HTML timeline: each PreemptionBlockedByBudget event of the scheduler
// (once per preemptor per scheduling cycle, as it emitted them), and each
// refusal of an eviction the descheduler asked for, once per pod per loop;
// not the pods its filters only kept from the strategy, which the report
// does not count as refusals either.
func timedRefusals(records []refusalRecord, events []podEvent) []report.TimedRefusal {
	out := []report.TimedRefusal{}
	for _, ev := range events {
		if ev.reason == budget.EventPreemptionBlockedByBudget {
			out = append(out, report.TimedRefusal{Time: ev.at.UTC(), Component: audit.ComponentScheduler, Reason: ev.reason, Namespace: ev.namespace, Name: ev.name, Message: ev.note})
		}
	}
	type podLoop struct {
		loop            int
		namespace, name string
	}
	seen := map[podLoop]bool{}
	for _, r := range records {
		// Once per pod per loop, as the report counts them.
		if k := (podLoop{r.loop, r.namespace, r.name}); r.point == askedPoint && !seen[k] {
			seen[k] = true
			out = append(out, report.TimedRefusal{Time: r.at.UTC(), Component: audit.ComponentDescheduler, Reason: r.reason, Namespace: r.namespace, Name: r.name, Message: r.message})
		}
	}
	slices.SortStableFunc(out, func(a, b report.TimedRefusal) int { return a.Time.Compare(b.Time) })
	return out
}
