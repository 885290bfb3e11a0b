package audit

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apiserver/pkg/apis/audit"
	"k8s.io/apiserver/pkg/audit/policy"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/rest"
)

func TestAPIServerFlagsPolicyLogsOnlyWhatTheJudgeReads(t *testing.T) {
	dir := t.TempDir()
	flags, logPath, err := APIServerFlags(dir)
	if err != nil {
		t.Fatalf("APIServerFlags: %v", err)
	}
	policyPath := filepath.Join(dir, PolicyFileName)
	wantFlags := []string{
		"--audit-policy-file=" + policyPath,
		"--audit-log-path=" + logPath,
		"--audit-log-format=json",
		"--audit-log-mode=blocking",
		"--audit-log-version=audit.k8s.io/v1",
		"--audit-log-maxsize=0",
	}
	if diff := cmp.Diff(wantFlags, flags); diff != "" {
		t.Errorf("flags (-want,+got):\n%s", diff)
	}
	if logPath != filepath.Join(dir, LogFileName) {
		t.Errorf("log path %q is not in %s", logPath, dir)
	}

	// kube-apiserver's own loader and evaluator read the written policy.
	p, err := policy.LoadPolicyFromFile(policyPath)
	if err != nil {
		t.Fatalf("kube-apiserver cannot load the policy: %v", err)
	}
	eval := policy.NewPolicyRuleEvaluator(p)
	u := &user.DefaultInfo{Name: "system:apiserver"}
	for _, tc := range []struct {
		verb, group, resource, subresource string
		want                               audit.Level
	}{
		{"delete", "", "pods", "", audit.LevelRequest},
		{"create", "", "pods", "eviction", audit.LevelRequest},
		{"create", "", "pods", "", audit.LevelNone},
		{"get", "", "pods", "", audit.LevelNone},
		{"update", "", "pods", "status", audit.LevelNone},
		{"deletecollection", "", "pods", "", audit.LevelMetadata},
		{"delete", "", "nodes", "", audit.LevelNone},
		{"update", "policy.kruise.io", "podunavailablebudgets", "status", audit.LevelRequest},
		{"patch", "policy.kruise.io", "podunavailablebudgets", "", audit.LevelRequest},
		{"get", "policy.kruise.io", "podunavailablebudgets", "", audit.LevelNone},
		{"update", "policy", "poddisruptionbudgets", "status", audit.LevelNone},
	} {
		cfg := eval.EvaluatePolicyRule(authorizer.AttributesRecord{
			User: u, Verb: tc.verb, APIGroup: tc.group, Resource: tc.resource, Subresource: tc.subresource,
			Namespace: "shop", Name: "web-0", ResourceRequest: true, APIVersion: "v1",
		})
		if cfg.Level != tc.want {
			t.Errorf("%s %s/%s: level %s, want %s", tc.verb, tc.resource, tc.subresource, cfg.Level, tc.want)
		}
		if tc.want != audit.LevelNone {
			for _, s := range []audit.Stage{audit.StageRequestReceived, audit.StageResponseStarted} {
				if !slices.Contains(cfg.OmitStages, s) {
					t.Errorf("%s %s/%s: stage %s is logged, want only ResponseComplete", tc.verb, tc.resource, tc.subresource, s)
				}
			}
		}
	}
}

func TestAPIServerFlagsNeedsADirectory(t *testing.T) {
	for name, dir := range map[string]string{
		"empty":   "",
		"missing": filepath.Join(t.TempDir(), "nope"),
	} {
		t.Run(name, func(t *testing.T) {
			if _, _, err := APIServerFlags(dir); err == nil || !strings.Contains(err.Error(), "directory") {
				t.Errorf("APIServerFlags(%q): got %v, want an error about the directory", dir, err)
			}
		})
	}
}

func TestClassifyUserAgents(t *testing.T) {
	opts := testOptions()
	scheduler := rest.AddUserAgent(&rest.Config{}, "sandbox-scheduler").UserAgent
	for _, tc := range []struct {
		ua      string
		want    Component
		ignored bool
	}{
		{scheduler, ComponentScheduler, false},
		{"sandbox-scheduler", ComponentScheduler, false},
		{"sandbox-scheduler/leader-election", ComponentScheduler, false},
		{"sandbox-descheduler", ComponentDescheduler, false},
		{uaKubelet, "", true},
		{"sandbox-runner", "", true},
		{uaReplicaSet, ComponentOther, false},
		{"kubectl/v1.36.3 (linux/amd64) kubernetes/abcdef", ComponentOther, false},
		{"", ComponentOther, false},
		// The component name must start the user agent or the part that
		// rest.AddUserAgent appended.
		{"my-sandbox-scheduler", ComponentOther, false},
	} {
		got, ignored := opts.classify(tc.ua)
		if got != tc.want || ignored != tc.ignored {
			t.Errorf("classify(%q) = %q, ignored %v; want %q, ignored %v", tc.ua, got, ignored, tc.want, tc.ignored)
		}
	}
}
