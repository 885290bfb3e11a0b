package deschedulerpolicy

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	kjson "sigs.k8s.io/json"

	"github.com/budgetguard/budgetguard/internal/jsonfields"
)

// The descheduler decodes a policy with the apimachinery JSON serializer
// of its scheme (pkg/descheduler/policyconfig.go, decode): not strict, so
// kjson.UnmarshalCaseSensitivePreserveInts
// (k8s.io/apimachinery/pkg/runtime/serializer/json/json.go, unmarshal). It
// matches field names exactly and drops every other key without a word,
// including a known field written in another case ("preEvictionFilter"
// for "preevictionfilter"). Plugin args go through the strict v1alpha2
// codec (pkg/api/v1alpha2/conversion.go), which matches names exactly too.
// decodeStrict decodes the same way, with kjson.UnmarshalStrict, and
// reports what the descheduler would drop.

// decodeStrict decodes the JSON js into out, matching field names exactly
// as the descheduler does, and returns an error for each unknown or
// duplicated field and for a value of the wrong type. path is where js is
// in the policy ("" for the whole document); the errors name fields by
// their path below it.
func decodeStrict(js []byte, out any, path string) error {
	strictErrs, err := kjson.UnmarshalStrict(js, out)
	if err != nil {
		where := path
		if where == "" {
			where = "policy"
		}
		return fmt.Errorf("%s: %w", where, err)
	}
	if len(strictErrs) == 0 {
		return nil
	}
	var doc any
	if err := kjson.UnmarshalCaseSensitivePreserveInts(js, &doc); err != nil {
		doc = nil // only used to tell a case variant from a duplicate
	}
	errs := make([]error, 0, len(strictErrs))
	for _, e := range strictErrs {
		errs = append(errs, describeStrictError(e, reflect.TypeOf(out), doc, path))
	}
	return utilerrors.NewAggregate(errs)
}

// describeStrictError puts path in front of the field path e names and,
// when e is an unknown field that is a known one written in another case,
// says what to write instead.
func describeStrictError(e error, t reflect.Type, doc any, path string) error {
	var fe kjson.FieldError
	if !errors.As(e, &fe) {
		return e
	}
	rel := fe.FieldPath()
	full := rel
	if path != "" {
		full = path + "." + rel
	}
	fe.SetFieldPath(full)
	if !strings.HasPrefix(e.Error(), "unknown field") {
		return e
	}
	parent, name := "", rel
	if i := strings.LastIndexByte(rel, '.'); i >= 0 {
		parent, name = rel[:i], rel[i+1:]
	}
	pt, ok := typeAt(t, parent)
	if !ok {
		return e
	}
	want := caseVariantOf(pt, name)
	if want == "" {
		return e
	}
	if m, ok := valueAt(doc, parent); ok {
		if obj, ok := m.(map[string]any); ok {
			if _, set := obj[want]; set {
				return fmt.Errorf("%s: unknown field; field names are case-sensitive and %q is set as well: remove %q", full, want, name)
			}
		}
	}
	return fmt.Errorf("%s: unknown field; field names are case-sensitive, write %q", full, want)
}

// caseVariantOf returns the JSON name of the field of struct type t that
// name spells in another case, or "".
func caseVariantOf(t reflect.Type, name string) string {
	for _, f := range jsonfields.Of(t) {
		if f.Name != name && strings.EqualFold(f.Name, name) {
			return f.Name
		}
	}
	return ""
}

// pathStep is one step of a field path such as "profiles[0].plugins": a
// key, or an index when key is "".
type pathStep struct {
	key   string
	index int
}

// parsePath splits a field path in the form kjson writes it. It does not
// handle keys that contain '.' or '['; the callers then find nothing.
func parsePath(path string) ([]pathStep, bool) {
	if path == "" {
		return nil, true
	}
	var steps []pathStep
	for _, seg := range strings.Split(path, ".") {
		key, rest, _ := strings.Cut(seg, "[")
		if key != "" {
			steps = append(steps, pathStep{key: key})
		}
		for rest != "" {
			n, after, ok := strings.Cut(rest, "]")
			i, err := strconv.Atoi(n)
			if !ok || err != nil {
				return nil, false
			}
			steps = append(steps, pathStep{index: i})
			rest = strings.TrimPrefix(after, "[")
		}
	}
	return steps, true
}

// typeAt returns the type of the value at path below a value of type t.
func typeAt(t reflect.Type, path string) (reflect.Type, bool) {
	steps, ok := parsePath(path)
	if !ok {
		return nil, false
	}
	t = deref(t)
	for _, s := range steps {
		switch {
		case s.key == "" && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
			t = deref(t.Elem())
		case s.key != "" && t.Kind() == reflect.Map:
			t = deref(t.Elem())
		case s.key != "" && t.Kind() == reflect.Struct:
			ft, ok := jsonfields.Lookup(t, s.key)
			if !ok {
				return nil, false
			}
			t = deref(ft)
		default:
			return nil, false
		}
	}
	return t, true
}

// valueAt returns the value at path in doc, a decoded JSON document.
func valueAt(doc any, path string) (any, bool) {
	steps, ok := parsePath(path)
	if !ok {
		return nil, false
	}
	for _, s := range steps {
		switch v := doc.(type) {
		case map[string]any:
			if s.key == "" {
				return nil, false
			}
			if doc, ok = v[s.key]; !ok {
				return nil, false
			}
		case []any:
			if s.key != "" || s.index < 0 || s.index >= len(v) {
				return nil, false
			}
			doc = v[s.index]
		default:
			return nil, false
		}
	}
	return doc, true
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// checkShape checks that the parts of the policy document top that hold
// other objects are of the right JSON kind, so that the error names them:
// profiles is a list of mappings, and each profile's pluginConfig a list of
// mappings whose args are a mapping. A null is left to the decoder, which
// takes it as empty, as the descheduler does.
func checkShape(top map[string]any) error {
	var errs []error
	profiles, err := listAt("profiles", top["profiles"], "profiles")
	if err != nil {
		return err
	}
	for i, p := range profiles {
		ppath := fmt.Sprintf("profiles[%d]", i)
		prof, err := mappingAt(ppath, p, "a profile")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		configs, err := listAt(ppath+".pluginConfig", prof["pluginConfig"], "plugin configs")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for j, c := range configs {
			cpath := fmt.Sprintf("%s.pluginConfig[%d]", ppath, j)
			pc, err := mappingAt(cpath, c, "a plugin's name and args")
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if _, err := mappingAt(cpath+".args", pc["args"], "the plugin's args"); err != nil {
				errs = append(errs, err)
			}
		}
		if _, err := mappingAt(ppath+".plugins", prof["plugins"], "extension points"); err != nil {
			errs = append(errs, err)
		}
	}
	return utilerrors.NewAggregate(errs)
}

// mappingAt returns v, at path, as a mapping; what says what it should hold.
func mappingAt(path string, v any, what string) (map[string]any, error) {
	switch m := v.(type) {
	case nil:
		return nil, nil
	case map[string]any:
		return m, nil
	}
	return nil, fmt.Errorf("%s: must be a mapping (%s), got %s", path, what, kindOf(v))
}

// listAt returns v, at path, as a list; of says what it should hold.
func listAt(path string, v any, of string) ([]any, error) {
	switch l := v.(type) {
	case nil:
		return nil, nil
	case []any:
		return l, nil
	}
	return nil, fmt.Errorf("%s: must be a list of %s, got %s", path, of, kindOf(v))
}

// kindOf names the JSON kind of v, a decoded JSON value.
func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	default:
		return "a number"
	}
}
