// Package app wraps the stock descheduler command: it registers
// BudgetAwareEvictor after the stock SetupPlugins (which replaces the plugin
// registry), checks the policy file strictly with package
// internal/deschedulerpolicy before the stock, lenient decoding runs, and
// reports where BudgetAwareEvictor is enabled in each profile. It adds
// --validate-only (check the policy without a cluster) and --version, and
// replaces the stock version command. It holds flags and wiring only.
package app
