package budgetevictor

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/descheduler/pkg/framework/pluginregistry"
)

// Kind is the kind of the plugin's arguments in a DeschedulerPolicy.
const Kind = PluginName + "Args"

var (
	// SchemeBuilder collects the functions that add this plugin's args
	// defaulting to a scheme.
	SchemeBuilder      = runtime.NewSchemeBuilder()
	localSchemeBuilder = &SchemeBuilder
	// AddToScheme adds the args defaulting functions to a scheme.
	AddToScheme = localSchemeBuilder.AddToScheme
)

func init() {
	localSchemeBuilder.Register(addDefaultingFuncs)
}

func addDefaultingFuncs(scheme *runtime.Scheme) error {
	scheme.AddTypeDefaultingFunc(&BudgetAwareEvictorArgs{}, func(obj any) {
		if o, ok := obj.(runtime.Object); ok {
			setDefaults(o)
		}
	})
	return nil
}

// Register adds the plugin, built with opts, to registry. Call it after the
// descheduler's SetupPlugins, which replaces the global registry.
func Register(registry pluginregistry.Registry, opts Options) {
	pluginregistry.Register(PluginName, NewBuilder(opts), &BudgetAwareEvictor{}, &BudgetAwareEvictorArgs{}, validateArgs, setDefaults, registry)
}

// setDefaults adapts SetDefaultsBudgetAwareEvictorArgs to the descheduler
// registry's defaulter signature; it leaves args of another type alone.
func setDefaults(obj runtime.Object) {
	if args, ok := obj.(*BudgetAwareEvictorArgs); ok {
		SetDefaultsBudgetAwareEvictorArgs(args)
	}
}

// validateArgs adapts ValidateBudgetAwareEvictorArgs to the descheduler
// registry's validator signature; its errors name the field below "args".
func validateArgs(obj runtime.Object) error {
	args, ok := obj.(*BudgetAwareEvictorArgs)
	if !ok {
		return fmt.Errorf("want args of type *%s, got %T", Kind, obj)
	}
	return ValidateBudgetAwareEvictorArgs(field.NewPath("args"), args)
}
