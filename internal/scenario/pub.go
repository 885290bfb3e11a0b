package scenario

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	kruisepolicyv1alpha1 "github.com/openkruise/kruise-api/policy/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"

	kruisebeta "github.com/budgetguard/budgetguard/apis/kruise/policy/v1beta1"
)

// The sandbox installs the PodUnavailableBudget CRD but not OpenKruise's
// admission webhook, so the API server admits PUBs that a cluster with
// OpenKruise rejects. The checks below are the rules of that webhook
// (openkruise/kruise pkg/webhook/podunavailablebudget/validating/
// pub_validating.go: validatingPodUnavailableBudgetFn,
// validatePodUnavailableBudgetSpec and validatePubConflict), so that a
// scenario cannot show budgetguard honouring a budget no cluster would hold.

// pubOperations are the values the webhook allows in the comma-separated
// annotation kruise.io/pub-protect-operations.
var pubOperations = []string{
	string(kruisepolicyv1alpha1.PubUpdateOperation),
	string(kruisepolicyv1alpha1.PubDeleteOperation),
	string(kruisepolicyv1alpha1.PubEvictOperation),
}

// checkPUB checks one PodUnavailableBudget as the webhook checks it on
// create, apart from the conflicts with other PUBs (checkPUBConflicts).
func checkPUB(de *docErrors, pub *kruisepolicyv1alpha1.PodUnavailableBudget) {
	if v, ok := pub.Annotations[kruisepolicyv1alpha1.PubProtectOperationAnnotation]; ok {
		// The webhook splits on "," and trims nothing.
		for _, op := range strings.Split(v, ",") {
			if !slices.Contains(pubOperations, op) {
				de.field(annotationField("metadata", kruisepolicyv1alpha1.PubProtectOperationAnnotation),
					"unsupported operation %q: want a comma-separated list, without spaces, of %s", op, strings.Join(pubOperations, ", "))
				break
			}
		}
	}
	if v, ok := pub.Annotations[kruisepolicyv1alpha1.PubProtectTotalReplicasAnnotation]; ok {
		if _, err := strconv.ParseInt(v, 10, 32); err != nil {
			de.field(annotationField("metadata", kruisepolicyv1alpha1.PubProtectTotalReplicasAnnotation),
				"%q: want a 32-bit integer, the number of replicas to count", v)
		}
	}

	spec := pub.Spec
	const oneOfTargets = "a PodUnavailableBudget sets exactly one of selector and targetRef"
	switch {
	case spec.Selector == nil && spec.TargetReference == nil:
		de.field("spec.selector", "required: %s", oneOfTargets)
	case spec.Selector != nil && spec.TargetReference != nil:
		de.field("spec.targetRef", "must not be set together with selector: %s", oneOfTargets)
	case spec.TargetReference != nil:
		checkTargetRef(de, spec.TargetReference)
	default:
		checkPUBSelector(de, spec.Selector)
	}

	const oneOfBudgets = "a PodUnavailableBudget sets exactly one of maxUnavailable and minAvailable"
	switch {
	case spec.MaxUnavailable == nil && spec.MinAvailable == nil:
		de.field("spec.maxUnavailable", "required: %s", oneOfBudgets)
	case spec.MaxUnavailable != nil && spec.MinAvailable != nil:
		de.field("spec.minAvailable", "must not be set together with maxUnavailable: %s", oneOfBudgets)
	case spec.MaxUnavailable != nil:
		checkIntOrPercent(de, "spec.maxUnavailable", *spec.MaxUnavailable)
	default:
		checkIntOrPercent(de, "spec.minAvailable", *spec.MinAvailable)
	}
}

func checkTargetRef(de *docErrors, ref *kruisepolicyv1alpha1.TargetReference) {
	for _, f := range []struct{ name, value string }{
		{"apiVersion", ref.APIVersion}, {"kind", ref.Kind}, {"name", ref.Name},
	} {
		if f.value == "" {
			de.field("spec.targetRef."+f.name, "required: targetRef names the workload by apiVersion, kind and name")
		}
	}
	if ref.APIVersion != "" {
		if _, err := schema.ParseGroupVersion(ref.APIVersion); err != nil {
			de.field("spec.targetRef.apiVersion", "%v", err)
		}
	}
}

