package report

import (
	"time"

	"github.com/budgetguard/budgetguard/internal/audit"
)

// SchemaVersion is the version of the JSON report; docs/report.md documents it.
const SchemaVersion = "sandbox.budgetguard.io/report/v1"

// Mode says which plugins a run used.
type Mode string

const (
	// ModeUpstream: DefaultPreemption and DefaultEvictor only.
	ModeUpstream Mode = "upstream"
	// ModeBudgetguard: BudgetAwarePreemption and BudgetAwareEvictor.
	ModeBudgetguard Mode = "budgetguard"
)

// Report is what `sandbox run` prints.
type Report struct {
	SchemaVersion string `json:"schemaVersion"`
	Scenario      string `json:"scenario"`
	Path          string `json:"path"`
	Runs          []Run  `json:"runs"`
}

// Run is one execution of the scenario.
type Run struct {
	Mode     Mode          `json:"mode"`
	Duration time.Duration `json:"durationNanoseconds"`
	// Refusals counts budgetguard's own refusals by component and reason,
	// read from its plugins' metrics (always empty in upstream mode).
	Refusals []PluginRefusal `json:"pluginRefusals"`
	Audit    audit.Result    `json:"audit"`
	// Notes are step outcomes worth telling, such as a wait that timed out
	// with continueOnTimeout.
	Notes []string `json:"notes,omitempty"`
}

// PluginRefusal is a count of refusals of one reason by one plugin.
type PluginRefusal struct {
	Component audit.Component `json:"component"`
	Reason    string          `json:"reason"`
	Count     int             `json:"count"`
}
