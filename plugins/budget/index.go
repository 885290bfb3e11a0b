package budget

import (
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// labelPair is one label key=value, used as an index key without allocating.
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
// pod's label count plus the number of selectors that share a label pair
// with the pod, independent of budgets in other namespaces.
//
// selectorIndex is not safe for concurrent use; the Cache guards it.
type selectorIndex[T any] struct {
	namespaces map[string]*namespaceIndex[T]
}

type namespaceIndex[T any] struct {
	entries map[string]*selectorEntry[T] // every entry, by name
	byPair  map[labelPair]map[string]*selectorEntry[T]
	always  map[string]*selectorEntry[T]
}

type selectorEntry[T any] struct {
	name     string
	selector labels.Selector
	pairs    []labelPair // where it is filed; empty when in "always"
	value    T
}

func newSelectorIndex[T any]() *selectorIndex[T] {
	return &selectorIndex[T]{namespaces: map[string]*namespaceIndex[T]{}}
}

// indexPairs returns the label pairs under which a selector is filed, or nil
// when it has no equality requirement.
func indexPairs(sel labels.Selector) []labelPair {
	reqs, _ := sel.Requirements()
	for _, r := range reqs {
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			vals := r.Values().UnsortedList()
			pairs := make([]labelPair, 0, len(vals))
			for _, v := range vals {
				pairs = append(pairs, labelPair{key: r.Key(), value: v})
			}
			return pairs
		}
	}
	return nil
}

// set files (or re-files) name in namespace under selector sel.
func (x *selectorIndex[T]) set(namespace, name string, sel labels.Selector, value T) {
	x.remove(namespace, name)
	ns := x.namespaces[namespace]
	if ns == nil {
		ns = &namespaceIndex[T]{
			entries: map[string]*selectorEntry[T]{},
			byPair:  map[labelPair]map[string]*selectorEntry[T]{},
			always:  map[string]*selectorEntry[T]{},
		}
		x.namespaces[namespace] = ns
	}
	e := &selectorEntry[T]{name: name, selector: sel, pairs: indexPairs(sel), value: value}
	ns.entries[name] = e
	if len(e.pairs) == 0 {
		ns.always[name] = e
		return
	}
	for _, p := range e.pairs {
		m := ns.byPair[p]
		if m == nil {
			m = map[string]*selectorEntry[T]{}
			ns.byPair[p] = m
		}
		m[name] = e
	}
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
	delete(ns.always, name)
	for _, p := range e.pairs {
		if m := ns.byPair[p]; m != nil {
			delete(m, name)
			if len(m) == 0 {
				delete(ns.byPair, p)
			}
		}
	}
	if len(ns.entries) == 0 {
		delete(x.namespaces, namespace)
	}
}

// len is the number of entries filed, for metrics and tests.
func (x *selectorIndex[T]) len() int {
	n := 0
	for _, ns := range x.namespaces {
		n += len(ns.entries)
	}
	return n
}

// candidates calls fn for every entry in namespace whose selector may match
// podLabels. fn must still evaluate the selector: candidates only narrows.
func (x *selectorIndex[T]) candidates(namespace string, podLabels map[string]string, fn func(*selectorEntry[T])) {
	ns := x.namespaces[namespace]
	if ns == nil {
		return
	}
	for _, e := range ns.always {
		fn(e)
	}
	if len(ns.byPair) == 0 {
		return
	}
	for k, v := range podLabels {
		for _, e := range ns.byPair[labelPair{key: k, value: v}] {
			fn(e)
		}
	}
}

// matching appends to out the values whose selector matches podLabels.
func (x *selectorIndex[T]) matching(namespace string, podLabels map[string]string, out []T) []T {
	set := labels.Set(podLabels)
	x.candidates(namespace, podLabels, func(e *selectorEntry[T]) {
		if e.selector.Matches(set) {
			out = append(out, e.value)
		}
	})
	return out
}
