package scenario

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"
	kjson "sigs.k8s.io/json"

	"github.com/budgetguard/budgetguard/internal/jsonfields"
)

// fieldProblem is a problem at a field path; field "" is the value itself.
type fieldProblem struct {
	field  string
	detail string
	// strict marks an unknown field or a field set twice: the value still
	// decoded in full.
	strict bool
}

// decodeStrict decodes JSON into the value into points to, case-sensitively,
// and reports unknown fields, fields set twice, and values of the wrong type
// or format, each with its field path below prefix.
func decodeStrict(data []byte, into any, prefix string) []fieldProblem {
	strictErrs, err := kjson.UnmarshalStrict(data, into)
	if err != nil {
		leaf := locate(reflect.TypeOf(into), data, "")
		var typeErr *json.UnmarshalTypeError
		if leaf.path == "" && errors.As(err, &typeErr) {
			leaf.path = typeErr.Field
		}
		if leaf.err == nil {
			leaf.err = err
		}
		return []fieldProblem{{field: joinField(prefix, leaf.path), detail: leaf.detail()}}
	}
	var out []fieldProblem
	for _, e := range strictErrs {
		var fe kjson.FieldError
		if !errors.As(e, &fe) {
			out = append(out, fieldProblem{field: prefix, detail: e.Error()})
			continue
		}
		detail := "unknown field"
		if strings.HasPrefix(e.Error(), "duplicate field") {
			detail = "set twice"
		}
		out = append(out, fieldProblem{field: joinField(prefix, fe.FieldPath()), detail: detail, strict: true})
	}
	return out
}

// joinField joins two field paths: "steps[2]" + "wait.timeout".
func joinField(prefix, field string) string {
	switch {
	case prefix == "":
		return field
	case field == "":
		return prefix
	case strings.HasPrefix(field, "["):
		return prefix + field
	default:
		return prefix + "." + field
	}
}

// culprit is the innermost value that failed to decode.
type culprit struct {
	path string
	typ  reflect.Type // the Go type it should have decoded into; nil if unknown
	err  error
}

// detail words the decoding error for a person: "wrong type: got a list,
// want an integer".
func (c culprit) detail() string {
	var typeErr *json.UnmarshalTypeError
	if errors.As(c.err, &typeErr) {
		want := describeType(typeErr.Type)
		if t := c.typ; t != nil && (t == intOrStringType || t.Kind() == reflect.Pointer && t.Elem() == intOrStringType) {
			want = "an integer or a string such as 50%"
		}
		got := describeJSONValue(typeErr.Value)
		detail := fmt.Sprintf("wrong type: got %s, want %s", got, want)
		if want == "a string" && (got == "a number" || got == "a boolean") {
			detail += " (quote the value)"
		}
		return detail
	}
	if ok, _ := kjson.SyntaxErrorOffset(c.err); ok {
		return "invalid JSON: " + c.err.Error()
	}
	return c.err.Error()
}

var intOrStringType = reflect.TypeFor[intstr.IntOrString]()

// describeType names a Go type the way a YAML author thinks of it.
func describeType(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	}
	return t.String()
}

// describeJSONValue names the Value of a json.UnmarshalTypeError ("array",
// "number 4.5", ...) in YAML terms.
func describeJSONValue(v string) string {
	switch {
	case v == "object":
		return "a mapping"
	case v == "array":
		return "a list"
	case v == "string":
		return "a string"
	case v == "bool":
		return "a boolean"
	case strings.HasPrefix(v, "number"):
		return "a number"
	}
	return v
}

// locate finds the innermost field of data that does not decode into a value
// of type t, so that an error from a custom decoder (a resource quantity, a
// time) or a type error inside a list can name its field. The culprit's path
// is below path; it is empty when no part of data fails on its own.
func locate(t reflect.Type, data []byte, path string) culprit {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if implementsUnmarshaler(t) {
		return culprit{}
	}
	switch t.Kind() {
	case reflect.Struct:
		var fields map[string]json.RawMessage
		if kjson.UnmarshalCaseSensitivePreserveInts(data, &fields) != nil {
			return culprit{}
		}
		for _, key := range slices.Sorted(maps.Keys(fields)) {
			ft, ok := jsonfields.Lookup(t, key)
			if !ok {
				continue
			}
			if c := locateChild(ft, fields[key], joinField(path, key)); c.path != "" {
				return c
			}
		}
	case reflect.Map:
		var entries map[string]json.RawMessage
		if kjson.UnmarshalCaseSensitivePreserveInts(data, &entries) != nil {
			return culprit{}
		}
		for _, key := range slices.Sorted(maps.Keys(entries)) {
			if c := locateChild(t.Elem(), entries[key], path+"["+key+"]"); c.path != "" {
				return c
			}
		}
	case reflect.Slice, reflect.Array:
		var items []json.RawMessage
		if kjson.UnmarshalCaseSensitivePreserveInts(data, &items) != nil {
			return culprit{}
		}
		for i, item := range items {
			if c := locateChild(t.Elem(), item, fmt.Sprintf("%s[%d]", path, i)); c.path != "" {
				return c
			}
		}
	}
	return culprit{}
}

// locateChild decodes one child value; if it fails, it looks for a deeper
// culprit and otherwise blames the child itself.
func locateChild(t reflect.Type, data []byte, path string) culprit {
	err := kjson.UnmarshalCaseSensitivePreserveInts(data, reflect.New(t).Interface())
	if err == nil {
		return culprit{}
	}
	if c := locate(t, data, path); c.path != "" {
		return c
	}
	return culprit{path: path, typ: t, err: err}
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

func implementsUnmarshaler(t reflect.Type) bool {
	return t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType)
}