func checkPUBSelector(de *docErrors, sel *metav1.LabelSelector) {
	errs := metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, nil)
	for _, e := range errs {
		de.field(joinField("spec.selector", e.Field), "%s", e.ErrorBody())
	}
	if len(errs) > 0 {
		return
	}
	if len(sel.MatchLabels)+len(sel.MatchExpressions) == 0 {
		de.field("spec.selector", "empty: OpenKruise does not accept a PodUnavailableBudget over every pod of the namespace; set matchLabels or matchExpressions")
		return
	}
	if _, err := metav1.LabelSelectorAsSelector(sel); err != nil {
		de.field("spec.selector", "%v", err)
	}
}

// checkIntOrPercent checks maxUnavailable or minAvailable: an integer of at
// least 0, or a percentage of at most 100%.
func checkIntOrPercent(de *docErrors, field string, v intstr.IntOrString) {
	if v.Type == intstr.Int {
		if v.IntVal < 0 {
			de.field(field, "%d: must be greater than or equal to 0", v.IntVal)
		}
		return
	}
	if msgs := validation.IsValidPercent(v.StrVal); len(msgs) > 0 {
		de.field(field, "%q: want an integer or a percentage such as 50%%: %s", v.StrVal, strings.Join(msgs, "; "))
		return
	}
	if n, err := strconv.Atoi(strings.TrimSuffix(v.StrVal, "%")); err != nil || n > 100 {
		de.field(field, "%q: must not be greater than 100%%", v.StrVal)
	}
}

// checkPUBv1beta1 checks a PodUnavailableBudget of policy.kruise.io/v1beta1
// as the webhook does (validatePodUnavailableBudgetSpec): what v1alpha1
// has, then the fields v1beta1 adds.
func checkPUBv1beta1(de *docErrors, pub *kruisebeta.PodUnavailableBudget) {
	// The fields both versions have, and the annotations as written.
	shared := pub.DeepCopy()
	shared.Spec.ProtectOperations, shared.Spec.ProtectTotalReplicas = nil, nil
	alpha := kruisebeta.ToV1alpha1(shared)
	alpha.Annotations = pub.Annotations
	checkPUB(de, alpha)
	for i, op := range pub.Spec.ProtectOperations {
		if !kruisebeta.ValidOperation(op) {
			de.field(fmt.Sprintf("spec.protectOperations[%d]", i), "unsupported operation %q: want one of DELETE, UPDATE, EVICT, RESIZE", op)
		}
	}
	if n := pub.Spec.ProtectTotalReplicas; n != nil && *n < 1 {
		de.field("spec.protectTotalReplicas", "%d: want at least 1", *n)
	}
	if sel := pub.Spec.IgnoredPodSelector; sel != nil {
		if len(sel.MatchLabels)+len(sel.MatchExpressions) == 0 {
			de.field("spec.ignoredPodSelector", "empty: OpenKruise does not accept a selector that ignores every pod; set matchLabels or matchExpressions, or leave it out")
		} else if _, err := metav1.LabelSelectorAsSelector(sel); err != nil {
			de.field("spec.ignoredPodSelector", "%v", err)
		}
	}
}

// pubOf returns o's PUB in the v1alpha1 shape, for the checks both versions
// share; false when o is no PUB.
func pubOf(o runtime.Object) (*kruisepolicyv1alpha1.PodUnavailableBudget, bool) {
	switch p := o.(type) {
	case *kruisepolicyv1alpha1.PodUnavailableBudget:
		return p, true
	case *kruisebeta.PodUnavailableBudget:
		return kruisebeta.ToV1alpha1(p), true
	}
	return nil, false
}

