package scenario

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Building blocks of the test scenarios. With the default manifests the
// documents are: 0 header, 1 Namespace shop, 2 ReplicaSet shop/web,
// 3 PodDisruptionBudget shop/web.
const (
	headerStart = `apiVersion: sandbox.budgetguard.io/v1alpha1
kind: Scenario
metadata:
  name: t
`
	applySetup = `steps:
- apply: {phase: setup}
`
	nsShop = `apiVersion: v1
kind: Namespace
metadata:
  name: shop
`
	rsWeb = `apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: web
  namespace: shop
spec:
  replicas: 4
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: pause
        resources:
          requests: {cpu: "1"}
`
	pdbWeb = `apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: web
  namespace: shop
spec:
  maxUnavailable: 1
  selector:
    matchLabels: {app: web}
`
	podBig = `apiVersion: v1
kind: Pod
metadata:
  name: big
  namespace: shop
  annotations:
    sandbox.budgetguard.io/phase: preempt
spec:
  containers:
  - name: big
    image: pause
`
)

// file joins documents with "---" lines.
func file(docs ...string) string {
	return strings.Join(docs, "---\n")
}

// withSteps is a header with the given steps block.
func withSteps(steps string) string {
	return headerStart + "steps:\n" + steps
}

// defaultManifests are documents 1 to 3.
func defaultManifests() []string { return []string{nsShop, rsWeb, pdbWeb} }

// scenarioWith is a header followed by the default manifests.
func scenarioWith(header string) string {
	return file(append([]string{header}, defaultManifests()...)...)
}

// manifestsWith is the default header followed by the given manifests.
func manifestsWith(docs ...string) string {
	return file(append([]string{headerStart + applySetup}, docs...)...)
}

// lineOf returns the 1-based line of the n-th (1-based) line of text that
// contains needle.
func lineOf(t *testing.T, text, needle string, n int) int {
	t.Helper()
	for i, l := range strings.Split(text, "\n") {
		if strings.Contains(l, needle) {
			n--
			if n == 0 {
				return i + 1
			}
		}
	}
	t.Fatalf("%q does not occur that often in the test input", needle)
	return 0
}

