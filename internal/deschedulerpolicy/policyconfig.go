package deschedulerpolicy

import (
	"fmt"
	"maps"
	"os"
	"slices"

	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"sigs.k8s.io/descheduler/pkg/api"
	"sigs.k8s.io/descheduler/pkg/api/v1alpha2"
	"sigs.k8s.io/descheduler/pkg/descheduler"
	"sigs.k8s.io/descheduler/pkg/framework/pluginregistry"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/budgetguard/budgetguard/plugins/budgetevictor"
)

// LoadPolicy is the binary's own policy decoding: the strict check of
// CheckPolicy, then the stock decoding, validation and defaulting.
func LoadPolicy(path string, client clientset.Interface, registry pluginregistry.Registry) (*api.DeschedulerPolicy, error) {
	if err := CheckPolicyFile(path, registry); err != nil {
		return nil, err
	}
	return descheduler.LoadPolicyConfig(path, client, registry)
}

// ValidatePolicyFile is LoadPolicy without a cluster, for --validate-only
// and for the report at start: CheckPolicyFile, then the stock decoding,
// validation and defaulting with a fake client. The one thing it cannot
// check is the PriorityClass a DefaultEvictor priorityThreshold names: the
// fake client answers every PriorityClass, with value 0, which is also the
// threshold in the policy it returns.
func ValidatePolicyFile(path string, registry pluginregistry.Registry) (*api.DeschedulerPolicy, error) {
	if err := CheckPolicyFile(path, registry); err != nil {
		return nil, err
	}
	policy, err := descheduler.LoadPolicyConfig(path, offlineClient(), registry)
	if err != nil {
		return nil, fmt.Errorf("descheduler policy %q: %w", path, err)
	}
	return policy, nil
}

// offlineClient is a fake clientset for the stock defaulting, which looks
// up the PriorityClass a DefaultEvictor priorityThreshold names.
func offlineClient() clientset.Interface {
	client := fake.NewClientset()
	client.PrependReactor("get", "priorityclasses", func(action clienttesting.Action) (bool, runtime.Object, error) {
		name := action.(clienttesting.GetAction).GetName()
		return true, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}}, nil
	})
	return client
}

// CheckPolicyFile reads path and checks it with CheckPolicy.
func CheckPolicyFile(path string, registry pluginregistry.Registry) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading descheduler policy: %w", err)
	}
	if err := CheckPolicy(data, registry); err != nil {
		return fmt.Errorf("descheduler policy %q: %w", path, err)
	}
	return nil
}

// CheckPolicy checks a DeschedulerPolicy as the descheduler will decode it,
// and refuses what it would drop or misread without a word. In order:
//
//   - the document is a mapping, its apiVersion is descheduler/v1alpha2
//     (v1alpha1 is named as unsupported) and its kind DeschedulerPolicy;
//   - profiles, each profile, its pluginConfig entries and their args are
//     of the right kind (a list or a mapping);
//   - every field at every level, plugin args included, is known and set
//     once, with its name in the exact case (the descheduler matches names
//     case-sensitively and drops the rest); a name written in another case
//     gets the spelling to write;
//   - plugin args are defaulted and validated;
//   - every plugin enabled at deschedule, balance, filter or
//     preevictionfilter is registered, runs at that point and is
//     configured, as the descheduler requires at start (see
//     checkEnabledPlugins);
//   - BudgetAwareEvictor, where a profile has it, is configured and enabled
//     at filter and preevictionfilter (see checkBudgetAwareEvictor).
//
// Errors name the field, e.g.
// "profiles[0].pluginConfig[1].args.cacheSyncTimeoutSeconds".
func CheckPolicy(data []byte, registry pluginregistry.Registry) error {
	if registry == nil {
		return errNoRegistry
	}
	lenient, err := yaml.YAMLToJSON(data)
	if err != nil {
		return fmt.Errorf("not YAML or JSON: %w", err)
	}
	var doc any
	if err := kjson.UnmarshalCaseSensitivePreserveInts(lenient, &doc); err != nil {
		return fmt.Errorf("not YAML or JSON: %w", err)
	}
	top, err := checkHeader(doc)
	if err != nil {
		return err
	}
	if err := checkShape(top); err != nil {
		return err
	}
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return fmt.Errorf("policy: %w", err)
	}
	var policy v1alpha2.DeschedulerPolicy
	if err := decodeStrict(js, &policy, ""); err != nil {
		return err
	}
	var errs []error
	for i, prof := range policy.Profiles {
		for j, pc := range prof.PluginConfigs {
			path := field.NewPath("profiles").Index(i).Child("pluginConfig").Index(j)
			util, ok := registry[pc.Name]
			if !ok {
				errs = append(errs, field.NotSupported(path.Child("name"), pc.Name, registeredNames(registry)))
				continue
			}
			args := util.PluginArgInstance.DeepCopyObject()
			if len(pc.Args.Raw) > 0 {
				if err := decodeStrict(pc.Args.Raw, args, path.Child("args").String()); err != nil {
					errs = append(errs, err)
					continue
				}
			}
			if util.PluginArgDefaulter != nil {
				util.PluginArgDefaulter(args)
			}
			errs = append(errs, validateArgs(path.Child("args"), args, util))
		}
		errs = append(errs, checkEnabledPlugins(i, prof, registry)...)
		errs = append(errs, checkBudgetAwareEvictor(i, prof)...)
	}
	return utilerrors.NewAggregate(errs)
}

// checkHeader returns the policy document doc as a mapping after checking
// its apiVersion, before anything else, and its kind.
func checkHeader(doc any) (map[string]any, error) {
	top, ok := doc.(map[string]any)
	if !ok {
		got := kindOf(doc)
		if doc == nil {
			got = "an empty document"
		}
		return nil, fmt.Errorf("policy: must be a mapping (a DeschedulerPolicy object), got %s", got)
	}
	apiVersion, _ := top["apiVersion"].(string)
	kind, _ := top["kind"].(string)
	want := v1alpha2.SchemeGroupVersion.String()
	if apiVersion == "descheduler/v1alpha1" {
		return nil, fmt.Errorf("apiVersion: descheduler/v1alpha1 is not supported; use %s (its strategies are now plugins of profiles)", want)
	}
	if apiVersion != want || kind != "DeschedulerPolicy" {
		return nil, fmt.Errorf("apiVersion/kind is %q/%q, want %q/%q", apiVersion, kind, want, "DeschedulerPolicy")
	}
	return top, nil
}

func validateArgs(path *field.Path, args runtime.Object, util pluginregistry.PluginUtilities) error {
	if a, ok := args.(*budgetevictor.BudgetAwareEvictorArgs); ok {
		return budgetevictor.ValidateBudgetAwareEvictorArgs(path, a)
	}
	if util.PluginArgValidator == nil {
		return nil
	}
	if err := util.PluginArgValidator(args); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// registeredNames returns the names of the plugins in registry, sorted.
func registeredNames(registry pluginregistry.Registry) []string {
	return slices.Sorted(maps.Keys(registry))
}
