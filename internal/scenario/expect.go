package scenario

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	kjson "sigs.k8s.io/json"
)

// Expect is the header's optional expect block: what a run in each mode
// must show. sandbox run checks it after each run.
type Expect struct {
	Upstream    *Expectation `json:"upstream,omitempty"`
	Budgetguard *Expectation `json:"budgetguard,omitempty"`
}

// Expectation is what one run must show. Nil fields and absent keys are
// not checked.
type Expectation struct {
	// Disruptions is the number of disruptions the API server carried out.
	Disruptions *Count `json:"disruptions,omitempty"`
	// Violations is the number of budget violations the auditor saw.
	Violations *Count `json:"violations,omitempty"`
	// Refusals counts refusals by reason: a plugin's reason code (both
	// components together), the code and /filtered for pods the
	// descheduler's filters kept from the strategy, or apiserver-<code> for
	// the API server's.
	Refusals map[string]Count `json:"refusals,omitempty"`
	// Pods lists the scenario's Pod manifests that end bound or pending.
	Pods *PodsExpectation `json:"pods,omitempty"`
}

// PodsExpectation names pods, as namespace/name, by where they are at the
// end of the run.
type PodsExpectation struct {
	Bound   []string `json:"bound,omitempty"`
	Pending []string `json:"pending,omitempty"`
}

// Count is an expected number: exactly N (written N), at least N (">=N")
// or at most N ("<=N").
type Count struct {
	Min int
	// Max is -1 for no upper bound.
	Max int
}

// UnmarshalJSON reads N, ">=N" or "<=N".
func (c *Count) UnmarshalJSON(data []byte) error {
	var n int
	if err := json.Unmarshal(data, &n); err == nil {
		if n < 0 {
			return fmt.Errorf("must be at least 0, got %d", n)
		}
		*c = Count{Min: n, Max: n}
		return nil
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("want a number such as 2, or a string such as \">=1\" or \"<=3\"")
	}
	op, rest := s[:min(2, len(s))], strings.TrimSpace(s[min(2, len(s)):])
	n, err := strconv.Atoi(rest)
	if (op != ">=" && op != "<=") || err != nil || n < 0 {
		return fmt.Errorf("invalid count %q, want a number such as 2, or \">=N\" or \"<=N\" with N at least 0", s)
	}
	if op == ">=" {
		*c = Count{Min: n, Max: -1}
	} else {
		*c = Count{Min: 0, Max: n}
	}
	return nil
}

// MarshalJSON writes the count as it is read.
func (c Count) MarshalJSON() ([]byte, error) {
	return json.Marshal(c.String())
}

// Holds reports whether n is within the count.
func (c Count) Holds(n int) bool {
	return n >= c.Min && (c.Max < 0 || n <= c.Max)
}

// String is "2", ">=1" or "<=3".
func (c Count) String() string {
	switch {
	case c.Min == c.Max:
		return strconv.Itoa(c.Min)
	case c.Max < 0:
		return ">=" + strconv.Itoa(c.Min)
	}
	return "<=" + strconv.Itoa(c.Max)
}

// For returns the expectation of a mode ("upstream" or "budgetguard"), or
// nil.
func (e *Expect) For(mode string) *Expectation {
	switch {
	case e == nil:
		return nil
	case mode == "upstream":
		return e.Upstream
	case mode == "budgetguard":
		return e.Budgetguard
	}
	return nil
}

var (
	// ReasonKey matches the refusals key of a plugin reason, counting
	// refusals, or with /filtered, the pods the descheduler's filters kept
	// from the strategy for that reason.
	ReasonKey = regexp.MustCompile(`^([A-Z][A-Za-z0-9]*)(/filtered)?$`)
	// APIServerRefusalKey matches the refusals key of the API server's
	// refusals with a status code.
	APIServerRefusalKey = regexp.MustCompile(`^apiserver-([1-5][0-9][0-9])$`)
)

// parseExpect decodes and checks the expect block. Pod names are checked
// against the manifests later, by checkExpectPods.
func parseExpect(d *docErrors, raw json.RawMessage) *Expect {
	if raw == nil {
		return nil
	}
	var entries map[string]json.RawMessage
	if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &entries); err != nil || entries == nil {
		d.field("expect", "got %s, want a mapping with upstream, budgetguard or both", jsonKind(raw))
		return nil
	}
	e := &Expect{}
	decodeStep(d, raw, e, "expect")
	if len(entries) == 0 {
		d.field("expect", "empty; give upstream, budgetguard or both")
	}
	for _, m := range []struct {
		name string
		exp  *Expectation
	}{{"upstream", e.Upstream}, {"budgetguard", e.Budgetguard}} {
		if m.exp == nil {
			continue
		}
		field := "expect." + m.name
		for _, k := range slices.Sorted(maps.Keys(m.exp.Refusals)) {
			if !ReasonKey.MatchString(k) && !APIServerRefusalKey.MatchString(k) {
				d.field(fmt.Sprintf("%s.refusals[%s]", field, k), "unknown reason; want a reason code such as InsufficientBudget, a reason code and /filtered such as SafeToEvictFalse/filtered, or apiserver-<code> such as apiserver-429")
			}
		}
		if p := m.exp.Pods; p != nil {
			for _, name := range p.Bound {
				if slices.Contains(p.Pending, name) {
					d.field(field+".pods.pending", "%q is also in bound", name)
				}
			}
		}
	}
	return e
}

// checkExpectPods checks that every pod the expect block names is a Pod
// manifest of the scenario.
func checkExpectPods(c *collector, s *Scenario) {
	if s.Expect == nil {
		return
	}
	d := &docErrors{c: c, doc: 0, object: Kind}
	for _, m := range []struct {
		name string
		exp  *Expectation
	}{{"upstream", s.Expect.Upstream}, {"budgetguard", s.Expect.Budgetguard}} {
		if m.exp == nil || m.exp.Pods == nil {
			continue
		}
		for _, l := range []struct {
			name  string
			names []string
		}{{"bound", m.exp.Pods.Bound}, {"pending", m.exp.Pods.Pending}} {
			for i, name := range l.names {
				field := fmt.Sprintf("expect.%s.pods.%s[%d]", m.name, l.name, i)
				if !s.hasPod(name) {
					d.field(field, "%q is not a Pod manifest of the scenario; name one as namespace/name (pods of workloads have generated names)", name)
				}
			}
		}
	}
}

// hasPod reports whether namespace/name is a Pod manifest.
func (s *Scenario) hasPod(ref string) bool {
	ns, name, ok := strings.Cut(ref, "/")
	if !ok {
		return false
	}
	for _, o := range s.Objects {
		if p, isPod := o.Object.(*corev1.Pod); isPod && p.Namespace == ns && p.Name == name {
			return true
		}
	}
	return false
}
