package report

import (
	"bytes"
	"cmp"
	"fmt"
	"time"

	"github.com/budgetguard/budgetguard/internal/audit"
)

// Column limits of the sections in this file.
const (
	maxStep   = 40
	maxPod    = 30
	maxNode   = 16
	maxPodRef = 40
)

// apiRefusalLabel names an API-server refusal by its code and the
// component whose request it refused.
func apiRefusalLabel(ref audit.Refusal) string {
	return fmt.Sprintf("apiserver %d to %s", ref.Code, ref.Component)
}

// refusalLabel is "component reason", with ", filtered" for pods the
// descheduler's filters kept from the strategy.
func refusalLabel(p PluginRefusal) string {
	label := fmt.Sprintf("%s %s", p.Component, p.Reason)
	if p.Filtered {
		label += ", filtered"
	}
	return label
}

// podRef is "namespace/name", with the name shortened by shortenPod.
func podRef(namespace, name string) string {
	return sanitize(namespace) + "/" + shortenPod(name, max(maxPodRef-len(namespace)-1, 12))
}

// times is "" for 1 and " (N times)" otherwise.
func times(n int) string {
	if n == 1 {
		return ""
	}
	return fmt.Sprintf(" (%d times)", n)
}

// writeLines writes text wrapped to Width, later lines indented.
func writeLines(b *bytes.Buffer, text string) {
	for _, line := range wrap(text, Width, "    ") {
		fmt.Fprintln(b, line)
	}
}

// writeRefusalSentences says why: each pod a plugin refused, with the
// refusal's sentence; each preemptor's last scheduling event when the
// scheduler blocked preemptions; each pod the API server refused, with its
// message.
func writeRefusalSentences(b *bytes.Buffer, runs []Run, names []string) {
	var lines []string
	for i, run := range runs {
		for _, p := range run.Refusals {
			for _, rp := range p.Pods {
				lines = append(lines, fmt.Sprintf("%s: %s %s%s: %s", names[i], refusalLabel(p),
					podRef(rp.Namespace, rp.Name), times(rp.Count), rp.Message))
			}
		}
		for _, pod := range run.Pods {
			if pod.Blocked > 0 {
				lines = append(lines, fmt.Sprintf("%s: scheduler, preemptor %s%s: event PreemptionBlockedByBudget: %s", names[i],
					podRef(pod.Namespace, pod.Name), times(pod.Blocked), pod.BlockedMessage))
			}
		}
		type key struct{ label, pod, message string }
		var seen []key
		counts := map[key]int{}
		for _, ref := range run.Audit.Refusals {
			k := key{apiRefusalLabel(ref), podRef(ref.Namespace, ref.Pod), ref.Message}
			if counts[k] == 0 {
				seen = append(seen, k)
			}
			counts[k]++
		}
		for _, k := range seen {
			lines = append(lines, fmt.Sprintf("%s: %s %s%s: %s", names[i], k.label, k.pod, times(counts[k]), k.message))
		}
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintln(b, "why:")
	for _, l := range lines {
		writeLines(b, l)
	}
}

// stepOf returns the index in steps of the step during which t fell: the
// last step that began at or before t. -1 is before the first step; a time
// after the last step ended is len(steps).
func stepOf(steps []Step, t time.Time) int {
	if len(steps) > 0 && t.After(steps[len(steps)-1].Ended) {
		return len(steps)
	}
	i := -1
	for j, s := range steps {
		if !s.Began.After(t) {
			i = j
		}
	}
	return i
}

// writeDisruptionsByStep counts each run's disruptions by the step during
// which the API server received them. Steps with none in every run are
// left out, except deschedule steps.
func writeDisruptionsByStep(b *bytes.Buffer, runs []Run, names []string) {
	type label struct {
		number int
		text   string
	}
	stepLabel := func(s Step, steps int) label {
		return label{s.Number, fmt.Sprintf("%d/%d %s", s.Number, steps, s.Description)}
	}
	t := newTally[label](len(runs))
	for i, run := range runs {
		for _, s := range run.Steps {
			if s.Description == "deschedule" {
				t.add(i, stepLabel(s, len(run.Steps)), 0)
			}
		}
		if len(run.Steps) == 0 {
			continue
		}
		for _, d := range run.Audit.Disruptions {
			switch j := stepOf(run.Steps, d.Time); {
			case j < 0:
				t.add(i, label{0, "before the first step"}, 1)
			case j == len(run.Steps):
				t.add(i, label{j + 1, "after the last step"}, 1)
			default:
				t.add(i, stepLabel(run.Steps[j], len(run.Steps)), 1)
			}
		}
	}
	if len(t.keys) == 0 {
		return
	}
	section(b, "DISRUPTIONS BY STEP: the step during which the API server received them")
	tw := newTab(b)
	row(tw, append([]string{"STEP"}, names...)...)
	t.write(tw, func(a, b label) int { return cmp.Compare(a.number, b.number) },
		func(l label) []string { return []string{shorten(l.text, maxStep)} })
	_ = tw.Flush()
}

// writePods shows the scenario's own pods at the end of each run: where
// they are, how many pods were preempted for them, and whether
// cluster-autoscaler would scale up for them; then, for each pod still
// Pending, its state and its last scheduling event.
func writePods(b *bytes.Buffer, runs []Run, names []string) {
	if sum(runs, func(r Run) int { return len(r.Pods) }) == 0 {
		return
	}
	section(b, "PODS: the scenario's own pods at the end of the run")
	tw := newTab(b)
	row(tw, "RUN", "POD", "NODE", "VICTIMS", "AUTOSCALER SCALE-UP")
	var pending []string
	for i, run := range runs {
		for _, p := range run.Pods {
			node := shorten(p.Node, maxNode)
			if p.Node == "" {
				node = "Pending"
			}
			scaleUp := "no (" + sanitize(p.AutoscalerReason) + ")"
			if p.AutoscalerScaleUp {
				scaleUp = "yes"
			}
			row(tw, names[i], shortenPod(p.Namespace+"/"+p.Name, maxPod), node, fmt.Sprint(p.Victims), scaleUp)
			if p.Node == "" {
				pending = append(pending, pendingLine(names[i], p))
			}
		}
	}
	_ = tw.Flush()
	for _, l := range pending {
		writeLines(b, l)
	}
}

// pendingLine describes a pending pod for the PODS section.
func pendingLine(run string, p Pod) string {
	nominated := "not nominated"
	if p.NominatedNode != "" {
		nominated = "nominated to " + p.NominatedNode
	}
	state := "not Unschedulable"
	if p.Unschedulable {
		state = "Unschedulable"
	}
	yes := "no (" + p.AutoscalerReason + ")"
	if p.AutoscalerScaleUp {
		yes = "yes"
	}
	event := "no scheduling event"
	if p.Event != nil {
		event = fmt.Sprintf("last event %s%s: %s", p.Event.Reason, times(p.Event.Count), p.Event.Message)
	}
	return fmt.Sprintf("%s: %s Pending, %s, %s; cluster-autoscaler would scale up: %s; %s",
		run, podRef(p.Namespace, p.Name), nominated, state, yes, event)
}
