package perfconfig

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// UpstreamPrefix starts a template path in the budgets file that is relative
// to the directory of upstream's workload file (scheduler_perf's
// default_preemption/ since Kubernetes 1.37) rather than to the budgets
// file, for example "upstream:../templates/pod-high-priority.yaml".
const UpstreamPrefix = "upstream:"

// Options says what Generate puts together.
type Options struct {
	// UpstreamConfig is upstream's workload file of the preemption test
	// cases (scheduler_perf's default_preemption/performance-config.yaml).
	UpstreamConfig string
	// UpstreamTestCases names the upstream test cases taken unchanged, in
	// this order.
	UpstreamTestCases []string
	// UpstreamWorkloads names, for an upstream test case whose workloads
	// have parameters of their own (not initNodes, initPods and
	// measurePods), the workloads of upstream's to run as they are: each
	// gets the labels Label and "nodes-<its initNodes>", and no workload is
	// added for Nodes. Test cases not named here get one per Nodes size.
	UpstreamWorkloads map[string][]string
	// BudgetsConfig is budgetguard's file of budgeted test cases, in
	// scheduler_perf's format.
	BudgetsConfig string
	// SchedulerConfig is the KubeSchedulerConfiguration every test case
	// runs with (its schedulerConfigPath).
	SchedulerConfig string
	// Nodes are the sizes of the workloads added to each upstream test case:
	// initNodes = n, initPods = 4n, measurePods = n, upstream's proportions,
	// named "nodes=<n>" and labelled Label and "nodes-<n>".
	Nodes []int
	// Label is set on every workload Generate adds.
	Label string
}

// MetricsCollectorConfig is the metricsCollectorConfig of every test case:
// the PostFilter extension point's latency (and the pod scheduling latency),
// alone, so that scheduler_perf's benchmark output names each figure once.
// SchedulingThroughput is always collected.
var MetricsCollectorConfig = map[string]any{
	"metrics": map[string]any{
		"scheduler_framework_extension_point_duration_seconds": []any{
			map[string]any{"label": "extension_point", "values": []any{"PostFilter"}},
		},
		"scheduler_pod_scheduling_duration_seconds": nil,
	},
}

type testCase = map[string]any

// Generate returns the scheduler_perf workload file described by o.
func Generate(o Options) ([]byte, error) {
	if o.SchedulerConfig == "" {
		return nil, errors.New("perfconfig: no scheduler configuration (Options.SchedulerConfig)")
	}
	schedulerConfig, err := filepath.Abs(o.SchedulerConfig)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(schedulerConfig); err != nil {
		return nil, fmt.Errorf("scheduler configuration: %w", err)
	}
	upstream, err := readTestCases(o.UpstreamConfig)
	if err != nil {
		return nil, err
	}
	upstreamDir := filepath.Dir(o.UpstreamConfig)

	for name := range o.UpstreamWorkloads {
		if !slices.Contains(o.UpstreamTestCases, name) {
			return nil, fmt.Errorf("perfconfig: UpstreamWorkloads names %q, which is not among UpstreamTestCases", name)
		}
	}
	var out []testCase
	for _, name := range o.UpstreamTestCases {
		i := slices.IndexFunc(upstream, func(tc testCase) bool { return tc["name"] == name })
		if i < 0 {
			return nil, fmt.Errorf("%s: no test case %q (upstream renamed or removed it)", o.UpstreamConfig, name)
		}
		tc := upstream[i]
		if err := resolvePaths(o.UpstreamConfig, tc, upstreamDir, upstreamDir); err != nil {
			return nil, err
		}
		workloads, _ := tc["workloads"].([]any)
		if keep, ok := o.UpstreamWorkloads[name]; ok {
			if err := labelWorkloads(o.UpstreamConfig, name, workloads, keep, o.Label); err != nil {
				return nil, err
			}
			out = append(out, tc)
			continue
		}
		for _, n := range o.Nodes {
			if n <= 0 {
				return nil, fmt.Errorf("perfconfig: node count %d is not positive", n)
			}
			workloads = append(workloads, map[string]any{
				"name":   fmt.Sprintf("nodes=%d", n),
				"labels": []any{o.Label, fmt.Sprintf("nodes-%d", n)},
				"params": map[string]any{"initNodes": n, "initPods": 4 * n, "measurePods": n},
			})
		}
		tc["workloads"] = workloads
		out = append(out, tc)
	}

	if o.BudgetsConfig != "" {
		budgets, err := readTestCases(o.BudgetsConfig)
		if err != nil {
			return nil, err
		}
		for _, tc := range budgets {
			if slices.ContainsFunc(out, func(u testCase) bool { return u["name"] == tc["name"] }) {
				return nil, fmt.Errorf("%s: test case %q has the name of an upstream test case", o.BudgetsConfig, tc["name"])
			}
			if err := resolvePaths(o.BudgetsConfig, tc, filepath.Dir(o.BudgetsConfig), upstreamDir); err != nil {
				return nil, err
			}
			out = append(out, tc)
		}
	}

	for _, tc := range out {
		tc["schedulerConfigPath"] = schedulerConfig
		tc["metricsCollectorConfig"] = MetricsCollectorConfig
	}
	return yaml.Marshal(out)
}

