package budget

import (
	"slices"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// labelPair is one label key=value.
type labelPair struct{ key, value string }

// selectorIndex finds the objects whose label selector may match a pod's
// labels without evaluating every selector in the namespace.
//
// Each selector is filed under the values of one of its equality
// requirements (k=v, k==v, k in (a,b)); a pod can only match it if the pod
// carries one of those pairs. Selectors without such a requirement ({} and
// selectors made only of Exists, DoesNotExist, NotIn, !=) are kept in a
// per-namespace "always check" list. Objects whose selector matches nothing
// (nil, invalid) are not filed at all. The cost of a lookup is therefore the
// smaller of the pod's label count and the number of label keys the
// namespace's selectors are filed under, plus the number of selectors that
// share a label pair with the pod, independent of budgets in other
// namespaces.
//
// Lookups allocate nothing when out has room. The lists are slices, not
// maps, so that walking them costs no map iteration.
//
// selectorIndex is not safe for concurrent use; the Cache guards it.
type selectorIndex[T any] struct {
	namespaces map[string]*namespaceIndex[T]
}

type namespaceIndex[T any] struct {
	entries map[string]*selectorEntry[T] // every entry, by name
	// keys are the label keys entries are filed under, each with its
	// entries by label value; a namespace has few.
	keys   []*keyIndex[T]
	always []*selectorEntry[T]
}

type keyIndex[T any] struct {
	key     string
	byValue map[string][]*selectorEntry[T]
}

type selectorEntry[T any] struct {
	name     string
	selector labels.Selector
	pairs    []labelPair // where it is filed; empty when in "always"
	// filedOnly is true when the requirement it is filed under is the
	// selector's only one: a pod that carries one of pairs matches it.
	filedOnly bool
	value     T
}

func newSelectorIndex[T any]() *selectorIndex[T] {
	return &selectorIndex[T]{namespaces: map[string]*namespaceIndex[T]{}}
}

// indexPairs returns the label pairs under which a selector is filed, or nil
// when it has no equality requirement, and whether that requirement is the
// selector's only one.
func indexPairs(sel labels.Selector) ([]labelPair, bool) {
	reqs, _ := sel.Requirements()
	for _, r := range reqs {
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			vals := r.Values().UnsortedList()
			pairs := make([]labelPair, 0, len(vals))
			for _, v := range vals {
				pairs = append(pairs, labelPair{key: r.Key(), value: v})
			}
			return pairs, len(reqs) == 1
		}
	}
	return nil, false
}

// set files (or re-files) name in namespace under selector sel.
func (x *selectorIndex[T]) set(namespace, name string, sel labels.Selector, value T) {
	x.remove(namespace, name)
	ns := x.namespaces[namespace]
	if ns == nil {
		ns = &namespaceIndex[T]{entries: map[string]*selectorEntry[T]{}}
		x.namespaces[namespace] = ns
	}
	e := &selectorEntry[T]{name: name, selector: sel, value: value}
	e.pairs, e.filedOnly = indexPairs(sel)
	ns.entries[name] = e
	if len(e.pairs) == 0 {
		ns.always = append(ns.always, e)
		return
	}
	for _, p := range e.pairs {
		k := ns.key(p.key)
		if k == nil {
			k = &keyIndex[T]{key: p.key, byValue: map[string][]*selectorEntry[T]{}}
			ns.keys = append(ns.keys, k)
		}
		k.byValue[p.value] = append(k.byValue[p.value], e)
	}
}

func (ns *namespaceIndex[T]) key(key string) *keyIndex[T] {
	for _, k := range ns.keys {
		if k.key == key {
			return k
		}
	}
	return nil
}

// without removes e from list, in place.
func without[T any](list []*selectorEntry[T], e *selectorEntry[T]) []*selectorEntry[T] {
	return slices.DeleteFunc(list, func(o *selectorEntry[T]) bool { return o == e })
}

// remove drops name from namespace; a no-op when absent.
func (x *selectorIndex[T]) remove(namespace, name string) {
	ns := x.namespaces[namespace]
	if ns == nil {
		return
	}
	e, ok := ns.entries[name]
	if !ok {
		return
	}
	delete(ns.entries, name)
	ns.always = without(ns.always, e)
	for _, p := range e.pairs {
		k := ns.key(p.key)
		if k == nil {
			continue
		}
		if list := without(k.byValue[p.value], e); len(list) > 0 {
			k.byValue[p.value] = list
		} else {
			delete(k.byValue, p.value)
		}
		if len(k.byValue) == 0 {
			ns.keys = slices.DeleteFunc(ns.keys, func(o *keyIndex[T]) bool { return o == k })
		}
	}
	if len(ns.entries) == 0 {
		delete(x.namespaces, namespace)
	}
}

// len is the number of entries filed, for metrics and tests.
// get returns the value filed under name in namespace.
func (x *selectorIndex[T]) get(namespace, name string) (T, bool) {
	if ns := x.namespaces[namespace]; ns != nil {
		if e, ok := ns.entries[name]; ok {
			return e.value, true
		}
	}
	var zero T
	return zero, false
}

func (x *selectorIndex[T]) len() int {
	n := 0
	for _, ns := range x.namespaces {
		n += len(ns.entries)
	}
	return n
}

// matching appends to out the values whose selector matches podLabels, and
// returns how many selectors it looked at (for tests of the lookup's cost).
// It allocates nothing when out has room for the result.
func (x *selectorIndex[T]) matching(namespace string, podLabels map[string]string, out []T) ([]T, int) {
	ns := x.namespaces[namespace]
	if ns == nil {
		return out, 0
	}
	set := labels.Set(podLabels)
	visited := len(ns.always)
	for _, e := range ns.always {
		if e.selector.Matches(set) {
			out = append(out, e.value)
		}
	}
	// Each entry is filed under one key, and a pod has one value per key,
	// so no entry is found twice.
	visit := func(list []*selectorEntry[T]) {
		visited += len(list)
		for _, e := range list {
			if e.filedOnly || e.selector.Matches(set) {
				out = append(out, e.value)
			}
		}
	}
	if len(ns.keys) <= len(podLabels) {
		for _, k := range ns.keys {
			if v, ok := podLabels[k.key]; ok {
				visit(k.byValue[v])
			}
		}
		return out, visited
	}
	for key, v := range podLabels {
		if k := ns.key(key); k != nil {
			visit(k.byValue[v])
		}
	}
	return out, visited
}
