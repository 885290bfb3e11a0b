package scenario

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// preemptSteps apply both phases of the default manifests and podBig.
const preemptSteps = `steps:
- apply: {phase: setup}
- apply: {phase: preempt}
`

func withExpect(expect string) string {
	return file(headerStart+preemptSteps+expect, nsShop, rsWeb, pdbWeb, podBig)
}

func TestParseExpectAndEditSteps(t *testing.T) {
	input := file(headerStart+`steps:
- apply: {phase: setup}
- patch: {kind: PodDisruptionBudget, namespace: shop, name: web, patch: {spec: {maxUnavailable: 0}}}
- patch: {kind: ReplicaSet, namespace: shop, name: web, patch: {spec: {replicas: 2}}}
- apply: {phase: preempt}
- staysPending: {namespace: shop, name: big, for: 20s}
- delete: {kind: Pod, namespace: shop, name: big}
expect:
  upstream:
    disruptions: 2
    violations: ">=1"
    pods: {bound: [shop/big]}
  budgetguard:
    disruptions: "<=1"
    violations: 0
    refusals: {InsufficientBudget: ">=1", SafeToEvictFalse/filtered: 2, apiserver-429: 0}
    pods: {pending: [shop/big]}
`, nsShop, rsWeb, pdbWeb, podBig)
	s, err := Parse([]byte(input), "x.yaml", testDir(t))
	if err != nil {
		t.Fatal(err)
	}
	want := []Step{
		{Index: 0, Apply: &ApplyStep{Phase: "setup"}},
		{Index: 1, Patch: &PatchStep{Kind: "PodDisruptionBudget", Namespace: "shop", Name: "web", Patch: json.RawMessage(`{"spec":{"maxUnavailable":0}}`)}},
		{Index: 2, Patch: &PatchStep{Kind: "ReplicaSet", Namespace: "shop", Name: "web", Patch: json.RawMessage(`{"spec":{"replicas":2}}`)}},
		{Index: 3, Apply: &ApplyStep{Phase: "preempt"}},
		{Index: 4, StaysPending: &StaysPendingStep{Namespace: "shop", Name: "big", For: 20 * time.Second}},
		{Index: 5, Delete: &DeleteStep{Kind: "Pod", Namespace: "shop", Name: "big"}},
	}
	if diff := cmp.Diff(want, s.Steps); diff != "" {
		t.Errorf("steps (-want,+got):\n%s", diff)
	}
	wantExpect := &Expect{
		Upstream: &Expectation{Disruptions: &Count{2, 2}, Violations: &Count{1, -1}, Pods: &PodsExpectation{Bound: []string{"shop/big"}}},
		Budgetguard: &Expectation{Disruptions: &Count{0, 1}, Violations: &Count{0, 0},
			Refusals: map[string]Count{"InsufficientBudget": {1, -1}, "SafeToEvictFalse/filtered": {2, 2}, "apiserver-429": {0, 0}},
			Pods:     &PodsExpectation{Pending: []string{"shop/big"}}},
	}
	if diff := cmp.Diff(wantExpect, s.Expect); diff != "" {
		t.Errorf("expect (-want,+got):\n%s", diff)
	}
	if got := s.Expect.For("budgetguard"); got != s.Expect.Budgetguard {
		t.Errorf("For(budgetguard) = %v, want the budgetguard expectation", got)
	}
}

