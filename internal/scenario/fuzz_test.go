package scenario

import (
	"errors"
	"testing"
)

// FuzzParse feeds arbitrary bytes to Parse. It must not panic; it either
// fails with an ErrorList of complete messages, or returns a scenario that
// holds what Parse promises.
func FuzzParse(f *testing.F) {
	for _, ex := range docsExamples(f) {
		f.Add([]byte(ex))
	}
	f.Add([]byte(scenarioWith(withSteps("- apply: {phase: setup}\n- wait: {podsReady: {namespace: shop, selector: 'app in (a,b)', count: 2}, timeout: 5s}\n- settle: 1s\n"))))
	f.Add([]byte(manifestsWith(nsShop, rsWeb, pdbWeb, podBig)))
	f.Add([]byte("---\n---\n"))
	f.Add([]byte("a: &a [*a]\n"))
	f.Add([]byte("{\"apiVersion\": 1, \"steps\": [[]]}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data, "fuzz.yaml", docsBaseDir)
		if err != nil {
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("error %T %v, want a non-empty ErrorList", err, err)
			}
			for _, e := range list {
				if e.File != "fuzz.yaml" || e.Detail == "" {
					t.Fatalf("incomplete problem %+v", e)
				}
			}
			return
		}
		if len(s.Steps) == 0 {
			t.Fatal("a valid scenario has no steps")
		}
		applied := map[string]bool{}
		for _, st := range s.Steps {
			if st.Apply != nil {
				applied[st.Apply.Phase] = true
			}
		}
		last := 0
		for _, o := range s.Objects {
			if o.Document <= last || o.Object == nil || !applied[o.Phase] {
				t.Fatalf("%s: document after %d, object %T, phase %q applied %v", o.Describe(), last, o.Object, o.Phase, applied[o.Phase])
			}
			last = o.Document
		}
	})
}