// testDir holds the files header references resolve against: sched.yaml,
// policy.yaml and a directory dir.
func testDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"sched.yaml", "policy.yaml"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("{}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "dir"), 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// want is an expected problem. Detail is a substring of the message.
type want struct {
	doc    int
	object string
	field  string
	line   int
	detail string
}

func TestParseInvalid(t *testing.T) {
	dupKey := manifestsWith(nsShop, rsWeb, strings.Replace(pdbWeb, "  maxUnavailable: 1\n", "  maxUnavailable: 1\n  maxUnavailable: 2\n", 1))
	syntax := manifestsWith(nsShop, "apiVersion: v1\nkind: Pod\nmetadata: {name: [\n", pdbWeb)
	emptyMiddle := file(headerStart+applySetup, nsShop, "# nothing here\n", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n")

	cases := []struct {
		name  string
		input string
		want  []want
	}{
		// Header.
		{"header unknown top-level field", scenarioWith(headerStart + "summary: x\n" + applySetup),
			[]want{{0, "Scenario", "summary", 0, "unknown field"}}},
		{"header unknown metadata field", scenarioWith(strings.Replace(headerStart, "  name: t\n", "  name: t\n  labels: {a: b}\n", 1) + applySetup),
			[]want{{0, "Scenario", "metadata.labels", 0, "unknown field"}}},
		{"wrong apiVersion", scenarioWith(strings.Replace(headerStart, "v1alpha1", "v1", 1) + applySetup),
			[]want{{0, "Scenario", "apiVersion", 0, `got "sandbox.budgetguard.io/v1", want "sandbox.budgetguard.io/v1alpha1"`}}},
		{"wrong kind", scenarioWith(strings.Replace(headerStart, "kind: Scenario", "kind: Scenery", 1) + applySetup),
			[]want{{0, "Scenario", "kind", 0, `got "Scenery", want "Scenario"`}}},
		{"name missing", scenarioWith(strings.Replace(headerStart, "  name: t\n", "", 1) + applySetup),
			[]want{{0, "Scenario", "metadata.name", 0, "required"}}},
		{"name not a DNS label", scenarioWith(strings.Replace(headerStart, "name: t", "name: My_Scenario", 1) + applySetup),
			[]want{{0, "Scenario", "metadata.name", 0, `"My_Scenario": a lowercase RFC 1123 label`}}},
		{"no steps", file(headerStart, nsShop),
			[]want{{0, "Scenario", "steps", 0, "required: at least one step"}}},
		{"steps not a list", file(headerStart+"steps: {apply: {phase: setup}}\n", nsShop),
			[]want{{0, "Scenario", "steps", 0, "wrong type: got a mapping, want a list"}}},
		{"scheduler config missing", scenarioWith(headerStart + "scheduler: {config: nope.yaml}\n" + applySetup),
			[]want{{0, "Scenario", "scheduler.config", 0, `file "nope.yaml" (resolved relative to the scenario file as`}}},
		{"pubWebhook not a bool", scenarioWith(headerStart + "pubWebhook: \"off\"\n" + applySetup),
			[]want{{0, "Scenario", "pubWebhook", 0, "wrong type"}}},
		{"descheduler policy is a directory", scenarioWith(headerStart + "descheduler: {policy: dir}\n" + applySetup),
			[]want{{0, "Scenario", "descheduler.policy", 0, "is not a regular file"}}},
		{"absolute scheduler config missing", scenarioWith(headerStart + "scheduler: {config: /nonexistent/sched.yaml}\n" + applySetup),
			[]want{{0, "Scenario", "scheduler.config", 0, `file "/nonexistent/sched.yaml": no such file or directory`}}},
		{"scheduler unknown field", scenarioWith(headerStart + "scheduler: {configFile: sched.yaml}\n" + applySetup),
			[]want{{0, "Scenario", "scheduler.configFile", 0, "unknown field"}}},

		// Steps.
		{"step with two keys", scenarioWith(withSteps("- apply: {phase: setup}\n- {settle: 1s, deschedule: {}}\n")),
			[]want{{0, "Scenario", "steps[1]", 0, "has deschedule and settle; a step has exactly one of"}}},
		{"step with unknown key", scenarioWith(withSteps("- apply: {phase: setup}\n- sleep: 5s\n")),
			[]want{{0, "Scenario", "steps[1].sleep", 0, "unknown field; a step is one of apply, wait, setReadiness, deschedule, settle"}}},
		{"step is a string", scenarioWith(withSteps("- apply: {phase: setup}\n- settle\n")),
			[]want{{0, "Scenario", "steps[1]", 0, "got a string, want a mapping"}}},
		{"empty step", scenarioWith(withSteps("- apply: {phase: setup}\n- {}\n")),
			[]want{{0, "Scenario", "steps[1]", 0, "empty; a step has exactly one of"}}},
		{"apply without phase", scenarioWith(withSteps("- apply: {phase: setup}\n- apply: {}\n")),
			[]want{{0, "Scenario", "steps[1].apply.phase", 0, `required, such as "setup"`}}},
		{"apply with misspelt phase field", scenarioWith(withSteps("- apply: {phse: setup}\n")),
			[]want{
				{0, "Scenario", "steps[0].apply.phse", 0, "unknown field"},
				{0, "Scenario", "steps[0].apply.phase", 0, "required"},
			}},
		{"apply phase not a DNS label", scenarioWith(withSteps("- apply: {phase: setup}\n- apply: {phase: Later}\n")),
			[]want{{0, "Scenario", "steps[1].apply.phase", 0, `"Later": a lowercase RFC 1123 label`}}},
		{"apply step with an unknown field still applies its phase", scenarioWith(withSteps("- apply: {phase: setup, wait: true}\n")),
			[]want{{0, "Scenario", "steps[0].apply.wait", 0, "unknown field"}}},
		{"header is a list", file("- apply: {phase: setup}\n", nsShop),
			[]want{{0, "Scenario", "", 0, "got a list, want the scenario header"}}},
		{"apply phase without objects", scenarioWith(withSteps("- apply: {phase: setup}\n- apply: {phase: later}\n")),
			[]want{{0, "Scenario", "steps[1].apply.phase", 0, `no manifest is in phase "later"`}}},
		{"apply phase twice", scenarioWith(withSteps("- apply: {phase: setup}\n- settle: 1s\n- apply: {phase: setup}\n")),
			[]want{{0, "Scenario", "steps[2].apply.phase", 0, `phase "setup" is already applied by steps[0]`}}},
		{"podsReady count 0", scenarioWith(withSteps("- apply: {phase: setup}\n- settle: 1s\n- wait: {podsReady: {namespace: shop, selector: app=web, count: 0}}\n")),
			[]want{{0, "Scenario", "steps[2].wait.podsReady.count", 0, "must be at least 1"}}},
		{"podsReady count not a number", scenarioWith(withSteps("- apply: {phase: setup}\n- wait: {podsReady: {namespace: shop, selector: app=web, count: four}}\n")),
			[]want{{0, "Scenario", "steps[1].wait.podsReady.count", 0, "wrong type: got a string, want an integer"}}},
		{"podsReady unknown field", scenarioWith(withSteps("- apply: {phase: setup}\n- wait: {podsReady: {namespace: shop, selektor: app=web, count: 4}}\n")),
			[]want{{0, "Scenario", "steps[1].wait.podsReady.selektor", 0, "unknown field"}}},
		{"podsReady bad selector and namespace", scenarioWith(withSteps("- apply: {phase: setup}\n- wait: {podsReady: {namespace: Shop, selector: 'app in (a', count: 4}}\n")),
			[]want{
				{0, "Scenario", "steps[1].wait.podsReady.namespace", 0, `"Shop": a lowercase RFC 1123 label`},
				{0, "Scenario", "steps[1].wait.podsReady.selector", 0, `invalid label selector "app in (a"`},
			}},
		{"podScheduled without name", scenarioWith(withSteps("- apply: {phase: setup}\n- wait: {podScheduled: {namespace: shop}}\n")),
			[]want{{0, "Scenario", "steps[1].wait.podScheduled.name", 0, "required"}}},
		{"wait with two conditions", scenarioWith(withSteps("- apply: {phase: setup}\n- wait: {budgetsObserved: true, podScheduled: {namespace: shop, name: big}}\n")),
			[]want{{0, "Scenario", "steps[1].wait", 0, "has podScheduled and budgetsObserved; a wait has exactly one of podsReady, podScheduled, budgetsObserved"}}},
		{"wait without condition", scenarioWith(withSteps("- apply: {phase: setup}\n- wait: {timeout: 5s}\n")),
			[]want{{0, "Scenario", "steps[1].wait", 0, "no condition"}}},
		{"budgetsObserved false", scenarioWith(withSteps("- apply: {phase: setup}\n- wait: {budgetsObserved: false}\n")),
			[]want{{0, "Scenario", "steps[1].wait.budgetsObserved", 0, "must be true"}}},
		{"wait timeout not a duration", scenarioWith(withSteps("- apply: {phase: setup}\n- wait: {budgetsObserved: true, timeout: 5 parsecs}\n")),
			[]want{{0, "Scenario", "steps[1].wait.timeout", 0, `invalid duration "5 parsecs"`}}},
		{"wait timeout zero", scenarioWith(withSteps("- apply: {phase: setup}\n- wait: {budgetsObserved: true, timeout: 0s}\n")),
			[]want{{0, "Scenario", "steps[1].wait.timeout", 0, "must be greater than 0"}}},
		{"wait timeout too long", scenarioWith(withSteps("- apply: {phase: setup}\n- wait: {budgetsObserved: true, timeout: 11m}\n")),
			[]want{{0, "Scenario", "steps[1].wait.timeout", 0, "must be at most 10m0s, got 11m"}}},
		{"wait timeout a number", scenarioWith(withSteps("- apply: {phase: setup}\n- wait: {budgetsObserved: true, timeout: 60}\n")),
			[]want{{0, "Scenario", "steps[1].wait.timeout", 0, "wrong type: got a number, want a string (quote the value)"}}},
		{"setReadiness unsupported value", scenarioWith(withSteps("- apply: {phase: setup}\n- setReadiness: {namespace: shop, selector: app=web, readiness: sometimes}\n")),
			[]want{{0, "Scenario", "steps[1].setReadiness.readiness", 0, `unsupported value "sometimes": want ready, never, crashloop or after=<duration>`}}},
		{"setReadiness negative after", scenarioWith(withSteps("- apply: {phase: setup}\n- setReadiness: {namespace: shop, selector: app=web, readiness: after=-1s}\n")),
			[]want{{0, "Scenario", "steps[1].setReadiness.readiness", 0, `unsupported value "after=-1s"`}}},
		{"setReadiness missing fields", scenarioWith(withSteps("- apply: {phase: setup}\n- setReadiness: {}\n")),
			[]want{
				{0, "Scenario", "steps[1].setReadiness.namespace", 0, "required"},
				{0, "Scenario", "steps[1].setReadiness.readiness", 0, "required"},
			}},
		{"deschedule with a field", scenarioWith(withSteps("- apply: {phase: setup}\n- deschedule: {strategy: x}\n")),
			[]want{{0, "Scenario", "steps[1].deschedule.strategy", 0, "unknown field"}}},
		{"settle zero", scenarioWith(withSteps("- apply: {phase: setup}\n- settle: 0s\n")),
			[]want{{0, "Scenario", "steps[1].settle", 0, "must be greater than 0"}}},
		{"settle a number", scenarioWith(withSteps("- apply: {phase: setup}\n- settle: 5\n")),
			[]want{{0, "Scenario", "steps[1].settle", 0, "got a number, want a duration such as 5s"}}},

		// Manifests.
		{"unknown field in a manifest", manifestsWith(nsShop, rsWeb, strings.Replace(pdbWeb, "maxUnavailable", "minAvailabel", 1)),
			[]want{{3, "PodDisruptionBudget shop/web", "spec.minAvailabel", 0, "unknown field"}}},
		{"key set twice in a manifest", dupKey,
			[]want{{3, "PodDisruptionBudget shop/web", "", lineOf(t, dupKey, "maxUnavailable: 2", 1), `key "maxUnavailable" is set twice`}}},
		{"YAML syntax error", syntax,
			[]want{{2, "", "", lineOf(t, syntax, "metadata: {name: [", 1), "did not find expected node content"}}},
		{"wrong type for an int field", manifestsWith(nsShop, strings.Replace(rsWeb, "replicas: 4", `replicas: "4"`, 1), pdbWeb),
			[]want{{2, "ReplicaSet shop/web", "spec.replicas", 0, "wrong type: got a string, want an integer"}}},
		{"number as a label value", manifestsWith(nsShop, strings.Replace(rsWeb, "name: web\n  namespace", "name: web\n  labels: {tier: 1}\n  namespace", 1), pdbWeb),
			[]want{{2, "ReplicaSet shop/web", "metadata.labels[tier]", 0, "wrong type: got a number, want a string (quote the value)"}}},
		{"bad quantity", manifestsWith(nsShop, strings.Replace(rsWeb, `cpu: "1"`, "cpu: lots", 1), pdbWeb),
			[]want{{2, "ReplicaSet shop/web", "spec.template.spec.containers[0].resources.requests[cpu]", 0, "quantities must match"}}},
		{"list as IntOrString", manifestsWith(nsShop, rsWeb, strings.Replace(pdbWeb, "maxUnavailable: 1", "maxUnavailable: [1]", 1)),
			[]want{{3, "PodDisruptionBudget shop/web", "spec.maxUnavailable", 0, "want an integer or a string such as 50%"}}},
		{"unsupported kind", manifestsWith(nsShop, "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: shop}\n"),
			[]want{{2, "Service shop/web", "kind", 0, `unsupported kind "Service"; want one of Namespace, Node, PriorityClass, Deployment, ReplicaSet, StatefulSet, Pod, PodDisruptionBudget, PodUnavailableBudget`}}},
		{"unsupported apiVersion", manifestsWith(nsShop, rsWeb, strings.Replace(pdbWeb, "policy/v1", "policy/v1beta1", 1)),
			[]want{{3, "PodDisruptionBudget shop/web", "apiVersion", 0, `"policy/v1beta1" is not supported for PodDisruptionBudget; want "policy/v1"`}}},
		{"kind missing", manifestsWith(nsShop, "apiVersion: v1\nmetadata: {name: x}\n"),
			[]want{{2, "x", "kind", 0, "required; want one of"}}},
		{"second header", manifestsWith(nsShop, headerStart+applySetup),
			[]want{{2, "Scenario t", "kind", 0, "only the first document may be the Scenario header"}}},
		{"manifest first", file(nsShop, headerStart+applySetup),
			[]want{
				{0, "Namespace shop", "kind", 0, "the first document must be the scenario header"},
				{1, "Scenario t", "kind", 0, "only the first document may be the Scenario header"},
			}},
		{"manifest is a list", manifestsWith(nsShop, "- a\n- b\n"),
			[]want{{2, "", "", 0, "got a list, want a Kubernetes manifest"}}},
		{"name missing", manifestsWith(nsShop, "apiVersion: v1\nkind: Pod\nmetadata: {namespace: shop}\n"),
			[]want{{2, "Pod", "metadata.name", 0, "required"}}},
		{"generateName", manifestsWith(nsShop, "apiVersion: v1\nkind: Pod\nmetadata: {generateName: p-, namespace: shop}\n"),
			[]want{{2, "Pod", "metadata.name", 0, "generateName is not supported"}}},
		{"namespaced kind without namespace", manifestsWith(nsShop, strings.Replace(pdbWeb, "  namespace: shop\n", "", 1)),
			[]want{{2, "PodDisruptionBudget web", "metadata.namespace", 0, "required: PodDisruptionBudget is namespaced"}}},
		{"cluster-scoped kind with namespace", manifestsWith(nsShop, "apiVersion: v1\nkind: Node\nmetadata: {name: node-1, namespace: shop}\n"),
			[]want{{2, "Node shop/node-1", "metadata.namespace", 0, "must not be set: Node is cluster-scoped"}}},
		{"duplicate object", manifestsWith(nsShop, rsWeb, pdbWeb, podBig, strings.Replace(podBig, "    sandbox.budgetguard.io/phase: preempt\n", "    note: moved\n", 1)),
			[]want{
				{4, "Pod shop/big", "metadata.annotations[sandbox.budgetguard.io/phase]", 0, `phase "preempt" is not applied by any step; add the step "- apply: {phase: preempt}"`},
				{5, "Pod shop/big", "metadata.name", 0, "duplicates document 4 (Pod shop/big)"},
			}},
		{"object phase not applied", manifestsWith(nsShop, rsWeb, pdbWeb, podBig),
			[]want{{4, "Pod shop/big", "metadata.annotations[sandbox.budgetguard.io/phase]", 0, `phase "preempt" is not applied by any step`}}},
		{"default phase not applied", file(withSteps("- apply: {phase: preempt}\n"), nsShop, podBig),
			[]want{{1, "Namespace shop", "metadata.annotations[sandbox.budgetguard.io/phase]", 0, `not set, so the object is in phase "setup", which no step applies`}}},
		{"phase annotation not a DNS label", manifestsWith(nsShop, strings.Replace(podBig, "phase: preempt", "phase: Pre_empt", 1)),
			[]want{{2, "Pod shop/big", "metadata.annotations[sandbox.budgetguard.io/phase]", 0, `"Pre_empt": a lowercase RFC 1123 label`}}},
		{"namespace not created", manifestsWith(rsWeb),
			[]want{{1, "ReplicaSet shop/web", "metadata.namespace", 0, `namespace "shop" does not exist in the sandbox`}}},
		{"namespace created later", manifestsWith(rsWeb, nsShop),
			[]want{{1, "ReplicaSet shop/web", "metadata.namespace", 0, `namespace "shop" is created later, by document 2 (Namespace shop)`}}},
		{"bad readiness on a template", manifestsWith(nsShop, strings.Replace(rsWeb, "      labels: {app: web}\n    spec:", "      labels: {app: web}\n      annotations: {sandbox.budgetguard.io/readiness: sometimes}\n    spec:", 1)),
			[]want{{2, "ReplicaSet shop/web", "spec.template.metadata.annotations[sandbox.budgetguard.io/readiness]", 0, `unsupported value "sometimes"`}}},
		{"readiness on a ReplicaSet itself", manifestsWith(nsShop, strings.Replace(rsWeb, "  namespace: shop\n", "  namespace: shop\n  annotations: {sandbox.budgetguard.io/readiness: never}\n", 1)),
			[]want{{2, "ReplicaSet shop/web", "metadata.annotations[sandbox.budgetguard.io/readiness]", 0, "has no effect here"}}},
		{"empty documents keep their numbers", emptyMiddle,
			[]want{{3, "Pod p", "metadata.namespace", 0, "required"}}},

		// The file as a whole.
		{"empty file", "", []want{{-1, "", "", 0, "no content; a scenario starts with a header document"}}},
		{"only separators", "---\n---\n", []want{{0, "", "", 0, "empty; the first document must be the scenario header"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { expectProblems(t, tc.input, tc.want) })
	}
}

// expectProblems parses input as x.yaml and checks that Parse reports
// exactly the problems in want, in order.
func expectProblems(t *testing.T, input string, wants []want) {
	t.Helper()
	s, err := Parse([]byte(input), "x.yaml", testDir(t))
	if err == nil {
		t.Fatalf("Parse succeeded with %d steps and %d objects, want errors", len(s.Steps), len(s.Objects))
	}
	t.Log(err)
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("error is %T, want ErrorList: %v", err, err)
	}
	if len(list) != len(wants) {
		t.Fatalf("got %d problems, want %d:\n%v", len(list), len(wants), err)
	}
	for i, w := range wants {
		g := list[i]
		got := want{g.Document, g.Object, g.Field, g.Line, g.Detail}
		if got.doc != w.doc || got.object != w.object || got.field != w.field || got.line != w.line || !strings.Contains(got.detail, w.detail) || g.File != "x.yaml" {
			t.Errorf("problem %d:\ngot  %+v (file %q)\nwant %+v (detail as a substring)", i, got, g.File, w)
		}
	}
}

// TestErrorMessages pins the rendered format of each shape of FieldError.
func TestErrorMessages(t *testing.T) {
	cases := []struct {
		input string
		want  string
	}{
		{manifestsWith(nsShop, rsWeb, strings.Replace(pdbWeb, "maxUnavailable", "minAvailabel", 1)),
			"examples/scenarios/x.yaml: document 3 (PodDisruptionBudget shop/web): spec.minAvailabel: unknown field"},
		{scenarioWith(withSteps("- apply: {phase: setup}\n- settle: 1s\n- wait: {podsReady: {namespace: shop, selector: app=web, count: 0}}\n")),
			"examples/scenarios/x.yaml: document 0 (Scenario): steps[2].wait.podsReady.count: must be at least 1"},
		{manifestsWith(nsShop, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  name: b\n"),
			"examples/scenarios/x.yaml: document 2 (Pod b): line 17: key \"name\" is set twice"},
		{"", "examples/scenarios/x.yaml: no content; a scenario starts with a header document (apiVersion: sandbox.budgetguard.io/v1alpha1, kind: Scenario)"},
	}
	for _, tc := range cases {
		_, err := Parse([]byte(tc.input), "examples/scenarios/x.yaml", t.TempDir())
		if err == nil || err.Error() != tc.want {
			t.Errorf("got  %v\nwant %s", err, tc.want)
		}
	}
}

func TestParseValid(t *testing.T) {
	dir := testDir(t)
	input := file(headerStart+`description: |
  Two lines
  of text.
scheduler: {config: sched.yaml}
descheduler: {policy: policy.yaml}
pubWebhook: false
steps:
- apply: {phase: setup}
- wait:
    podsReady: {namespace: shop, selector: app=web, count: 4}
- wait: {budgetsObserved: true, timeout: 2m}
- setReadiness: {namespace: shop, selector: app=web, readiness: after=0s}
- setReadiness: {namespace: shop, selector: "", readiness: crashloop}
- deschedule: {}
- deschedule:
- apply: {phase: preempt}
- wait: {podScheduled: {namespace: shop, name: big}, timeout: 20s, continueOnTimeout: true}
- settle: 1m30s
`, nsShop, rsWeb, pdbWeb, podBig)
	s, err := Parse([]byte(input), "x.yaml", dir)
	if err != nil {
		t.Fatal(err)
	}
	wantSteps := []Step{
		{Index: 0, Apply: &ApplyStep{Phase: "setup"}},
		{Index: 1, Wait: &WaitStep{PodsReady: &PodsReadyCondition{Namespace: "shop", Selector: "app=web", Count: 4}, Timeout: DefaultWaitTimeout}},
		{Index: 2, Wait: &WaitStep{BudgetsObserved: true, Timeout: 2 * time.Minute}},
		{Index: 3, SetReadiness: &SetReadinessStep{Namespace: "shop", Selector: "app=web", Readiness: "after=0s"}},
		{Index: 4, SetReadiness: &SetReadinessStep{Namespace: "shop", Readiness: "crashloop"}},
		{Index: 5, Deschedule: &DescheduleStep{}},
		{Index: 6, Deschedule: &DescheduleStep{}},
		{Index: 7, Apply: &ApplyStep{Phase: "preempt"}},
		{Index: 8, Wait: &WaitStep{PodScheduled: &PodScheduledCondition{Namespace: "shop", Name: "big"}, Timeout: 20 * time.Second, ContinueOnTimeout: true}},
		{Index: 9, Settle: &SettleStep{Duration: 90 * time.Second}},
	}
	if diff := cmp.Diff(wantSteps, s.Steps); diff != "" {
		t.Errorf("steps (-want,+got):\n%s", diff)
	}
	header := Scenario{Path: "x.yaml", Name: "t", Description: "Two lines\nof text.\n",
		SchedulerConfig: filepath.Join(dir, "sched.yaml"), DeschedulerPolicy: filepath.Join(dir, "policy.yaml"), DisablePUBWebhook: true}
	got := Scenario{Path: s.Path, Name: s.Name, Description: s.Description, SchedulerConfig: s.SchedulerConfig, DeschedulerPolicy: s.DeschedulerPolicy,
		DisablePUBWebhook: s.DisablePUBWebhook}
	if diff := cmp.Diff(header, got); diff != "" {
		t.Errorf("header (-want,+got):\n%s", diff)
	}

	var objs []string
	for _, o := range s.Objects {
		objs = append(objs, o.Describe()+" in "+o.Phase)
	}
	wantObjs := []string{
		"document 1 (Namespace shop) in setup",
		"document 2 (ReplicaSet shop/web) in setup",
		"document 3 (PodDisruptionBudget shop/web) in setup",
		"document 4 (Pod shop/big) in preempt",
	}
	if diff := cmp.Diff(wantObjs, objs); diff != "" {
		t.Errorf("objects (-want,+got):\n%s", diff)
	}
	var preempt []int
	for _, o := range s.ObjectsInPhase("preempt") {
		preempt = append(preempt, o.Document)
	}
	if diff := cmp.Diff([]int{4}, preempt); diff != "" {
		t.Errorf("ObjectsInPhase(preempt) documents (-want,+got):\n%s", diff)
	}
	if got := s.ObjectsInPhase("nope"); len(got) != 0 {
		t.Errorf("ObjectsInPhase(nope) = %d objects, want none", len(got))
	}
}

// TestDocumentNumbering checks that documents are numbered as a person counts
// the "---" lines.
func TestDocumentNumbering(t *testing.T) {
	header := headerStart + applySetup
	cases := []struct {
		name  string
		input string
		want  []int // documents of the objects
	}{
		{"plain", file(header, nsShop, rsWeb), []int{1, 2}},
		{"leading separator", "---\n" + file(header, nsShop, rsWeb), []int{1, 2}},
		{"comment and leading separator", "# A scenario.\n\n--- # header\n" + file(header, nsShop, rsWeb), []int{1, 2}},
		{"trailing separator", file(header, nsShop, rsWeb) + "---\n", []int{1, 2}},
		{"empty documents in the middle", file(header, "", nsShop, "# comment only\n", rsWeb), []int{2, 4}},
		{"CRLF line ends", strings.ReplaceAll(file(header, nsShop, rsWeb), "\n", "\r\n"), []int{1, 2}},
		{"byte order mark", "\xef\xbb\xbf" + file(header, nsShop, rsWeb), []int{1, 2}},
		{"separator with a comment", strings.Join([]string{header, nsShop, rsWeb}, "--- # next\n"), []int{1, 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse([]byte(tc.input), "x.yaml", t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, o := range s.Objects {
				got = append(got, o.Document)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("documents (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := testDir(t)
	sub := filepath.Join(dir, "scenarios")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(sub, "s.yaml")
	input := scenarioWith(headerStart + "scheduler: {config: ../sched.yaml}\n" + applySetup)
	if err := os.WriteFile(path, []byte(input), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if s.Path != path {
		t.Errorf("Path = %q, want %q", s.Path, path)
	}
	if want := filepath.Join(dir, "sched.yaml"); s.SchedulerConfig != want {
		t.Errorf("SchedulerConfig = %q, want %q (relative to the scenario's directory)", s.SchedulerConfig, want)
	}
	if s.DeschedulerPolicy != "" {
		t.Errorf("DeschedulerPolicy = %q, want \"\" (the shipped default)", s.DeschedulerPolicy)
	}
	if s.DisablePUBWebhook {
		t.Error("DisablePUBWebhook = true without pubWebhook in the header, want false (the webhook runs by default)")
	}

	_, err = Load(filepath.Join(dir, "missing.yaml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load of a missing file: %v, want an error wrapping os.ErrNotExist", err)
	}
}

func TestTooManyProblems(t *testing.T) {
	for _, tc := range []struct {
		extra int
		want  string
	}{
		{10, "x.yaml: 10 more problems not shown"},
		{1, "x.yaml: 1 more problem not shown"},
	} {
		var steps strings.Builder
		steps.WriteString("- apply: {phase: setup}\n")
		for range maxErrors + tc.extra {
			steps.WriteString("- settle: 0s\n")
		}
		_, err := Parse([]byte(scenarioWith(withSteps(steps.String()))), "x.yaml", t.TempDir())
		var list ErrorList
		if !errors.As(err, &list) {
			t.Fatalf("error %v, want an ErrorList", err)
		}
		if len(list) != maxErrors+1 {
			t.Fatalf("got %d problems, want %d shown and a last line counting the rest", len(list), maxErrors)
		}
		if got := list[maxErrors].Error(); got != tc.want {
			t.Errorf("last line %q, want %q", got, tc.want)
		}
	}
}