// labelWorkloads adds label and "nodes-<initNodes>" to the labels of each
// workload of test case tc named in keep; it fails on a name that is not
// there, or a workload without an integer initNodes.
func labelWorkloads(file, tc string, workloads []any, keep []string, label string) error {
	for _, name := range keep {
		i := slices.IndexFunc(workloads, func(w any) bool { return w.(map[string]any)["name"] == name })
		if i < 0 {
			return fmt.Errorf("%s: test case %q: no workload %q (upstream renamed or removed it)", file, tc, name)
		}
		w := workloads[i].(map[string]any)
		params, _ := w["params"].(map[string]any)
		nodes, ok := params["initNodes"].(float64)
		if !ok || nodes != float64(int(nodes)) || nodes <= 0 {
			return fmt.Errorf("%s: test case %q: workload %q: params.initNodes is not a positive integer", file, tc, name)
		}
		labels, _ := w["labels"].([]any)
		w["labels"] = append(labels, label, fmt.Sprintf("nodes-%d", int(nodes)))
	}
	return nil
}

// readTestCases reads a scheduler_perf workload file and checks its outline:
// a list of test cases, each with a name, ops and workloads, each workload
// with a name. scheduler_perf checks the rest strictly when it runs.
func readTestCases(path string) ([]testCase, error) {
	if path == "" {
		return nil, errors.New("perfconfig: no workload file given")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var raw any
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	list, ok := raw.([]any)
	if !ok {
		return nil, fmt.Errorf("%s: want a list of test cases, got %s", path, kindOf(raw))
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("%s: no test cases", path)
	}
	seen := map[string]bool{}
	out := make([]testCase, 0, len(list))
	for i, item := range list {
		tc, ok := item.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: test case %d: want a mapping, got %s", path, i, kindOf(item))
		}
		name, _ := tc["name"].(string)
		if name == "" {
			return nil, fmt.Errorf("%s: test case %d: no name", path, i)
		}
		if seen[name] {
			return nil, fmt.Errorf("%s: test case %q: the name is used twice", path, name)
		}
		seen[name] = true
		if ops, ok := tc["workloadTemplate"].([]any); !ok || len(ops) == 0 {
			return nil, fmt.Errorf("%s: test case %q: workloadTemplate must be a non-empty list of ops", path, name)
		}
		workloads, ok := tc["workloads"].([]any)
		if !ok || len(workloads) == 0 {
			return nil, fmt.Errorf("%s: test case %q: workloads must be a non-empty list", path, name)
		}
		for j, w := range workloads {
			wm, ok := w.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s: test case %q: workload %d: want a mapping, got %s", path, name, j, kindOf(w))
			}
			if n, _ := wm["name"].(string); n == "" {
				return nil, fmt.Errorf("%s: test case %q: workload %d: no name", path, name, j)
			}
		}
		out = append(out, tc)
	}
	return out, nil
}

// resolvePaths makes every template path of tc absolute: relative to dir, or
// to upstreamDir when it starts with UpstreamPrefix. It fails on a path that
// is not a string or names no file.
func resolvePaths(file string, tc testCase, dir, upstreamDir string) error {
	name := tc["name"]
	resolve := func(where, p string) (string, error) {
		base := dir
		if rest, ok := strings.CutPrefix(p, UpstreamPrefix); ok {
			p, base = rest, upstreamDir
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(base, p)
		}
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s: test case %q: %s: %w", file, name, where, err)
		}
		return p, nil
	}
	fix := func(where string, m map[string]any) error {
		for k, v := range m {
			lower := strings.ToLower(k)
			switch {
			case strings.HasSuffix(lower, "templatepath"):
				s, ok := v.(string)
				if !ok {
					return fmt.Errorf("%s: test case %q: %s: %s must be a path, got %s", file, name, where, k, kindOf(v))
				}
				p, err := resolve(where+": "+k, s)
				if err != nil {
					return err
				}
				m[k] = p
			case strings.HasSuffix(lower, "templatepaths"):
				list, ok := v.([]any)
				if !ok {
					return fmt.Errorf("%s: test case %q: %s: %s must be a list of paths, got %s", file, name, where, k, kindOf(v))
				}
				for i, item := range list {
					s, ok := item.(string)
					if !ok {
						return fmt.Errorf("%s: test case %q: %s: %s[%d] must be a path, got %s", file, name, where, k, i, kindOf(item))
					}
					p, err := resolve(fmt.Sprintf("%s: %s[%d]", where, k, i), s)
					if err != nil {
						return err
					}
					list[i] = p
				}
			}
		}
		return nil
	}
	if err := fix("test case", tc); err != nil {
		return err
	}
	for i, op := range tc["workloadTemplate"].([]any) {
		m, ok := op.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: test case %q: op %d: want a mapping, got %s", file, name, i, kindOf(op))
		}
		if err := fix(fmt.Sprintf("op %d (%v)", i, m["opcode"]), m); err != nil {
			return err
		}
	}
	return nil
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "nothing"
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	case string:
		return "a string"
	default:
		return fmt.Sprintf("%T", v)
	}
}
