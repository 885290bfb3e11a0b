package main

// TEMPORARY: stand-ins for internal/report's New, WriteTable and WriteJSON
// until that package's implementation lands.

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/budgetguard/budgetguard/internal/report"
)

func reportNew(name, path string, runs ...report.Run) *report.Report {
	return &report.Report{SchemaVersion: report.SchemaVersion, Scenario: name, Path: path, Runs: runs}
}

func reportWriteJSON(w io.Writer, r *report.Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func reportWriteTable(w io.Writer, r *report.Report) error {
	for _, run := range r.Runs {
		fmt.Fprintf(w, "%s: %d disruptions, %d violations, refusals %v, notes %v\n", run.Mode, len(run.Audit.Disruptions), len(run.Audit.Violations), run.Refusals, run.Notes)
	}
	return nil
}
