package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/budgetguard/budgetguard/internal/audit"
)

// New returns the report of a scenario's runs: one run, or two (upstream
// first, then budgetguard) for a comparison.
func New(scenarioName, path string, runs ...Run) *Report {
	return &Report{SchemaVersion: SchemaVersion, Scenario: scenarioName, Path: path, Runs: runs}
}

// WriteJSON writes r as indented JSON, with SchemaVersion set and every list
// present (empty lists as [], never null), so programs need not tell a
// missing list from an empty one. r is not changed.
func WriteJSON(w io.Writer, r *Report) error {
	if r == nil {
		return errors.New("report: nil report")
	}
	out := normalized(r)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("report: write JSON: %w", err)
	}
	return nil
}

// normalized returns a copy of r with SchemaVersion set and nil lists
// replaced by empty ones.
func normalized(r *Report) *Report {
	out := *r
	out.SchemaVersion = SchemaVersion
	out.Runs = make([]Run, len(r.Runs))
	for i, run := range r.Runs {
		run.Refusals = orEmpty(run.Refusals)
		for j := range run.Refusals {
			run.Refusals[j].Pods = orEmpty(run.Refusals[j].Pods)
		}
		run.Steps = orEmpty(run.Steps)
		run.Pods = orEmpty(run.Pods)
		run.Audit = normalizedAudit(run.Audit)
		out.Runs[i] = run
	}
	return &out
}

func normalizedAudit(a audit.Result) audit.Result {
	a.Budgets = orEmpty(a.Budgets)
	a.Disruptions = orEmpty(a.Disruptions)
	a.Refusals = orEmpty(a.Refusals)
	a.Violations = orEmpty(a.Violations)
	a.Races = orEmpty(a.Races)
	a.Disagreements = orEmpty(a.Disagreements)
	for i := range a.Races {
		a.Races[i].Disruption.Budgets = orEmpty(a.Races[i].Disruption.Budgets)
	}
	for i := range a.Disagreements {
		a.Disagreements[i].Disruption.Budgets = orEmpty(a.Disagreements[i].Disruption.Budgets)
	}
	for i := range a.Disruptions {
		a.Disruptions[i].Budgets = orEmpty(a.Disruptions[i].Budgets)
	}
	for i := range a.Violations {
		a.Violations[i].Disruption.Budgets = orEmpty(a.Violations[i].Disruption.Budgets)
	}
	return a
}

// orEmpty returns s, or an empty slice for nil. A non-nil s is copied, so
// that setting fields of its elements does not change the caller's.
func orEmpty[T any](s []T) []T {
	return append(make([]T, 0, len(s)), s...)
}
