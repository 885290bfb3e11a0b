package scenario

import (
	"bytes"
	"fmt"
	kruisebeta "github.com/budgetguard/budgetguard/apis/kruise/policy/v1beta1"
	"os"
	"path/filepath"

	kruisepolicyv1alpha1 "github.com/openkruise/kruise-api/policy/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "sigs.k8s.io/json"
)

// builtinNamespaces exist in the sandbox's API server before any scenario
// object is created.
var builtinNamespaces = map[string]bool{
	metav1.NamespaceDefault:   true,
	metav1.NamespaceSystem:    true,
	metav1.NamespacePublic:    true,
	corev1.NamespaceNodeLease: true,
}

// Load reads and parses the scenario file at path. Files the header names
// are resolved relative to the directory of path.
func Load(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading scenario: %w", err)
	}
	return Parse(data, path, filepath.Dir(path))
}

// Parse parses and validates a scenario. path names the file in errors and
// becomes Scenario.Path; baseDir is the directory that relative file
// references of the header (scheduler.config, descheduler.policy) are
// resolved against, usually the scenario file's directory. The referenced
// files must exist. The error, if any, is an ErrorList with every problem
// found, one per line, each naming the file, the document and the field.
func Parse(data []byte, path, baseDir string) (*Scenario, error) {
	c := &collector{file: path}
	s := &Scenario{Path: path}
	docs := splitDocuments(data)

	headerJSON, ok := documentJSON(c, docs[0], Kind)
	var applies []applyRef
	switch {
	case !ok:
	case isNull(headerJSON) && len(docs) == 1:
		c.add(&FieldError{Document: -1, Detail: fmt.Sprintf("no content; a scenario starts with a header document (apiVersion: %s, kind: %s)", APIVersion, Kind)})
	case isNull(headerJSON):
		c.add(&FieldError{Document: 0, Detail: fmt.Sprintf("empty; the first document must be the scenario header (apiVersion: %s, kind: %s)", APIVersion, Kind)})
	default:
		p := probeManifest(headerJSON)
		if _, isManifest := lookupKind(p.APIVersion, p.Kind); isManifest {
			c.add(&FieldError{Document: 0, Object: p.label(), Field: "kind",
				Detail: fmt.Sprintf("the first document must be the scenario header (apiVersion: %s, kind: %s)", APIVersion, Kind)})
			break
		}
		applies = parseHeader(s, headerJSON, baseDir, &docErrors{c: c, doc: 0, object: Kind})
	}

	for _, d := range docs[1:] {
		if o, ok := parseManifest(c, d); ok {
			s.Objects = append(s.Objects, o)
		}
	}
	checkObjects(c, s, applies)
	checkStepObjects(c, s, applies)
	checkExpectPods(c, s)
	if err := c.err(); err != nil {
		return nil, err
	}
	return s, nil
}

// documentJSON converts a document to JSON; ok is false, after reporting the
// YAML parser's problems, when it could not.
func documentJSON(c *collector, d document, headerLabel string) ([]byte, bool) {
	j, problems := d.toJSON()
	if problems == nil {
		return j, true
	}
	label := headerLabel
	if d.index > 0 {
		label = ""
	}
	if lenient := d.toJSONLenient(); lenient != nil && !isNull(lenient) && d.index > 0 {
		label = probeManifest(lenient).label()
	}
	for _, p := range problems {
		c.add(&FieldError{Document: d.index, Object: label, Line: p.line, Detail: p.detail})
	}
	return nil, false
}

func isNull(j []byte) bool {
	return bytes.Equal(bytes.TrimSpace(j), []byte("null"))
}

// probe is what errors need to name a manifest before it is decoded.
type probe struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
}

// probeManifest reads apiVersion, kind, namespace and name, ignoring any
// value of the wrong type.
func probeManifest(j []byte) probe {
	var p probe
	_ = kjson.UnmarshalCaseSensitivePreserveInts(j, &p)
	return p
}

func (p probe) label() string {
	return objectLabel(p.Kind, p.Metadata.Namespace, p.Metadata.Name)
}

// objectLabel renders "PodDisruptionBudget shop/web" or "Node node-a".
func objectLabel(kind, namespace, name string) string {
	if namespace != "" && name != "" {
		name = namespace + "/" + name
	}
	switch {
	case kind == "":
		return name
	case name == "":
		return kind
	default:
		return kind + " " + name
	}
}

