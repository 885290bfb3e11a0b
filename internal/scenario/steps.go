package scenario

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// editableKinds are the kinds delete and patch steps may name: those a
// scenario may hold, less Namespace (the sandbox runs no namespace
// controller, so a deleted namespace stays Terminating).
var editableKinds = []string{"Node", "PriorityClass", "Deployment", "ReplicaSet", "StatefulSet", "Pod", "PodDisruptionBudget", "PodUnavailableBudget"}

// clusterKinds are the editable kinds without a namespace.
var clusterKinds = []string{"Node", "PriorityClass"}

// checkObjectRef checks the kind, namespace and name of a delete or patch
// step.
func checkObjectRef(d *docErrors, field, kind, namespace, name string) {
	switch {
	case kind == "":
		d.field(field+".kind", "required: one of %s", strings.Join(editableKinds, ", "))
	case !slices.Contains(editableKinds, kind):
		d.field(field+".kind", "unsupported value %q: want one of %s", kind, strings.Join(editableKinds, ", "))
	case slices.Contains(clusterKinds, kind) && namespace != "":
		d.field(field+".namespace", "must not be set: a %s has no namespace", kind)
	case !slices.Contains(clusterKinds, kind):
		checkNamespace(d, field+".namespace", namespace)
	}
	if name == "" {
		d.field(field+".name", "required: the object's name")
	} else {
		checkSubdomain(d, field+".name", name)
	}
}

func describePatch(kind string) string {
	if kind == "a mapping" {
		return "an empty mapping"
	}
	return kind
}

// rawStaysPending is a staysPending step as written.
type rawStaysPending struct {
	Namespace string  `json:"namespace"`
	Name      string  `json:"name"`
	For       *string `json:"for"`
}

func parseStaysPending(d *docErrors, value json.RawMessage, field string) *StaysPendingStep {
	var raw rawStaysPending
	decodeStep(d, value, &raw, field)
	st := &StaysPendingStep{Namespace: raw.Namespace, Name: raw.Name}
	checkNamespace(d, field+".namespace", raw.Namespace)
	if raw.Name == "" {
		d.field(field+".name", "required: the pod's name")
	} else {
		checkSubdomain(d, field+".name", raw.Name)
	}
	if raw.For == nil {
		d.field(field+".for", "required: how long to watch the pod, such as 20s")
	} else if dur, ok := checkDuration(d, field+".for", *raw.For); ok {
		st.For = dur
	}
	return st
}

// checkStepObjects checks that each delete and patch step names a manifest
// of the scenario that an earlier step applies.
func checkStepObjects(c *collector, s *Scenario, applies []applyRef) {
	d := &docErrors{c: c, doc: 0, object: Kind}
	applied := map[string]int{}
	for _, a := range applies {
		if _, dup := applied[a.phase]; !dup {
			applied[a.phase] = a.step
		}
	}
	for _, st := range s.Steps {
		var key, kind, namespace, name string
		switch {
		case st.Delete != nil:
			key, kind, namespace, name = "delete", st.Delete.Kind, st.Delete.Namespace, st.Delete.Name
		case st.Patch != nil:
			key, kind, namespace, name = "patch", st.Patch.Kind, st.Patch.Namespace, st.Patch.Name
		default:
			continue
		}
		field := fmt.Sprintf("steps[%d].%s", st.Index, key)
		i := slices.IndexFunc(s.Objects, func(o Object) bool {
			m := objectMeta(o.Object)
			return o.GVK.Kind == kind && m.GetNamespace() == namespace && m.GetName() == name
		})
		if i < 0 {
			d.field(field+".name", "no %s manifest in the scenario; the step can only change objects the scenario creates", objectLabel(kind, namespace, name))
			continue
		}
		o := s.Objects[i]
		if step, ok := applied[o.Phase]; ok && step > st.Index {
			d.field(field+".name", "%s is created later, by steps[%d] (phase %q)", o.Describe(), step, o.Phase)
		}
	}
}
