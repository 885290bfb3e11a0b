package audit

import (
	"fmt"
	"os"
	"path/filepath"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"sigs.k8s.io/yaml"
)

// File names APIServerFlags writes into its directory.
const (
	PolicyFileName = "audit-policy.yaml"
	LogFileName    = "audit.log"
)

// Policy returns the audit policy the auditor needs, logged once, at
// ResponseComplete (or Panic): pod deletes and pods/eviction creates at
// level Request (the request body carries dryRun), updates and patches of
// PodUnavailableBudgets and their status at level Request (the body carries
// the disruption records), and pod deletecollections; nothing else.
func Policy() *auditv1.Policy {
	return &auditv1.Policy{
		TypeMeta:   metav1.TypeMeta{APIVersion: auditv1.SchemeGroupVersion.String(), Kind: "Policy"},
		OmitStages: []auditv1.Stage{auditv1.StageRequestReceived, auditv1.StageResponseStarted},
		Rules: []auditv1.PolicyRule{
			{
				Level:     auditv1.LevelRequest,
				Verbs:     []string{"delete"},
				Resources: []auditv1.GroupResources{{Group: "", Resources: []string{"pods"}}},
			},
			{
				Level:     auditv1.LevelRequest,
				Verbs:     []string{"create"},
				Resources: []auditv1.GroupResources{{Group: "", Resources: []string{"pods/eviction"}}},
			},
			// Who writes a PUB's status, and the disruptedPods it writes:
			// a record there is the decision of a disruption (docs/audit.md).
			{
				Level:     auditv1.LevelRequest,
				Verbs:     []string{"update", "patch"},
				Resources: []auditv1.GroupResources{{Group: pubGroup, Resources: []string{"podunavailablebudgets", "podunavailablebudgets/status"}}},
			},
			// A pod deleted by a collection delete is explained by it.
			{
				Level:     auditv1.LevelMetadata,
				Verbs:     []string{"deletecollection"},
				Resources: []auditv1.GroupResources{{Group: "", Resources: []string{"pods"}}},
			},
			{Level: auditv1.LevelNone},
		},
	}
}

// APIServerFlags writes the audit policy (Policy) into dir, which must
// exist, and returns the kube-apiserver flags that make it log to
// dir/audit.log as JSON lines of audit.k8s.io/v1 Events, in blocking mode
// (the line is written before the response leaves the server) and without
// rotation (the auditor tails one file), and the log's path.
func APIServerFlags(dir string) (flags []string, logPath string, err error) {
	if dir == "" {
		return nil, "", fmt.Errorf("audit: directory for the audit policy and log is empty")
	}
	if fi, err := os.Stat(dir); err != nil {
		return nil, "", fmt.Errorf("audit: directory for the audit policy and log: %w", err)
	} else if !fi.IsDir() {
		return nil, "", fmt.Errorf("audit: %s is not a directory", dir)
	}
	data, err := yaml.Marshal(Policy())
	if err != nil {
		return nil, "", fmt.Errorf("audit: encode audit policy: %w", err)
	}
	policyPath := filepath.Join(dir, PolicyFileName)
	if err := os.WriteFile(policyPath, data, 0o600); err != nil {
		return nil, "", fmt.Errorf("audit: write audit policy: %w", err)
	}
	logPath = filepath.Join(dir, LogFileName)
	flags = []string{
		"--audit-policy-file=" + policyPath,
		"--audit-log-path=" + logPath,
		"--audit-log-format=json",
		"--audit-log-mode=blocking",
		"--audit-log-version=" + auditv1.SchemeGroupVersion.String(),
		// 0 disables rotation: the log is one file that only grows.
		"--audit-log-maxsize=0",
	}
	return flags, logPath, nil
}