// parseManifest decodes and checks one manifest document; ok is false for
// empty documents and documents with problems.
func parseManifest(c *collector, d document) (Object, bool) {
	j, ok := documentJSON(c, d, "")
	if !ok || isNull(j) {
		return Object{}, false
	}
	p := probeManifest(j)
	de := &docErrors{c: c, doc: d.index, object: p.label()}
	if kind := jsonKind(j); kind != "a mapping" {
		de.field("", "got %s, want a Kubernetes manifest (a mapping with apiVersion, kind and metadata)", kind)
		return Object{}, false
	}
	k, known := lookupKind(p.APIVersion, p.Kind)
	if !known {
		field, detail := kindProblem(p.APIVersion, p.Kind)
		de.field(field, "%s", detail)
		return Object{}, false
	}
	before := c.total
	obj := k.newObject()
	problems := decodeStrict(j, obj, "")
	for _, prob := range problems {
		de.field(prob.field, "%s", prob.detail)
	}
	if len(problems) > 0 && !problems[0].strict {
		// A value that does not decode may have stopped the decoder: the
		// fields after it are unset, and checking them would mislead.
		return Object{}, false
	}
	meta := objectMeta(obj)
	checkMeta(de, k, meta)
	phase := DefaultPhase
	if v, ok := meta.GetAnnotations()[PhaseAnnotation]; ok {
		phase = v
		checkLabel(de, annotationField("metadata", PhaseAnnotation), v)
	}
	checkReadinessAnnotation(de, "metadata", meta.GetAnnotations(), k.gvk.Kind == "Pod")
	if k.template != nil {
		checkReadinessAnnotation(de, "spec.template.metadata", k.template(obj).Annotations, true)
	}
	switch pub := obj.(type) {
	case *kruisepolicyv1alpha1.PodUnavailableBudget:
		checkPUB(de, pub)
	case *kruisebeta.PodUnavailableBudget:
		checkPUBv1beta1(de, pub)
	}
	if c.total != before {
		return Object{}, false
	}
	return Object{Document: d.index, Phase: phase, GVK: k.gvk, Object: obj}, true
}

func checkMeta(de *docErrors, k kindInfo, meta metav1.Object) {
	switch name := meta.GetName(); {
	case name == "" && meta.GetGenerateName() != "":
		de.field("metadata.name", "required; generateName is not supported, since steps and budgets name objects")
	case name == "":
		de.field("metadata.name", "required")
	case k.gvk.Kind == "Namespace":
		checkLabel(de, "metadata.name", name)
	default:
		checkSubdomain(de, "metadata.name", name)
	}
	switch ns := meta.GetNamespace(); {
	case k.namespaced && ns == "":
		de.field("metadata.namespace", "required: %s is namespaced", k.gvk.Kind)
	case k.namespaced:
		checkLabel(de, "metadata.namespace", ns)
	case ns != "":
		de.field("metadata.namespace", "must not be set: %s is cluster-scoped", k.gvk.Kind)
	}
}

// annotationField renders the path of an annotation:
// metadata.annotations[sandbox.budgetguard.io/phase].
func annotationField(metaPath, key string) string {
	return metaPath + ".annotations[" + key + "]"
}

// checkReadinessAnnotation checks the sandbox kubelet's readiness annotation
// where it has an effect (pods and pod templates); elsewhere it is inert and
// most likely misplaced.
func checkReadinessAnnotation(de *docErrors, metaPath string, annotations map[string]string, onPod bool) {
	v, ok := annotations[ReadinessAnnotation]
	if !ok {
		return
	}
	field := annotationField(metaPath, ReadinessAnnotation)
	if !onPod {
		de.field(field, "has no effect here; set it on the pod template (spec.template.metadata.annotations) or on a Pod")
		return
	}
	if msg := checkReadiness(v); msg != "" {
		de.field(field, "%s", msg)
	}
}

// objectKey identifies an object for the duplicate check.
type objectKey struct {
	gk              schema.GroupKind
	namespace, name string
}

