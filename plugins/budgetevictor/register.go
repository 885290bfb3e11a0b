package budgetevictor

import (
	"k8s.io/apimachinery/pkg/runtime"
)

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
			SetDefaultsBudgetAwareEvictorArgs(o)
		}
	})
	return nil
}
