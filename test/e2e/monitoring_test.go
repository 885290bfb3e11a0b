package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/budgetguard/budgetguard/internal/promqlcheck"
	"github.com/budgetguard/budgetguard/internal/testenv"
	"github.com/budgetguard/budgetguard/internal/testobj"
	"github.com/budgetguard/budgetguard/sandbox"
)

const refusedNS = "e2e-refused"

// apiRefusalCase makes the API server refuse a disruption budgetguard
// allowed: a ValidatingAdmissionPolicy denies every eviction in its
// namespace, and a preemptor there needs two of four victims no budget
// covers. BudgetAwarePreemption evicts, is refused (422), and counts it in
// budgetguard_preemption_eviction_failures_total, a counter vector that has
// no series, and so is not on /metrics at all, until its first failure:
// the alert on it can be checked against the scrape only after this.
func apiRefusalCase(t *testing.T, env *testenv.Env, scheduler *component, token string) {
	t.Helper()
	ctx := testenv.Context(t)
	if _, body, err := scheduler.get(ctx, "/metrics", token); err == nil {
		t.Logf("before any refused eviction, the scheduler's /metrics describes budgetguard_preemption_eviction_failures_total (# HELP): %v",
			strings.Contains(body, "# HELP budgetguard_preemption_eviction_failures_total "))
	}
	ensureNamespace(t, env.Client, refusedNS)
	env.DumpOnFailure(t, refusedNS)
	node := env.ReadyNode(t, refusedNS, "4")
	labels := map[string]string{"app": "filler"}
	template := testobj.MakePod().Labels(labels).SchedulerName(schedulerName).Container("filler", "1").OnNodes(node).Obj()
	env.CreateReplicaSet(t, refusedNS, testobj.MakeReplicaSet().Name("filler").Replicas(4).Template(corev1.PodTemplateSpec{
		ObjectMeta: template.ObjectMeta, Spec: template.Spec,
	}))
	pods := env.WaitForReadyPods(t, refusedNS, labels, 4)

	const policyName = "e2e-refuse-evictions"
	testenv.Create(t, env.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies(), &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: policyName},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
						Rule: admissionregistrationv1.Rule{
							APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods/eviction"},
						},
					},
				}},
			},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: "evictions are refused in " + refusedNS}},
		},
	})
	testenv.Create(t, env.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings(), &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policyName},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policyName,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: refusedNS}},
			},
		},
	})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testenv.DefaultWait)
		defer cancel()
		_ = env.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, policyName, metav1.DeleteOptions{})
		_ = env.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(ctx, policyName, metav1.DeleteOptions{})
	})
	// The admission plugin reads policies from an informer: in force once
	// a dry-run eviction is refused.
	testenv.WaitFor(t, testenv.DefaultWait, "the policy refusing evictions in "+refusedNS, func(ctx context.Context) (bool, error) {
		err := env.Client.PolicyV1().Evictions(refusedNS).Evict(ctx, &policyv1.Eviction{
			ObjectMeta:    metav1.ObjectMeta{Name: pods[0].Name, Namespace: refusedNS},
			DeleteOptions: &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}},
		})
		return err != nil && strings.Contains(err.Error(), policyName), fmt.Errorf("dry-run eviction: %v", err)
	})

	high := env.PriorityClass(t, refusedNS, 1000)
	testenv.WaitFor(t, testenv.DefaultWait, "the preemptor created", func(ctx context.Context) (bool, error) {
		_, err := env.Client.CoreV1().Pods(refusedNS).Create(ctx, testobj.MakePod().Name("urgent").SchedulerName(schedulerName).
			PriorityClass(high).Container("urgent", "2").OnNodes(node).Obj(), metav1.CreateOptions{})
		return err == nil, err
	})
	testenv.WaitFor(t, time.Minute, "the scheduler to count a victim eviction the API server refused", func(ctx context.Context) (bool, error) {
		_, body, err := scheduler.get(ctx, "/metrics", token)
		if err != nil {
			return false, err
		}
		v, _ := metricValue(body, "budgetguard_preemption_eviction_failures_total")
		return v > 0, fmt.Errorf("budgetguard_preemption_eviction_failures_total %v", v)
	})
	// The preemptor would be retried for as long as the test runs.
	if err := env.Client.CoreV1().Pods(refusedNS).Delete(ctx, "urgent", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Errorf("delete the preemptor: %v", err)
	}
}

