package deschedulerpolicy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clientset "k8s.io/client-go/kubernetes"
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

// CheckPolicy decodes a DeschedulerPolicy strictly at every level: an
// unknown or duplicated field, at the top, in a profile, or in a plugin's
// args, is an error naming its path. Plugin args are then defaulted and
// validated, and errors name the field, e.g.
// "profiles[0].pluginConfig[1].args.cacheSyncTimeoutSeconds".
func CheckPolicy(data []byte, registry pluginregistry.Registry) error {
	if registry == nil {
		return errNoRegistry
	}
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return fmt.Errorf("not YAML or JSON: %w", err)
	}
	var policy v1alpha2.DeschedulerPolicy
	if err := strictUnmarshal(js, &policy, ""); err != nil {
		return err
	}
	if gv := v1alpha2.SchemeGroupVersion.String(); policy.APIVersion != gv || policy.Kind != "DeschedulerPolicy" {
		return fmt.Errorf("apiVersion/kind is %q/%q, want %q/%q", policy.APIVersion, policy.Kind, gv, "DeschedulerPolicy")
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
				if err := strictUnmarshal(pc.Args.Raw, args, path.Child("args").String()+"."); err != nil {
					errs = append(errs, err)
					continue
				}
			}
			if util.PluginArgDefaulter != nil {
				util.PluginArgDefaulter(args)
			}
			errs = append(errs, validateArgs(path.Child("args"), args, util))
		}
	}
	return utilerrors.NewAggregate(errs)
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

// strictUnmarshal decodes js into out, rejecting unknown and duplicate
// fields; prefix is prepended to the field paths the errors name.
func strictUnmarshal(js []byte, out any, prefix string) error {
	strictErrs, err := kjson.UnmarshalStrict(js, out)
	if err != nil {
		return fmt.Errorf("decoding %s: %w", strings.TrimSuffix(prefix, "."), err)
	}
	if len(strictErrs) > 0 && caseInsensitiveOK(js, out) {
		// The stock decoder matches field names case-insensitively, and
		// the upstream docs spell "preEvictionFilter" for the
		// "preevictionfilter" field. Accept case variants; still reject
		// duplicates.
		kept := strictErrs[:0]
		for _, e := range strictErrs {
			if !strings.HasPrefix(e.Error(), "unknown field") {
				kept = append(kept, e)
			}
		}
		strictErrs = kept
	}
	var errs []error
	for _, e := range strictErrs {
		msg := e.Error()
		// The decoder names the field as `unknown field "a.b"`; put the
		// path of the enclosing object in front.
		if i := strings.IndexByte(msg, '"'); i >= 0 && prefix != "" {
			msg = msg[:i+1] + prefix + msg[i+1:]
		}
		errs = append(errs, errors.New(msg))
	}
	return utilerrors.NewAggregate(errs)
}

// caseInsensitiveOK reports whether js decodes into a fresh value of out's
// type with encoding/json, which rejects unknown fields but matches names
// case-insensitively.
func caseInsensitiveOK(js []byte, out any) bool {
	fresh := reflect.New(reflect.TypeOf(out).Elem()).Interface()
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	return dec.Decode(fresh) == nil
}

func registeredNames(registry pluginregistry.Registry) []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	return names
}