func TestParseInvalidExpectAndEditSteps(t *testing.T) {
	steps := func(extra string) string {
		return file(headerStart+preemptSteps+extra, nsShop, rsWeb, pdbWeb, podBig)
	}
	cases := []struct {
		name  string
		input string
		want  []want
	}{
		{"expect unknown mode", withExpect("expect: {downstream: {disruptions: 1}}\n"),
			[]want{{0, "Scenario", "expect.downstream", 0, "unknown field"}}},
		{"expect unknown field", withExpect("expect: {budgetguard: {disruption: 1}}\n"),
			[]want{{0, "Scenario", "expect.budgetguard.disruption", 0, "unknown field"}}},
		{"expect negative count", withExpect("expect: {budgetguard: {disruptions: -1}}\n"),
			[]want{{0, "Scenario", "expect.budgetguard.disruptions", 0, "at least 0"}}},
		{"expect bad count", withExpect("expect: {upstream: {violations: \"about 2\"}}\n"),
			[]want{{0, "Scenario", "expect.upstream.violations", 0, `invalid count "about 2"`}}},
		{"expect bad refusal reason", withExpect("expect: {budgetguard: {refusals: {insufficient: 1, InsufficientBudget/denied: 1}}}\n"),
			[]want{{0, "Scenario", "expect.budgetguard.refusals[InsufficientBudget/denied]", 0, "unknown reason"},
				{0, "Scenario", "expect.budgetguard.refusals[insufficient]", 0, "unknown reason"}}},
		{"expect unknown pod", withExpect("expect: {budgetguard: {pods: {pending: [shop/small]}}}\n"),
			[]want{{0, "Scenario", "expect.budgetguard.pods.pending[0]", 0, `"shop/small" is not a Pod manifest`}}},
		{"expect pod bound and pending", withExpect("expect: {budgetguard: {pods: {pending: [shop/big], bound: [shop/big]}}}\n"),
			[]want{{0, "Scenario", "expect.budgetguard.pods.pending", 0, `"shop/big" is also in bound`}}},
		{"expect empty", withExpect("expect: {}\n"),
			[]want{{0, "Scenario", "expect", 0, "empty"}}},
		{"delete unknown kind", steps("- delete: {kind: Service, namespace: shop, name: web}\n"),
			[]want{{0, "Scenario", "steps[2].delete.kind", 0, `unsupported value "Service"`}}},
		{"delete without a manifest", steps("- delete: {kind: Pod, namespace: shop, name: small}\n"),
			[]want{{0, "Scenario", "steps[2].delete.name", 0, "no Pod shop/small manifest"}}},
		{"delete a node with a namespace", steps("- delete: {kind: Node, namespace: shop, name: node-x}\n"),
			[]want{{0, "Scenario", "steps[2].delete.namespace", 0, "must not be set"}}},
		{"patch before the object exists", file(headerStart+"steps:\n- apply: {phase: setup}\n- delete: {kind: Pod, namespace: shop, name: big}\n- apply: {phase: preempt}\n", nsShop, rsWeb, pdbWeb, podBig),
			[]want{{0, "Scenario", "steps[1].delete.name", 0, "is created later, by steps[2]"}}},
		{"patch not a mapping", steps("- patch: {kind: ReplicaSet, namespace: shop, name: web, patch: [1]}\n"),
			[]want{{0, "Scenario", "steps[2].patch.patch", 0, "got a list, want a JSON merge patch"}}},
		{"patch empty", steps("- patch: {kind: ReplicaSet, namespace: shop, name: web, patch: {}}\n"),
			[]want{{0, "Scenario", "steps[2].patch.patch", 0, "got an empty mapping"}}},
		{"staysPending without for", steps("- staysPending: {namespace: shop, name: big}\n"),
			[]want{{0, "Scenario", "steps[2].staysPending.for", 0, "required"}}},
		{"staysPending unknown field", steps("- staysPending: {namespace: shop, name: big, for: 5s, timeout: 5s}\n"),
			[]want{{0, "Scenario", "steps[2].staysPending.timeout", 0, "unknown field"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { expectProblems(t, tc.input, tc.want) })
	}
}

func TestCountHolds(t *testing.T) {
	for _, tc := range []struct {
		c    Count
		n    int
		want bool
	}{
		{Count{2, 2}, 2, true}, {Count{2, 2}, 3, false},
		{Count{1, -1}, 0, false}, {Count{1, -1}, 9, true},
		{Count{0, 3}, 3, true}, {Count{0, 3}, 4, false},
	} {
		if got := tc.c.Holds(tc.n); got != tc.want {
			t.Errorf("%s holds %d = %v, want %v", tc.c, tc.n, got, tc.want)
		}
	}
}
