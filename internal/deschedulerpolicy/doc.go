// Package deschedulerpolicy sets up the descheduler's plugin registry with
// BudgetAwareEvictor and loads DeschedulerPolicy files strictly: an unknown
// or duplicated field at any level, a plugin the registry lacks, or plugin
// args that do not validate is an error that names its field. The budgetguard
// descheduler binary (cmd/descheduler) and the sandbox (internal/runner) both
// load policies through it. It mirrors the descheduler's own
// pkg/descheduler/policyconfig.go and setupplugins.go, which decode leniently.
package deschedulerpolicy
