package scenario

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	kjson "sigs.k8s.io/json"
)

// Limits and defaults of the header's durations.
const (
	DefaultWaitTimeout = 60 * time.Second
	MaxDuration        = 10 * time.Minute
)

// rawHeader is document 0 as written; steps are decoded one by one so that
// a step can be told apart from a step with a null value.
type rawHeader struct {
	APIVersion  string            `json:"apiVersion"`
	Kind        string            `json:"kind"`
	Metadata    rawMetadata       `json:"metadata"`
	Description string            `json:"description,omitempty"`
	Scheduler   rawScheduler      `json:"scheduler"`
	Descheduler rawDescheduler    `json:"descheduler"`
	PUBWebhook  *bool             `json:"pubWebhook"`
	Steps       []json.RawMessage `json:"steps"`
	Expect      json.RawMessage   `json:"expect"`
}

type rawMetadata struct {
	Name string `json:"name"`
}

type rawScheduler struct {
	Config string `json:"config"`
}

type rawDescheduler struct {
	Policy string `json:"policy"`
}

// rawWait is a wait step as written.
type rawWait struct {
	PodsReady         *PodsReadyCondition    `json:"podsReady"`
	PodScheduled      *PodScheduledCondition `json:"podScheduled"`
	BudgetsObserved   *bool                  `json:"budgetsObserved"`
	Timeout           *string                `json:"timeout"`
	ContinueOnTimeout bool                   `json:"continueOnTimeout"`
}

// stepKeys are the keys of a step, in the order messages list them.
var stepKeys = []string{"apply", "wait", "setReadiness", "deschedule", "settle", "delete", "patch", "staysPending"}

// waitConditions are the keys of a wait's condition.
var waitConditions = []string{"podsReady", "podScheduled", "budgetsObserved"}

// applyRef is an apply step of the header, kept even when the step has
// other problems, so that its phase does not look unapplied.
type applyRef struct {
	step  int
	phase string
}

// parseHeader decodes and checks document 0 into s, reporting every problem
// through d. Steps that have problems are left out of s.Steps; applies lists
// every apply step that names a valid phase.
func parseHeader(s *Scenario, data []byte, baseDir string, d *docErrors) (applies []applyRef) {
	if kind := jsonKind(data); kind != "a mapping" {
		d.field("", "got %s, want the scenario header (a mapping with apiVersion: %s, kind: %s, metadata and steps)", kind, APIVersion, Kind)
		return nil
	}
	var h rawHeader
	for _, p := range decodeStrict(data, &h, "") {
		d.field(p.field, "%s", p.detail)
	}
	if h.APIVersion != APIVersion {
		d.field("apiVersion", "got %q, want %q", h.APIVersion, APIVersion)
	}
	if h.Kind != Kind {
		d.field("kind", "got %q, want %q (the first document is the scenario's header)", h.Kind, Kind)
	}
	s.Name = h.Metadata.Name
	if h.Metadata.Name == "" {
		d.field("metadata.name", "required")
	} else {
		checkLabel(d, "metadata.name", h.Metadata.Name)
	}
	s.Description = h.Description
	s.SchedulerConfig = resolveFile(d, "scheduler.config", h.Scheduler.Config, baseDir)
	s.DeschedulerPolicy = resolveFile(d, "descheduler.policy", h.Descheduler.Policy, baseDir)
	s.DisablePUBWebhook = h.PUBWebhook != nil && !*h.PUBWebhook
	if len(h.Steps) == 0 {
		d.field("steps", "required: at least one step, such as \"- apply: {phase: %s}\"", DefaultPhase)
	}
	s.Expect = parseExpect(d, h.Expect)
	for i, raw := range h.Steps {
		st, ok := parseStep(i, raw, d)
		if ok {
			s.Steps = append(s.Steps, st)
		}
		if st.Apply != nil && len(validation.IsDNS1123Label(st.Apply.Phase)) == 0 {
			applies = append(applies, applyRef{step: i, phase: st.Apply.Phase})
		}
	}
	return applies
}

