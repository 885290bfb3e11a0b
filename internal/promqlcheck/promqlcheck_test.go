package promqlcheck

import (
	"reflect"
	"strings"
	"testing"
)

func TestSelectors(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []Selector
	}{
		{
			"budgetguard_profile_protected == 0",
			[]Selector{{"budgetguard_profile_protected", nil}},
		},
		{
			`sum by (reason) (rate(budgetguard_preemption_blocked_total{reason!="CacheNotSynced"}[15m])) > 0`,
			[]Selector{{"budgetguard_preemption_blocked_total", []string{"reason"}}},
		},
		{
			// The grouping clause after the arguments, and without().
			`sum(rate(x_total{a="1"}[5m])) by (b) / max without (c, d) (y)`,
			[]Selector{{"x_total", []string{"a", "b"}}, {"y", []string{"c", "d"}}},
		},
		{
			// Nested aggregations: the inner by() labels, and the outer
			// ones, on the same selector; Grafana's variable as the range.
			`histogram_quantile(0.99, sum by (le, status) (rate(scheduler_framework_extension_point_duration_seconds_bucket{extension_point="PostFilter"}[$__rate_interval])))`,
			[]Selector{{"scheduler_framework_extension_point_duration_seconds_bucket", []string{"extension_point", "le", "status"}}},
		},
		{
			// A name given by __name__; regular-expression matchers; set
			// operators; or vector(0); a string with a brace and a
			// keyword in it.
			`{__name__="descheduler_pods_evicted_total", result=~"error|x"} - (sum(increase(r{extension_point=~"A|B", m="by (x) {"}[1h])) or vector(0)) >= 1`,
			[]Selector{{"descheduler_pods_evicted_total", []string{"result"}}, {"r", []string{"extension_point", "m"}}},
		},
		{
			// Subqueries, offset, @, unary minus, bool, numbers as
			// durations and floats, a comment, the same metric twice.
			"-max_over_time(rate(a:b_total[5m])[1h:30s] offset 1h @ 1700000000) > bool 1e3 # a comment\n or a:b_total",
			[]Selector{{"a:b_total", nil}},
		},
		{
			// Aggregations with a parameter; a metric named like an
			// aggregation when used as a selector.
			`topk(3, count_values("v", budgetguard_build_info)) + count`,
			[]Selector{{"budgetguard_build_info", nil}, {"count", nil}},
		},
		{
			`count by (version, kubernetes_version, descheduler_version) (budgetguard_build_info)`,
			[]Selector{{"budgetguard_build_info", []string{"descheduler_version", "kubernetes_version", "version"}}},
		},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			got, err := Selectors(tc.expr)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestSelectorsRefuses: what the extractor cannot check is an error, never
// a pass with fewer selectors.
func TestSelectorsRefuses(t *testing.T) {
	for _, tc := range []struct{ expr, want string }{
		{`rates(x[5m])`, "unknown function rates"},
		{`sum(rate(x[5m])`, `want ")"`},
		{`{a="b"}`, "without a metric name"},
		{`{__name__=~"budgetguard_.*"}`, "matched exactly"},
		{`a / on(job) b`, "vector matching (on)"},
		{`a * ignoring(x) group_left b`, "vector matching (ignoring)"},
		{`vector(1)`, "selects no metric"},
		{`x{a="b}`, "unterminated string"},
		{`x{"a"="b"}`, "want a label name"},
		{`x{a=b}`, "want a quoted label value"},
		{`sum by ("a") (x)`, "want a label name"},
		{`sum by (a) (vector(1))`, "over no metric"},
		{`x[5m`, `want "]"`},
		{`x y`, "unexpected after a complete expression"},
		{`x == by`, "keyword by"},
		{`x ; y`, "unexpected"},
		{``, "want an operand"},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			got, err := Selectors(tc.expr)
			if err == nil {
				t.Fatalf("accepted, with selectors %v", got)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to say %q", err, tc.want)
			}
		})
	}
}

const exposition = `# HELP budgetguard_cache_not_synced 1 while the budget cache is not synced.
# TYPE budgetguard_cache_not_synced gauge
budgetguard_cache_not_synced{component="scheduler",reason="DiscoveryFailed"} 0
budgetguard_cache_not_synced{component="scheduler",reason="Informers\"Not}Synced"} 0
# HELP budgetguard_preemption_eviction_failures_total Victim evictions the API server refused.
# TYPE budgetguard_preemption_eviction_failures_total counter
# HELP x_seconds A histogram.
# TYPE x_seconds histogram
x_seconds_bucket{le="0.1",profile="p"} 1
x_seconds_bucket{le="+Inf",profile="p"} 2
x_seconds_sum{profile="p"} 0.3
x_seconds_count{profile="p"} 2
plain_total 7 1700000000000
`

func TestParseExposition(t *testing.T) {
	got, err := ParseExposition(exposition)
	if err != nil {
		t.Fatal(err)
	}
	want := Exposition{
		"budgetguard_cache_not_synced": {"component": true, "reason": true},
		"x_seconds_bucket":             {"le": true, "profile": true},
		"x_seconds_sum":                {"profile": true},
		"x_seconds_count":              {"profile": true},
		"plain_total":                  {},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for _, bad := range []string{"x{a=\"1\"", "x{a=1} 1", "{a=\"1\"} 1", "x", "x 1 2 3"} {
		if _, err := ParseExposition(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestCheck(t *testing.T) {
	sched, err := ParseExposition(exposition)
	if err != nil {
		t.Fatal(err)
	}
	desched, err := ParseExposition(`budgetguard_cache_not_synced{component="descheduler",reason="DiscoveryFailed"} 0
descheduler_loop_duration_seconds_bucket{le="1"} 1
`)
	if err != nil {
		t.Fatal(err)
	}
	scrapes := map[string]Exposition{"scheduler": sched, "descheduler": desched}
	for _, tc := range []struct {
		expr    string
		want    []string // binaries
		wantErr string
	}{
		{`max by (component, reason) (budgetguard_cache_not_synced)`, []string{"descheduler", "scheduler"}, ""},
		{`histogram_quantile(0.99, sum by (le, profile) (rate(x_seconds_bucket[5m])))`, []string{"scheduler"}, ""},
		{`histogram_quantile(0.99, sum by (le) (rate(descheduler_loop_duration_seconds_bucket[5m])))`, []string{"descheduler"}, ""},
		{`sum(rate(x_seconds_count{profile="p"}[5m]))`, []string{"scheduler"}, ""},
		// A label the metric does not carry, in a matcher and in by().
		{`budgetguard_cache_not_synced{kind="x"}`, nil, "no label kind"},
		{`sum by (instance) (budgetguard_cache_not_synced)`, nil, "no label instance"},
		// A histogram's family name is not a sample name.
		{`x_seconds`, nil, "no metric of that name"},
		// Described (# HELP) but with no sample: not served.
		{`budgetguard_preemption_eviction_failures_total`, nil, "no metric of that name"},
		{`sum(rate(budgetguard_no_such_total[5m]))`, nil, "no metric of that name"},
		// The label is on the descheduler's loop histogram only as le.
		{`sum by (le, profile) (descheduler_loop_duration_seconds_bucket)`, nil, "the descheduler's has no label profile"},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			sels, err := Selectors(tc.expr)
			if err != nil {
				t.Fatal(err)
			}
			if len(sels) != 1 {
				t.Fatalf("selectors %v, want one", sels)
			}
			got, err := Check(sels[0], scrapes)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("binaries %v, error %v; want an error saying %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("binaries %v, error %v; want %v", got, err, tc.want)
			}
		})
	}
}
