package scenario

import (
	"fmt"
	"os"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// pub is a PodUnavailableBudget shop/<name> whose spec is the given lines
// (indented by two spaces) and whose metadata has the given extra lines.
func pub(name, meta, spec string) string {
	return fmt.Sprintf(`apiVersion: policy.kruise.io/v1alpha1
kind: PodUnavailableBudget
metadata:
  name: %s
  namespace: shop
%sspec:
%s`, name, meta, spec)
}

const (
	targetWeb   = "  targetRef: {apiVersion: apps/v1, kind: ReplicaSet, name: web}\n"
	selectorWeb = "  selector: {matchLabels: {app: web}}\n"
	maxOne      = "  maxUnavailable: 1\n"
)

func TestParsePUBValid(t *testing.T) {
	for _, tc := range []struct {
		name string
		docs []string
	}{
		{"targetRef and maxUnavailable", []string{pub("web", "", targetWeb+maxOne)}},
		{"selector and a minAvailable percentage", []string{pub("web", "", selectorWeb+"  minAvailable: 50%\n")}},
		{"zero and 100%", []string{pub("a", "", targetWeb+"  minAvailable: 0\n"), pub("b", "", "  selector: {matchLabels: {app: db}}\n  maxUnavailable: 100%\n")}},
		{"annotations", []string{pub("web", "  annotations:\n    kruise.io/pub-protect-operations: DELETE,EVICT,UPDATE\n    pub.kruise.io/protect-total-replicas: \"3\"\n", targetWeb+maxOne)}},
		{"selectors on different keys", []string{pub("a", "", selectorWeb+maxOne), pub("b", "", "  selector: {matchLabels: {tier: db}}\n"+maxOne)}},
		{"disjoint selectors on one key", []string{pub("a", "", selectorWeb+maxOne), pub("b", "", "  selector: {matchExpressions: [{key: app, operator: NotIn, values: [web]}]}\n"+maxOne)}},
		{"workloads of other groups", []string{pub("a", "", targetWeb+maxOne), pub("b", "", "  targetRef: {apiVersion: apps.kruise.io/v1alpha1, kind: ReplicaSet, name: web}\n"+maxOne)}},
		{"one selector, one targetRef", []string{pub("a", "", targetWeb+maxOne), pub("b", "", selectorWeb+maxOne)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse([]byte(manifestsWith(append([]string{nsShop, rsWeb}, tc.docs...)...)), "x.yaml", t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			if got, want := len(s.Objects), 2+len(tc.docs); got != want {
				t.Errorf("%d objects, want %d", got, want)
			}
		})
	}
}

// pubBeta is pub at policy.kruise.io/v1beta1.
func pubBeta(name, meta, spec string) string {
	return strings.Replace(pub(name, meta, spec), "policy.kruise.io/v1alpha1", "policy.kruise.io/v1beta1", 1)
}

// TestParsePUBv1beta1: a scenario may hold PUBs of either version, checked
// as OpenKruise's webhook checks them, and the conflicts between PUBs span
// both.
func TestParsePUBv1beta1(t *testing.T) {
	const object = "PodUnavailableBudget shop/web"
	s, err := Parse([]byte(manifestsWith(nsShop, rsWeb, pubBeta("web", "", targetWeb+maxOne+
		"  protectOperations: [DELETE, EVICT]\n  protectTotalReplicas: 3\n  ignoredPodSelector: {matchLabels: {track: canary}}\n"))), "x.yaml", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Objects[2].GVK.Version; got != "v1beta1" {
		t.Errorf("the PUB parsed as version %q, want v1beta1", got)
	}
	one := func(spec string) string {
		return manifestsWith(nsShop, rsWeb, pubBeta("web", "", targetWeb+maxOne+spec))
	}
	for _, tc := range []struct {
		name  string
		input string
		want  []want
	}{
		{"unknown protected operation", one("  protectOperations: [DELETE, KILL]\n"),
			[]want{{3, object, "spec.protectOperations[1]", 0, `unsupported operation "KILL": want one of DELETE, UPDATE, EVICT, RESIZE`}}},
		{"protectTotalReplicas 0", one("  protectTotalReplicas: 0\n"),
			[]want{{3, object, "spec.protectTotalReplicas", 0, "0: want at least 1"}}},
		{"empty ignoredPodSelector", one("  ignoredPodSelector: {}\n"),
			[]want{{3, object, "spec.ignoredPodSelector", 0, "empty: OpenKruise does not accept a selector that ignores every pod"}}},
		{"unknown field", one("  ignoredPods: [a]\n"),
			[]want{{3, object, "spec.ignoredPods", 0, "unknown field"}}},
		{"a v1alpha1 and a v1beta1 PUB over the same pods", manifestsWith(nsShop, rsWeb, pub("web", "", targetWeb+maxOne), pubBeta("web2", "", targetWeb+maxOne)),
			[]want{{4, "PodUnavailableBudget shop/web2", "spec.targetRef", 0, "covers the pods of document 3 (PodUnavailableBudget shop/web)"}}},
	} {
		t.Run(tc.name, func(t *testing.T) { expectProblems(t, tc.input, tc.want) })
	}
}

func TestParsePUBInvalid(t *testing.T) {
	const object = "PodUnavailableBudget shop/web"
	// Documents: 0 header, 1 Namespace shop, 2 ReplicaSet shop/web, 3 the PUB.
	one := func(meta, spec string) string { return manifestsWith(nsShop, rsWeb, pub("web", meta, spec)) }
	for _, tc := range []struct {
		name  string
		input string
		want  []want
	}{
		{"neither selector nor targetRef", one("", maxOne),
			[]want{{3, object, "spec.selector", 0, "required: a PodUnavailableBudget sets exactly one of selector and targetRef"}}},
		{"selector and targetRef", one("", selectorWeb+targetWeb+maxOne),
			[]want{{3, object, "spec.targetRef", 0, "must not be set together with selector: a PodUnavailableBudget sets exactly one of selector and targetRef"}}},
		{"targetRef without kind and name", one("", "  targetRef: {apiVersion: apps/v1}\n"+maxOne),
			[]want{
				{3, object, "spec.targetRef.kind", 0, "required"},
				{3, object, "spec.targetRef.name", 0, "required"},
			}},
		{"targetRef with a bad apiVersion", one("", "  targetRef: {apiVersion: apps/v1/x, kind: ReplicaSet, name: web}\n"+maxOne),
			[]want{{3, object, "spec.targetRef.apiVersion", 0, `unexpected GroupVersion string: apps/v1/x`}}},
		{"empty selector", one("", "  selector: {}\n"+maxOne),
			[]want{{3, object, "spec.selector", 0, "empty: OpenKruise does not accept a PodUnavailableBudget over every pod"}}},
		{"selector with an unknown operator", one("", "  selector: {matchExpressions: [{key: app, operator: Has, values: [web]}]}\n"+maxOne),
			[]want{{3, object, "spec.selector.matchExpressions[0].operator", 0, `"Has": not a valid selector operator`}}},
		{"selector In without values", one("", "  selector: {matchExpressions: [{key: app, operator: In}]}\n"+maxOne),
			[]want{{3, object, "spec.selector.matchExpressions[0].values", 0, "must be specified when `operator` is 'In' or 'NotIn'"}}},
		{"selector with a bad label value", one("", "  selector: {matchLabels: {app: 'w e b'}}\n"+maxOne),
			[]want{{3, object, "spec.selector.matchLabels", 0, `Invalid value: "w e b"`}}},
		{"neither maxUnavailable nor minAvailable", one("", targetWeb),
			[]want{{3, object, "spec.maxUnavailable", 0, "required: a PodUnavailableBudget sets exactly one of maxUnavailable and minAvailable"}}},
		{"maxUnavailable and minAvailable", one("", targetWeb+maxOne+"  minAvailable: 2\n"),
			[]want{{3, object, "spec.minAvailable", 0, "must not be set together with maxUnavailable"}}},
		{"no target and no budget", one("", "  {}\n"),
			[]want{
				{3, object, "spec.selector", 0, "required"},
				{3, object, "spec.maxUnavailable", 0, "required"},
			}},
		{"negative maxUnavailable", one("", targetWeb+"  maxUnavailable: -1\n"),
			[]want{{3, object, "spec.maxUnavailable", 0, "-1: must be greater than or equal to 0"}}},
		{"negative minAvailable", one("", targetWeb+"  minAvailable: -2\n"),
			[]want{{3, object, "spec.minAvailable", 0, "-2: must be greater than or equal to 0"}}},
		{"minAvailable over 100%", one("", targetWeb+"  minAvailable: 150%\n"),
			[]want{{3, object, "spec.minAvailable", 0, `"150%": must not be greater than 100%`}}},
		{"maxUnavailable not a percentage", one("", targetWeb+"  maxUnavailable: half\n"),
			[]want{{3, object, "spec.maxUnavailable", 0, `"half": want an integer or a percentage such as 50%`}}},
		{"maxUnavailable a quoted number", one("", targetWeb+"  maxUnavailable: \"1\"\n"),
			[]want{{3, object, "spec.maxUnavailable", 0, `"1": want an integer or a percentage`}}},
		{"negative percentage", one("", targetWeb+"  maxUnavailable: -10%\n"),
			[]want{{3, object, "spec.maxUnavailable", 0, `"-10%": want an integer or a percentage`}}},
		{"protected operation with a space", one("  annotations: {kruise.io/pub-protect-operations: 'DELETE, EVICT'}\n", targetWeb+maxOne),
			[]want{{3, object, "metadata.annotations[kruise.io/pub-protect-operations]", 0, `unsupported operation " EVICT": want a comma-separated list, without spaces, of UPDATE, DELETE, EVICT`}}},
		{"unknown protected operation", one("  annotations: {kruise.io/pub-protect-operations: KILL}\n", targetWeb+maxOne),
			[]want{{3, object, "metadata.annotations[kruise.io/pub-protect-operations]", 0, `unsupported operation "KILL"`}}},
		{"total replicas not a number", one("  annotations: {pub.kruise.io/protect-total-replicas: three}\n", targetWeb+maxOne),
			[]want{{3, object, "metadata.annotations[pub.kruise.io/protect-total-replicas]", 0, `"three": want a 32-bit integer`}}},

		// Conflicts between PUBs of a namespace.
		{"two PUBs with one targetRef", manifestsWith(nsShop, rsWeb, pub("web", "", targetWeb+maxOne), pub("web2", "", "  targetRef: {apiVersion: apps/v2, kind: ReplicaSet, name: web}\n"+maxOne)),
			[]want{{4, "PodUnavailableBudget shop/web2", "spec.targetRef", 0, "covers the pods of document 3 (PodUnavailableBudget shop/web), which is created before it; OpenKruise allows one PodUnavailableBudget per pod"}}},
		{"two PUBs with overlapping selectors", manifestsWith(nsShop, rsWeb, pub("web", "", selectorWeb+maxOne), pub("web2", "", "  selector: {matchExpressions: [{key: app, operator: In, values: [api, web]}]}\n"+maxOne)),
			[]want{{4, "PodUnavailableBudget shop/web2", "spec.selector", 0, "covers the pods of document 3 (PodUnavailableBudget shop/web)"}}},
		{"the later document is created first", file(withSteps("- apply: {phase: setup}\n- apply: {phase: later}\n"), nsShop, rsWeb,
			pub("web", "  annotations: {sandbox.budgetguard.io/phase: later}\n", targetWeb+maxOne), pub("web2", "", targetWeb+maxOne)),
			[]want{{3, object, "spec.targetRef", 0, "covers the pods of document 4 (PodUnavailableBudget shop/web2), which is created before it"}}},
	} {
		t.Run(tc.name, func(t *testing.T) { expectProblems(t, tc.input, tc.want) })
	}
}

// TestSelectorsOverlap follows the examples in the comment on OpenKruise's
// IsSelectorLooseOverlap.
func TestSelectorsOverlap(t *testing.T) {
	req := func(op metav1.LabelSelectorOperator, values ...string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: op, Values: values}}}
	}
	const (
		in     = metav1.LabelSelectorOpIn
		notIn  = metav1.LabelSelectorOpNotIn
		exists = metav1.LabelSelectorOpExists
		absent = metav1.LabelSelectorOpDoesNotExist
	)
	for _, tc := range []struct {
		a, b *metav1.LabelSelector
		want bool
	}{
		{req(in, "b", "c"), req(exists), true},
		{req(in, "b", "c"), req(in, "c", "d"), true},
		{req(in, "b", "c"), req(in, "d"), false},
		{req(in, "b", "c"), req(notIn, "b"), true},
		{req(in, "b", "c"), req(notIn, "b", "c", "e"), false},
		{req(in, "b"), req(absent), false},
		{req(exists), req(exists), true},
		{req(exists), req(notIn, "x"), true},
		{req(exists), req(absent), false},
		{req(notIn, "b", "c"), req(absent), true},
		{req(notIn, "b", "c"), req(notIn, "x"), true},
		{req(notIn, "b", "c"), req(in, "b"), false},
		{req(notIn, "b", "c"), req(in, "a", "b"), true},
		{req(absent), req(absent), true},
		{&metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}, req(in, "b"), true},
		// Different keys: no overlap, as OpenKruise decides it.
		{&metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}, &metav1.LabelSelector{MatchLabels: map[string]string{"c": "d"}}, false},
		{&metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}, &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b", "c": "d"}}, false},
	} {
		for _, pair := range [][2]*metav1.LabelSelector{{tc.a, tc.b}, {tc.b, tc.a}} {
			if got := selectorsOverlap(pair[0], pair[1]); got != tc.want {
				t.Errorf("selectorsOverlap(%s, %s) = %v, want %v", metav1.FormatLabelSelector(pair[0]), metav1.FormatLabelSelector(pair[1]), got, tc.want)
			}
		}
	}
}

// TestDocsListPUBRules keeps docs/scenarios.md's section on
// PodUnavailableBudgets in step with the checks.
func TestDocsListPUBRules(t *testing.T) {
	data, err := os.ReadFile(docsPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"`selector`", "`targetRef`", "`maxUnavailable`", "`minAvailable`", "kruise.io/pub-protect-operations", "pub.kruise.io/protect-total-replicas", "pub_validating.go"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("%s does not mention %s", docsPath, want)
		}
	}
}