// checkMonitoringQueries checks every query the chart ships, the
// PrometheusRule's alerts and the Grafana dashboard's panels, rendered by
// hack/helm.sh as a user enables them, against what the binaries serve:
// scrapes holds each binary's /metrics (by "scheduler", "descheduler"),
// taken after the test drove the events that give its counter vectors
// their first series. A query fails when it names a metric neither binary
// serves, or a label (in a matcher, by() or without()) that the metric's
// samples do not carry.
func checkMonitoringQueries(t *testing.T, cp *sandbox.ControlPlane, scrapes map[string]string) {
	parsed := map[string]promqlcheck.Exposition{}
	for binary, body := range scrapes {
		e, err := promqlcheck.ParseExposition(body)
		if err != nil {
			t.Fatalf("%s /metrics: %v", binary, err)
		}
		parsed[binary] = e
	}

	objs := renderChart(t, releaseNS, "prometheusRule.enabled=true", "grafanaDashboard.enabled=true")
	type query struct{ where, expr string }
	var queries []query
	rule := find(t, objs, "PrometheusRule", "budgetguard")
	groups, _, err := unstructured.NestedSlice(rule.Object, "spec", "groups")
	if err != nil || len(groups) == 0 {
		t.Fatalf("PrometheusRule budgetguard: spec.groups %v (%v)", groups, err)
	}
	for _, g := range groups {
		g, _ := g.(map[string]any)
		rules, _, _ := unstructured.NestedSlice(g, "rules")
		for _, r := range rules {
			r, _ := r.(map[string]any)
			name, _ := r["alert"].(string)
			expr, _ := r["expr"].(string)
			queries = append(queries, query{"alert " + name, expr})
		}
	}
	alerts := len(queries)

	cm := find(t, objs, "ConfigMap", "budgetguard-dashboard")
	// The API server takes the ConfigMap as it stands (its size included).
	applyAll(t, cp, []*unstructured.Unstructured{cm}, true)
	data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
	var dashboard any
	if err := json.Unmarshal([]byte(data["budgetguard.json"]), &dashboard); err != nil {
		t.Fatalf("ConfigMap budgetguard-dashboard: budgetguard.json: %v", err)
	}
	// Every "expr" anywhere in the dashboard: the panels' queries, a
	// collapsed row's panels included. (Its one variable is the data
	// source, which holds no query.)
	var walk func(where string, v any)
	walk = func(where string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if title, ok := v["title"].(string); ok {
				where = fmt.Sprintf("dashboard panel %v %q", v["id"], title)
			}
			if expr, ok := v["expr"].(string); ok {
				ref, _ := v["refId"].(string)
				queries = append(queries, query{where + " query " + ref, expr})
			}
			for _, child := range v {
				walk(where, child)
			}
		case []any:
			for _, child := range v {
				walk(where, child)
			}
		}
	}
	walk("dashboard", dashboard)
	if alerts == 0 || len(queries) == alerts {
		t.Fatalf("found %d alerts and %d dashboard queries; want both", alerts, len(queries)-alerts)
	}

	sort.Slice(queries, func(i, j int) bool { return queries[i].where < queries[j].where })
	checked := 0
	for _, q := range queries {
		sels, err := promqlcheck.Selectors(q.expr)
		if err != nil {
			t.Errorf("%s: %q: %v", q.where, q.expr, err)
			continue
		}
		for _, sel := range sels {
			binaries, err := promqlcheck.Check(sel, parsed)
			if err != nil {
				t.Errorf("%s: %v", q.where, err)
				continue
			}
			checked++
			t.Logf("%s: %s served by the %s", q.where, sel, strings.Join(binaries, " and the "))
		}
	}
	t.Logf("checked %d selectors of %d alerts and %d dashboard queries against the binaries' /metrics", checked, alerts, len(queries)-alerts)
}
