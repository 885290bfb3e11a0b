package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/budgetguard/budgetguard/internal/promqlcheck"
)

// chartFile reads a file of charts/budgetguard.
func chartFile(t *testing.T, name string) []byte {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	data, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "charts", "budgetguard", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// ruleGroups is the spec of a PrometheusRule (monitoring.coreos.com/v1),
// decoded strictly: a misspelt field is an error.
type ruleGroups struct {
	Groups []struct {
		Name     string `json:"name"`
		Interval string `json:"interval,omitempty"`
		Rules    []struct {
			Alert       string            `json:"alert,omitempty"`
			Record      string            `json:"record,omitempty"`
			Expr        string            `json:"expr"`
			For         string            `json:"for,omitempty"`
			Labels      map[string]string `json:"labels,omitempty"`
			Annotations map[string]string `json:"annotations,omitempty"`
		} `json:"rules"`
	} `json:"groups"`
}

// objectMeta is the metadata the monitoring objects' tests read.
type objectMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name        string            `json:"name"`
		Namespace   string            `json:"namespace"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
}

// TestPrometheusRule: prometheusRule.enabled renders one PrometheusRule
// whose spec is files/prometheusrules.yaml as it stands (the file promtool
// tests), in the namespace and with the labels the values say; every rule
// is an alert with a severity label and summary and description
// annotations, and an expression whose metrics promqlcheck can name.
func TestPrometheusRule(t *testing.T) {
	ch := loadChart(t)
	if r := mustRender(t, ch); len(r.names("PrometheusRule")) != 0 {
		t.Errorf("the default values render PrometheusRules %v; it is opt-in", r.names("PrometheusRule"))
	}

	r := mustRender(t, ch, "prometheusRule.enabled=true")
	var meta objectMeta
	if err := yaml.Unmarshal(r.objects["PrometheusRule budgetguard"], &meta); err != nil {
		t.Fatal(err)
	}
	if meta.APIVersion != "monitoring.coreos.com/v1" || meta.Metadata.Namespace != releaseNamespace {
		t.Errorf("PrometheusRule budgetguard: apiVersion %q in namespace %q, want monitoring.coreos.com/v1 in %s", meta.APIVersion, meta.Metadata.Namespace, releaseNamespace)
	}
	var rendered struct {
		Spec ruleGroups `json:"spec"`
	}
	if err := yaml.Unmarshal(r.objects["PrometheusRule budgetguard"], &rendered); err != nil {
		t.Fatal(err)
	}
	var file ruleGroups
	if err := yaml.UnmarshalStrict(chartFile(t, "files/prometheusrules.yaml"), &file); err != nil {
		t.Fatalf("files/prometheusrules.yaml: %v", err)
	}
	if !reflect.DeepEqual(rendered.Spec, file) {
		t.Errorf("the rendered PrometheusRule's spec differs from files/prometheusrules.yaml:\n%+v\nwant\n%+v", rendered.Spec, file)
	}

	alerts := 0
	for _, g := range file.Groups {
		for _, rule := range g.Rules {
			if rule.Alert == "" {
				t.Errorf("group %s: a rule that is not an alert (record %q)", g.Name, rule.Record)
				continue
			}
			alerts++
			if s := rule.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("%s: severity %q, want warning or critical", rule.Alert, s)
			}
			for _, a := range []string{"summary", "description"} {
				if strings.TrimSpace(rule.Annotations[a]) == "" {
					t.Errorf("%s: no %s annotation", rule.Alert, a)
				}
			}
			if _, err := promqlcheck.Selectors(rule.Expr); err != nil {
				t.Errorf("%s: expr %q: %v", rule.Alert, rule.Expr, err)
			}
		}
	}
	if alerts == 0 {
		t.Error("files/prometheusrules.yaml holds no alert")
	}

	r = mustRender(t, ch, "prometheusRule.enabled=true", "prometheusRule.namespace=monitoring", "prometheusRule.additionalLabels.release=kube-prometheus-stack")
	meta.Metadata.Labels = nil // yaml.Unmarshal merges into maps
	if err := yaml.Unmarshal(r.objects["PrometheusRule budgetguard"], &meta); err != nil {
		t.Fatal(err)
	}
	if meta.Metadata.Namespace != "monitoring" || meta.Metadata.Labels["release"] != "kube-prometheus-stack" || meta.Metadata.Labels["app.kubernetes.io/component"] != "monitoring" {
		t.Errorf("PrometheusRule budgetguard: namespace %q, labels %v; want namespace monitoring and labels release and app.kubernetes.io/component", meta.Metadata.Namespace, meta.Metadata.Labels)
	}
}

// dashboard is what TestGrafanaDashboard reads of the dashboard's JSON.
type dashboard struct {
	UID        string `json:"uid"`
	Title      string `json:"title"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query string `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []dashboardPanel `json:"panels"`
}

type dashboardPanel struct {
	ID         int               `json:"id"`
	Type       string            `json:"type"`
	Title      string            `json:"title"`
	Datasource *datasourceRef    `json:"datasource"`
	Panels     []dashboardPanel  `json:"panels"` // a collapsed row's
	Targets    []dashboardTarget `json:"targets"`
}

type datasourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type dashboardTarget struct {
	Datasource *datasourceRef `json:"datasource"`
	RefID      string         `json:"refId"`
	Expr       string         `json:"expr"`
}

// TestGrafanaDashboard: grafanaDashboard.enabled renders one ConfigMap that
// carries the sidecar's label and holds files/dashboard.json as it stands;
// the dashboard queries a ${datasource} variable of type prometheus in
// every panel, and every query is one promqlcheck can name the metrics of.
func TestGrafanaDashboard(t *testing.T) {
	ch := loadChart(t)
	if r := mustRender(t, ch); r.has("ConfigMap", "budgetguard-dashboard") {
		t.Error("the default values render the dashboard's ConfigMap; it is opt-in")
	}
	file := chartFile(t, "files/dashboard.json")

	r := mustRender(t, ch, "grafanaDashboard.enabled=true")
	var cm struct {
		objectMeta
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(r.objects["ConfigMap budgetguard-dashboard"], &cm); err != nil {
		t.Fatal(err)
	}
	if cm.Metadata.Namespace != releaseNamespace || cm.Metadata.Labels["grafana_dashboard"] != "1" {
		t.Errorf("ConfigMap budgetguard-dashboard: namespace %q, labels %v; want %s and grafana_dashboard: \"1\"", cm.Metadata.Namespace, cm.Metadata.Labels, releaseNamespace)
	}
	if got := cm.Data["budgetguard.json"]; got != strings.TrimRight(string(file), "\n") {
		t.Errorf("the ConfigMap's budgetguard.json is not files/dashboard.json (%d bytes, want %d)", len(got), len(file))
	}

	r = mustRender(t, ch, "grafanaDashboard.enabled=true", "grafanaDashboard.namespace=grafana", "grafanaDashboard.label=dashboards.example.com/load",
		"grafanaDashboard.labelValue=yes", "grafanaDashboard.additionalLabels.team=platform", "grafanaDashboard.annotations.grafana_folder=budgetguard")
	cm.Metadata.Labels, cm.Metadata.Annotations = nil, nil // yaml.Unmarshal merges into maps
	if err := yaml.Unmarshal(r.objects["ConfigMap budgetguard-dashboard"], &cm); err != nil {
		t.Fatal(err)
	}
	l := cm.Metadata.Labels
	if cm.Metadata.Namespace != "grafana" || l["dashboards.example.com/load"] != "yes" || l["team"] != "platform" || cm.Metadata.Annotations["grafana_folder"] != "budgetguard" {
		t.Errorf("ConfigMap budgetguard-dashboard: namespace %q, labels %v, annotations %v; want what the values set", cm.Metadata.Namespace, l, cm.Metadata.Annotations)
	}
	if _, ok := l["grafana_dashboard"]; ok {
		t.Errorf("labels %v: grafana_dashboard is there although grafanaDashboard.label names another", l)
	}

	var d dashboard
	if err := json.Unmarshal(file, &d); err != nil {
		t.Fatalf("files/dashboard.json: %v", err)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("uid %q, title %q: want both", d.UID, d.Title)
	}
	hasVar := false
	for _, v := range d.Templating.List {
		if v.Name == "datasource" {
			hasVar = v.Type == "datasource" && v.Query == "prometheus"
		}
		if v.Type == "query" {
			// test/e2e checks the panels' queries against the binaries'
			// /metrics, not the variables'.
			t.Errorf("variable %s is a query; checkMonitoringQueries (test/e2e) would not check it", v.Name)
		}
	}
	if !hasVar {
		t.Errorf("templating %+v: want a variable datasource of type datasource, query prometheus", d.Templating.List)
	}
	var walk func(panels []dashboardPanel)
	ids := map[int]string{}
	queries := 0
	walk = func(panels []dashboardPanel) {
		for _, p := range panels {
			if other, dup := ids[p.ID]; dup {
				t.Errorf("panels %q and %q share id %d", other, p.Title, p.ID)
			}
			ids[p.ID] = p.Title
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			if p.Datasource == nil || p.Datasource.Type != "prometheus" || p.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q: datasource %+v, want prometheus ${datasource}", p.Title, p.Datasource)
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, q := range p.Targets {
				queries++
				if q.Datasource == nil || q.Datasource.UID != "${datasource}" {
					t.Errorf("panel %q, query %s: datasource %+v, want ${datasource}", p.Title, q.RefID, q.Datasource)
				}
				if _, err := promqlcheck.Selectors(q.Expr); err != nil {
					t.Errorf("panel %q, query %s %q: %v", p.Title, q.RefID, q.Expr, err)
				}
			}
		}
	}
	walk(d.Panels)
	if queries == 0 {
		t.Error("files/dashboard.json holds no query")
	}
}
