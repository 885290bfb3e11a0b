package deschedulerpolicy

import (
	"errors"

	"sigs.k8s.io/descheduler/pkg/descheduler"
	"sigs.k8s.io/descheduler/pkg/framework/pluginregistry"

	"github.com/budgetguard/budgetguard/plugins/budgetevictor"
)

// SetupPlugins replaces the global registry with the stock plugins, as the
// stock SetupPlugins does, and then adds BudgetAwareEvictor built with opts.
func SetupPlugins(opts budgetevictor.Options) {
	descheduler.SetupPlugins()
	budgetevictor.Register(pluginregistry.PluginRegistry, opts)
}

var errNoRegistry = errors.New("the descheduler plugin registry is not set up")
