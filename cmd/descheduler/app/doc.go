// Package app wraps the stock descheduler command: it registers
// BudgetAwareEvictor after the stock SetupPlugins (which replaces the plugin
// registry) and checks the policy file strictly, with package
// internal/deschedulerpolicy, before the stock, lenient decoding runs. It
// holds flags and wiring only.
package app
