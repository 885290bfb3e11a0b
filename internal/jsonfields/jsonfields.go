// Package jsonfields lists the fields of a Go struct by the JSON names that
// encoding/json and sigs.k8s.io/json decode into, including the fields of
// embedded structs without a name of their own (`json:",inline"`, such as
// metav1.TypeMeta). The strict decoders of scenarios and descheduler
// policies use it to name a field path and to suggest the right spelling.
package jsonfields

import (
	"reflect"
	"strings"
)

// Field is one field of a struct: its JSON name and its Go type.
type Field struct {
	Name string
	Type reflect.Type
}

// Of returns the fields of struct type t (or pointer to one) by their JSON
// names, in declaration order, with those of unnamed embedded structs in
// place; nil when t is not a struct.
func Of(t reflect.Type) []Field {
	t = deref(t)
	if t.Kind() != reflect.Struct {
		return nil
	}
	var out []Field
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		switch {
		case f.Anonymous && name == "" && deref(f.Type).Kind() == reflect.Struct:
			out = append(out, Of(f.Type)...)
			continue
		case !f.IsExported():
			continue
		case name == "":
			name = f.Name
		}
		out = append(out, Field{Name: name, Type: f.Type})
	}
	return out
}

// Lookup returns the type of the field of struct t that JSON key name
// decodes into (names match exactly, as sigs.k8s.io/json's strict decoding
// does).
func Lookup(t reflect.Type, name string) (reflect.Type, bool) {
	for _, f := range Of(t) {
		if f.Name == name {
			return f.Type, true
		}
	}
	return nil, false
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}
