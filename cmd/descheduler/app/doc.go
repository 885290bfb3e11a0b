// Package app wraps the stock descheduler command: it registers
// BudgetAwareEvictor after the stock SetupPlugins (which replaces the plugin
// registry) and checks the policy file strictly, at every level, before the
// stock, lenient decoding runs.
package app
