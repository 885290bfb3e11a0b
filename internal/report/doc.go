// Package report renders what a sandbox run saw, as a table for people and
// as JSON for programs (docs/report.md documents the schema).
package report