// resolveFile resolves a file the header names, relative to baseDir, and
// checks that it is a regular file. "" stays "" (the shipped default).
func resolveFile(d *docErrors, field, name, baseDir string) string {
	if name == "" {
		return ""
	}
	resolved, where := name, ""
	if !filepath.IsAbs(name) {
		resolved = filepath.Join(baseDir, name)
		where = fmt.Sprintf(" (resolved relative to the scenario file as %s)", resolved)
	}
	fi, err := os.Stat(resolved)
	switch {
	case err != nil:
		d.field(field, "file %q%s: %v", name, where, unwrapPathError(err))
	case !fi.Mode().IsRegular():
		d.field(field, "file %q%s is not a regular file", name, where)
	}
	return resolved
}

func unwrapPathError(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

// parseStep decodes one entry of steps. ok is false when the step is too
// broken to keep.
func parseStep(i int, raw json.RawMessage, d *docErrors) (st Step, ok bool) {
	field := fmt.Sprintf("steps[%d]", i)
	st.Index = i
	var entries map[string]json.RawMessage
	if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &entries); err != nil || entries == nil {
		d.field(field, "got %s, want a mapping with one of %s", jsonKind(raw), strings.Join(stepKeys, ", "))
		return st, false
	}
	var known []string
	for _, k := range slices.Sorted(maps.Keys(entries)) {
		if slices.Contains(stepKeys, k) {
			known = append(known, k)
		} else {
			d.field(joinField(field, k), "unknown field; a step is one of %s", strings.Join(stepKeys, ", "))
		}
	}
	if len(known) != 1 {
		if len(known) > 1 {
			d.field(field, "has %s; a step has exactly one of %s", strings.Join(known, " and "), strings.Join(stepKeys, ", "))
		} else if len(entries) == 0 {
			d.field(field, "empty; a step has exactly one of %s", strings.Join(stepKeys, ", "))
		}
		return st, false
	}
	key := known[0]
	value := entries[key]
	field = joinField(field, key)
	before := d.c.total
	switch key {
	case "apply":
		st.Apply = &ApplyStep{}
		decodeStep(d, value, st.Apply, field)
		if st.Apply.Phase == "" {
			d.field(field+".phase", "required, such as %q", DefaultPhase)
		} else {
			checkLabel(d, field+".phase", st.Apply.Phase)
		}
	case "wait":
		st.Wait = parseWait(d, value, field)
	case "setReadiness":
		st.SetReadiness = &SetReadinessStep{}
		decodeStep(d, value, st.SetReadiness, field)
		checkNamespace(d, field+".namespace", st.SetReadiness.Namespace)
		checkSelector(d, field+".selector", st.SetReadiness.Selector)
		if err := checkReadiness(st.SetReadiness.Readiness); err != "" {
			d.field(field+".readiness", "%s", err)
		}
	case "deschedule":
		st.Deschedule = &DescheduleStep{}
		decodeStep(d, value, st.Deschedule, field)
	case "settle":
		var text string
		if ps := decodeStrict(value, &text, field); len(ps) > 0 {
			d.field(field, "got %s, want a duration such as 5s", jsonKind(value))
			return st, false
		}
		dur, ok := checkDuration(d, field, text)
		if !ok {
			return st, false
		}
		st.Settle = &SettleStep{Duration: dur}
	case "delete":
		st.Delete = &DeleteStep{}
		decodeStep(d, value, st.Delete, field)
		checkObjectRef(d, field, st.Delete.Kind, st.Delete.Namespace, st.Delete.Name)
	case "patch":
		st.Patch = &PatchStep{}
		decodeStep(d, value, st.Patch, field)
		checkObjectRef(d, field, st.Patch.Kind, st.Patch.Namespace, st.Patch.Name)
		if k := jsonKind(st.Patch.Patch); k != "a mapping" || strings.TrimSpace(strings.ReplaceAll(string(st.Patch.Patch), " ", "")) == "{}" {
			d.field(field+".patch", "got %s, want a JSON merge patch: a mapping such as {spec: {maxUnavailable: 0}}", describePatch(k))
		}
	case "staysPending":
		st.StaysPending = parseStaysPending(d, value, field)
	}
	return st, d.c.total == before
}

// decodeStep decodes the value of a step key; null counts as {}.
func decodeStep(d *docErrors, value json.RawMessage, into any, field string) {
	for _, p := range decodeStrict(value, into, field) {
		d.field(p.field, "%s", p.detail)
	}
}