// checkObjects checks what spans documents: duplicates, phases and the
// steps that apply them, and that namespaces exist before their objects are
// created. applies are the header's apply steps.
func checkObjects(c *collector, s *Scenario, applies []applyRef) {
	seen := map[objectKey]Object{}
	for _, o := range s.Objects {
		m := objectMeta(o.Object)
		key := objectKey{o.GVK.GroupKind(), m.GetNamespace(), m.GetName()}
		if first, dup := seen[key]; dup {
			c.add(&FieldError{Document: o.Document, Object: o.label(), Field: "metadata.name",
				Detail: fmt.Sprintf("duplicates %s", first.Describe())})
			continue
		}
		seen[key] = o
	}

	// applyStep maps a phase to the step that applies it. Objects are
	// created in the order of that step, then of their documents.
	applyStep := map[string]int{}
	for _, a := range applies {
		field := fmt.Sprintf("steps[%d].apply.phase", a.step)
		if prev, dup := applyStep[a.phase]; dup {
			c.add(&FieldError{Document: 0, Object: Kind, Field: field,
				Detail: fmt.Sprintf("phase %q is already applied by steps[%d]; its objects can be created once", a.phase, prev)})
			continue
		}
		applyStep[a.phase] = a.step
		if len(s.ObjectsInPhase(a.phase)) == 0 {
			c.add(&FieldError{Document: 0, Object: Kind, Field: field,
				Detail: fmt.Sprintf("no manifest is in phase %q (manifests name their phase in the annotation %s; the default is %q)", a.phase, PhaseAnnotation, DefaultPhase)})
		}
	}
	checkPUBConflicts(c, s, applyStep)
	if len(applies) == 0 && len(s.Steps) == 0 {
		// The header is broken or has no steps (reported already); every
		// phase would look unapplied.
		return
	}

	namespaces := map[string]Object{}
	for _, o := range s.Objects {
		if o.GVK.Kind == "Namespace" && o.GVK.Group == "" {
			namespaces[objectMeta(o.Object).GetName()] = o
		}
	}
	for _, o := range s.Objects {
		step, applied := applyStep[o.Phase]
		if !applied {
			detail := fmt.Sprintf("phase %q is not applied by any step", o.Phase)
			if _, set := objectMeta(o.Object).GetAnnotations()[PhaseAnnotation]; !set {
				detail = fmt.Sprintf("not set, so the object is in phase %q, which no step applies", o.Phase)
			}
			c.add(&FieldError{Document: o.Document, Object: o.label(), Field: annotationField("metadata", PhaseAnnotation),
				Detail: fmt.Sprintf("%s; add the step \"- apply: {phase: %s}\"", detail, o.Phase)})
			continue
		}
		ns := objectMeta(o.Object).GetNamespace()
		if ns == "" || builtinNamespaces[ns] {
			continue
		}
		nsObj, declared := namespaces[ns]
		if !declared {
			c.add(&FieldError{Document: o.Document, Object: o.label(), Field: "metadata.namespace",
				Detail: fmt.Sprintf("namespace %q does not exist in the sandbox; add a Namespace manifest for it (only %s exist from the start)", ns, "default, kube-system, kube-public and kube-node-lease")})
			continue
		}
		nsStep, nsApplied := applyStep[nsObj.Phase]
		if nsApplied && (nsStep > step || (nsStep == step && nsObj.Document > o.Document)) {
			c.add(&FieldError{Document: o.Document, Object: o.label(), Field: "metadata.namespace",
				Detail: fmt.Sprintf("namespace %q is created later, by %s; create the Namespace before the objects in it", ns, nsObj.Describe())})
		}
	}
}

// label renders the object as errors name it: "PodDisruptionBudget shop/web".
func (o Object) label() string {
	if o.Object == nil {
		return o.GVK.Kind
	}
	m := objectMeta(o.Object)
	return objectLabel(o.GVK.Kind, m.GetNamespace(), m.GetName())
}

// Describe names the object by its document and identity, as parse errors
// do: "document 3 (PodDisruptionBudget shop/web)".
func (o Object) Describe() string {
	return describeDocument(o.Document, o.label())
}

// ObjectsInPhase returns the objects of the phase, in document order.
func (s *Scenario) ObjectsInPhase(phase string) []Object {
	var out []Object
	for _, o := range s.Objects {
		if o.Phase == phase {
			out = append(out, o)
		}
	}
	return out
}
