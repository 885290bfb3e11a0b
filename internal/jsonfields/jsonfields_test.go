package jsonfields

import (
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type inner struct {
	Deep string `json:"deep"`
}

type sample struct {
	metav1.TypeMeta `json:",inline"`
	*inner
	Named    int `json:"named,omitempty"`
	Untagged bool
	Skipped  string `json:"-"`
	private  string //nolint:unused // unexported fields are never decoded
}

func TestOf(t *testing.T) {
	var names []string
	for _, f := range Of(reflect.TypeOf(&sample{})) {
		names = append(names, f.Name)
	}
	want := []string{"kind", "apiVersion", "deep", "named", "Untagged"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("field names (-want,+got):\n%s", diff)
	}
	if Of(reflect.TypeOf(3)) != nil {
		t.Error("Of(int) is not nil")
	}
}

func TestLookup(t *testing.T) {
	st := reflect.TypeOf(sample{})
	if ft, ok := Lookup(st, "named"); !ok || ft.Kind() != reflect.Int {
		t.Errorf("Lookup(named) = %v, %v; want int", ft, ok)
	}
	if ft, ok := Lookup(st, "apiVersion"); !ok || ft.Kind() != reflect.String {
		t.Errorf("Lookup(apiVersion) = %v, %v; want string from the inline TypeMeta", ft, ok)
	}
	for _, name := range []string{"Named", "Skipped", "private", "nope"} {
		if _, ok := Lookup(st, name); ok {
			t.Errorf("Lookup(%q) found a field; names match exactly and skipped fields are not decoded", name)
		}
	}
}