func parseWait(d *docErrors, value json.RawMessage, field string) *WaitStep {
	var rw rawWait
	decodeStep(d, value, &rw, field)
	w := &WaitStep{Timeout: DefaultWaitTimeout, ContinueOnTimeout: rw.ContinueOnTimeout}
	var set []string
	if rw.PodsReady != nil {
		set = append(set, "podsReady")
		c := rw.PodsReady
		f := field + ".podsReady"
		checkNamespace(d, f+".namespace", c.Namespace)
		checkSelector(d, f+".selector", c.Selector)
		if c.Count < 1 {
			d.field(f+".count", "must be at least 1")
		}
		w.PodsReady = c
	}
	if rw.PodScheduled != nil {
		set = append(set, "podScheduled")
		c := rw.PodScheduled
		f := field + ".podScheduled"
		checkNamespace(d, f+".namespace", c.Namespace)
		if c.Name == "" {
			d.field(f+".name", "required: the pod's name")
		} else {
			checkSubdomain(d, f+".name", c.Name)
		}
		w.PodScheduled = c
	}
	if rw.BudgetsObserved != nil {
		set = append(set, "budgetsObserved")
		if !*rw.BudgetsObserved {
			d.field(field+".budgetsObserved", "must be true (set another condition instead of false)")
		}
		w.BudgetsObserved = *rw.BudgetsObserved
	}
	switch {
	case len(set) == 0:
		d.field(field, "no condition; a wait has exactly one of %s", strings.Join(waitConditions, ", "))
	case len(set) > 1:
		d.field(field, "has %s; a wait has exactly one of %s", strings.Join(set, " and "), strings.Join(waitConditions, ", "))
	}
	if rw.Timeout != nil {
		if dur, ok := checkDuration(d, field+".timeout", *rw.Timeout); ok {
			w.Timeout = dur
		}
	}
	return w
}

// checkDuration parses a duration that must be > 0 and at most MaxDuration.
func checkDuration(d *docErrors, field, text string) (time.Duration, bool) {
	dur, err := time.ParseDuration(text)
	switch {
	case err != nil:
		d.field(field, "invalid duration %q, want one such as 5s or 1m30s", text)
	case dur <= 0:
		d.field(field, "must be greater than 0, got %s", text)
	case dur > MaxDuration:
		d.field(field, "must be at most %s, got %s", MaxDuration, text)
	default:
		return dur, true
	}
	return 0, false
}

// checkReadiness returns what is wrong with a readiness value, or "". The
// rules are the sandbox kubelet's: ready, never, crashloop, or after= and a
// non-negative duration.
func checkReadiness(v string) string {
	switch v {
	case "ready", "never", "crashloop":
		return ""
	case "":
		return "required: ready, never, crashloop or after=<duration>"
	}
	if rest, ok := strings.CutPrefix(v, "after="); ok {
		if dur, err := time.ParseDuration(rest); err == nil && dur >= 0 {
			return ""
		}
	}
	return fmt.Sprintf("unsupported value %q: want ready, never, crashloop or after=<duration> such as after=5s", v)
}

func checkLabel(d *docErrors, field, v string) {
	for _, msg := range validation.IsDNS1123Label(v) {
		d.field(field, "%q: %s", v, msg)
	}
}

func checkSubdomain(d *docErrors, field, v string) {
	for _, msg := range validation.IsDNS1123Subdomain(v) {
		d.field(field, "%q: %s", v, msg)
	}
}

func checkNamespace(d *docErrors, field, v string) {
	if v == "" {
		d.field(field, "required")
		return
	}
	checkLabel(d, field, v)
}

// checkSelector checks a label selector in the syntax of kubectl -l. An
// empty selector selects every pod of the namespace.
func checkSelector(d *docErrors, field, v string) {
	if _, err := labels.Parse(v); err != nil {
		d.field(field, "invalid label selector %q: %v", v, err)
	}
}

// jsonKind names the kind of a JSON value for messages.
func jsonKind(raw json.RawMessage) string {
	s := strings.TrimSpace(string(raw))
	if s == "" {
		return "nothing"
	}
	switch s[0] {
	case '{':
		return "a mapping"
	case '[':
		return "a list"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}
