package runner

// TEMPORARY: stand-ins for internal/scenario's Object.Describe and
// Scenario.ObjectsInPhase until that package's implementation lands.

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/budgetguard/budgetguard/internal/scenario"
)

func describeObject(o scenario.Object) string {
	name := ""
	if m, err := meta.Accessor(o.Object); err == nil {
		name = m.GetName()
		if ns := m.GetNamespace(); ns != "" {
			name = ns + "/" + name
		}
	}
	return fmt.Sprintf("document %d (%s %s)", o.Document, o.GVK.Kind, name)
}

func objectsInPhase(sc *scenario.Scenario, phase string) []scenario.Object {
	var out []scenario.Object
	for _, o := range sc.Objects {
		if o.Phase == phase {
			out = append(out, o)
		}
	}
	return out
}
