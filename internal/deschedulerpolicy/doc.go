// Package deschedulerpolicy sets up the descheduler's plugin registry with
// BudgetAwareEvictor and loads DeschedulerPolicy files strictly. The stock
// loader (pkg/descheduler/policyconfig.go) decodes with the apimachinery
// JSON serializer, which matches field names case-sensitively and drops
// unknown ones without a word; CheckPolicy decodes the same way and refuses
// what would be dropped: an unknown, duplicated or miscased field at any
// level (naming the spelling to write), a v1alpha1 policy, a plugin the
// registry lacks, plugin args that do not validate, and a BudgetAwareEvictor
// that is configured but not enabled at both filter and preevictionfilter.
// Every error names its field path.
//
// The budgetguard descheduler binary (cmd/descheduler) and the sandbox
// (internal/runner) both load policies through it; ValidatePolicyFile is
// the binary's --validate-only, and ProfilePlugins what it reports at start.
// It mirrors the descheduler's own policyconfig.go and setupplugins.go.
package deschedulerpolicy