// checkPUBConflicts reports a PUB that the webhook would refuse because an
// earlier one in its namespace already covers the same pods: the same
// targetRef (group, kind and name), or selectors that overlap as the
// webhook's IsSelectorLooseOverlap defines it. Earlier means created
// earlier: applied by an earlier step, or earlier in the same phase.
// applyStep maps a phase to the step that applies it.
func checkPUBConflicts(c *collector, s *Scenario, applyStep map[string]int) {
	var pubs []Object
	for _, o := range s.Objects {
		if _, ok := pubOf(o.Object); !ok {
			continue
		}
		if _, applied := applyStep[o.Phase]; applied {
			pubs = append(pubs, o)
		}
	}
	slices.SortStableFunc(pubs, func(a, b Object) int { return applyStep[a.Phase] - applyStep[b.Phase] })
	for i, o := range pubs {
		pub, _ := pubOf(o.Object)
		for _, earlier := range pubs[:i] {
			other, _ := pubOf(earlier.Object)
			if other.Namespace != pub.Namespace || other.Name == pub.Name {
				continue
			}
			field := ""
			switch {
			case pub.Spec.TargetReference != nil && other.Spec.TargetReference != nil:
				if sameWorkload(pub.Spec.TargetReference, other.Spec.TargetReference) {
					field = "spec.targetRef"
				}
			case pub.Spec.Selector != nil && other.Spec.Selector != nil:
				if selectorsOverlap(pub.Spec.Selector, other.Spec.Selector) {
					field = "spec.selector"
				}
			}
			if field != "" {
				c.add(&FieldError{Document: o.Document, Object: o.label(), Field: field,
					Detail: fmt.Sprintf("covers the pods of %s, which is created before it; OpenKruise allows one PodUnavailableBudget per pod", earlier.Describe())})
				break
			}
		}
	}
}

func sameWorkload(a, b *kruisepolicyv1alpha1.TargetReference) bool {
	ga, errA := schema.ParseGroupVersion(a.APIVersion)
	gb, errB := schema.ParseGroupVersion(b.APIVersion)
	return errA == nil && errB == nil && ga.Group == gb.Group && a.Kind == b.Kind && a.Name == b.Name
}

// selectorsOverlap is OpenKruise's loose overlap: the selectors constrain
// the same label keys, and for each key some value could satisfy both
// constraints. Selectors on different keys do not overlap, even though a
// pod could match both.
func selectorsOverlap(a, b *metav1.LabelSelector) bool {
	ra, rb := requirementsByKey(a), requirementsByKey(b)
	if len(ra) != len(rb) {
		return false
	}
	for key, x := range ra {
		y, ok := rb[key]
		if !ok || !requirementsOverlap(x, y) {
			return false
		}
	}
	return true
}

// requirementsByKey turns a selector into one requirement per key; a
// matchLabels entry is "key In (value)" and replaces a matchExpressions
// entry on the same key.
func requirementsByKey(sel *metav1.LabelSelector) map[string]metav1.LabelSelectorRequirement {
	out := map[string]metav1.LabelSelectorRequirement{}
	for _, r := range sel.MatchExpressions {
		out[r.Key] = r
	}
	for k, v := range sel.MatchLabels {
		out[k] = metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpIn, Values: []string{v}}
	}
	return out
}

// requirementsOverlap reports whether two requirements on one key can hold
// together, as the webhook's isMatchExpOverlap decides it.
func requirementsOverlap(x, y metav1.LabelSelectorRequirement) bool {
	rank := map[metav1.LabelSelectorOperator]int{
		metav1.LabelSelectorOpIn: 0, metav1.LabelSelectorOpNotIn: 1,
		metav1.LabelSelectorOpExists: 2, metav1.LabelSelectorOpDoesNotExist: 3,
	}
	rx, okX := rank[x.Operator]
	ry, okY := rank[y.Operator]
	if !okX || !okY {
		return false
	}
	// The relation is symmetric: look at each pair in one order only.
	if rx > ry {
		x, y = y, x
	}
	switch x.Operator {
	case metav1.LabelSelectorOpIn:
		switch y.Operator {
		case metav1.LabelSelectorOpIn:
			return slices.ContainsFunc(x.Values, func(v string) bool { return slices.Contains(y.Values, v) })
		case metav1.LabelSelectorOpNotIn:
			return slices.ContainsFunc(x.Values, func(v string) bool { return !slices.Contains(y.Values, v) })
		case metav1.LabelSelectorOpExists:
			return true
		}
		return false
	case metav1.LabelSelectorOpNotIn:
		return true
	case metav1.LabelSelectorOpExists:
		return y.Operator == metav1.LabelSelectorOpExists
	}
	return true // DoesNotExist and DoesNotExist
}
