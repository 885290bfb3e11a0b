package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// probeUserAgent marks the requests that must be forbidden, so that the
// audit log tells them from the components' own.
const probeUserAgent = "budgetguard-e2e-forbidden-probe"

// auditFlags writes an audit policy that logs every request of the
// ServiceAccounts of namespace at level Metadata, and returns the
// kube-apiserver flags for it and the log's path.
func auditFlags(t *testing.T, dir, namespace string) ([]string, string) {
	t.Helper()
	policy := auditv1.Policy{
		TypeMeta:   metav1.TypeMeta{APIVersion: auditv1.SchemeGroupVersion.String(), Kind: "Policy"},
		OmitStages: []auditv1.Stage{auditv1.StageRequestReceived},
		Rules: []auditv1.PolicyRule{
			{Level: auditv1.LevelMetadata, UserGroups: []string{"system:serviceaccounts:" + namespace}},
			{Level: auditv1.LevelNone},
		},
	}
	data, err := yaml.Marshal(policy)
	if err != nil {
		t.Fatal(err)
	}
	policyPath := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policyPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "audit.log")
	return []string{
		"--audit-policy-file=" + policyPath,
		"--audit-log-path=" + logPath,
		"--audit-log-format=json",
		"--audit-log-mode=blocking",
		"--audit-log-maxsize=0",
	}, logPath
}

// readAudit returns the ResponseComplete events of the audit log.
func readAudit(t *testing.T, path string) []auditv1.Event {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var events []auditv1.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev auditv1.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("audit log line: %v", err)
		}
		if ev.Stage == auditv1.StageResponseComplete {
			events = append(events, ev)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return events
}

// describe names an audit event: user, verb, resource and URI.
func describe(ev auditv1.Event) string {
	return ev.User.Username + " " + ev.Verb + " " + ev.RequestURI
}

// probe is a request that the chart's RBAC must refuse.
type probe struct {
	who  string // "scheduler" or "descheduler"
	what string
	do   func(ctx context.Context, c kubernetes.Interface) error
}

// forbiddenProbes are the requests least privilege must refuse: the
// descheduler evicts and never deletes pods, neither component writes
// budgets, and neither reads Secrets.
func forbiddenProbes(workloadNS, releaseNS, pod, pdb string) []probe {
	newPDB := func() *policyv1.PodDisruptionBudget {
		return &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: "e2e-probe", Namespace: workloadNS},
			Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptrIntOrString(1), Selector: &metav1.LabelSelector{}},
		}
	}
	return []probe{
		{"descheduler", "delete pod " + workloadNS + "/" + pod, func(ctx context.Context, c kubernetes.Interface) error {
			return c.CoreV1().Pods(workloadNS).Delete(ctx, pod, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		}},
		{"descheduler", "create a PodDisruptionBudget in " + workloadNS, func(ctx context.Context, c kubernetes.Interface) error {
			_, err := c.PolicyV1().PodDisruptionBudgets(workloadNS).Create(ctx, newPDB(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}},
		{"descheduler", "delete PodDisruptionBudget " + workloadNS + "/" + pdb, func(ctx context.Context, c kubernetes.Interface) error {
			return c.PolicyV1().PodDisruptionBudgets(workloadNS).Delete(ctx, pdb, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		}},
		{"descheduler", "list Secrets in " + releaseNS, func(ctx context.Context, c kubernetes.Interface) error {
			_, err := c.CoreV1().Secrets(releaseNS).List(ctx, metav1.ListOptions{})
			return err
		}},
		{"scheduler", "list Secrets in all namespaces", func(ctx context.Context, c kubernetes.Interface) error {
			_, err := c.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
			return err
		}},
		{"scheduler", "get Secret kube-system/budgetguard-e2e", func(ctx context.Context, c kubernetes.Interface) error {
			_, err := c.CoreV1().Secrets("kube-system").Get(ctx, "budgetguard-e2e", metav1.GetOptions{})
			return err
		}},
		{"scheduler", "create a PodDisruptionBudget in " + workloadNS, func(ctx context.Context, c kubernetes.Interface) error {
			_, err := c.PolicyV1().PodDisruptionBudgets(workloadNS).Create(ctx, newPDB(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}},
		{"scheduler", "update the status of PodDisruptionBudget " + workloadNS + "/" + pdb, func(ctx context.Context, c kubernetes.Interface) error {
			_, err := c.PolicyV1().PodDisruptionBudgets(workloadNS).UpdateStatus(ctx, &policyv1.PodDisruptionBudget{
				ObjectMeta: metav1.ObjectMeta{Name: pdb, Namespace: workloadNS},
			}, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}},
	}
}

func ptrIntOrString(n int) *intstr.IntOrString {
	v := intstr.FromInt32(int32(n))
	return &v
}

// runProbes sends each probe as its component and checks that the API
// server refused it with 403.
func runProbes(t *testing.T, ctx context.Context, clients map[string]kubernetes.Interface, probes []probe) {
	t.Helper()
	for _, p := range probes {
		err := p.do(ctx, clients[p.who])
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s may %s: got %v, want 403 Forbidden", p.who, p.what, err)
		} else {
			t.Logf("forbidden as it must be: %s may not %s", p.who, p.what)
		}
	}
}

// checkAudit checks the audit log: no request of the components themselves
// was forbidden, and every probe was, count of them.
func checkAudit(t *testing.T, events []auditv1.Event, users map[string]string, probes int) {
	t.Helper()
	byUser := map[string]int{}
	forbiddenProbes := 0
	for _, ev := range events {
		who, ok := users[ev.User.Username]
		if !ok {
			continue
		}
		byUser[who]++
		code := int32(0)
		if ev.ResponseStatus != nil {
			code = ev.ResponseStatus.Code
		}
		isProbe := strings.Contains(ev.UserAgent, probeUserAgent)
		switch {
		case isProbe && code == 403:
			forbiddenProbes++
		case isProbe:
			t.Errorf("probe not forbidden: %s -> %d", describe(ev), code)
		case code == 403:
			t.Errorf("the chart's RBAC is not enough: %s was forbidden (user agent %q)", describe(ev), ev.UserAgent)
		}
	}
	for _, who := range users {
		if byUser[who] == 0 {
			t.Errorf("the audit log holds no request of the %s", who)
		}
	}
	if forbiddenProbes != probes {
		t.Errorf("the audit log holds %d forbidden probes, want %d", forbiddenProbes, probes)
	}
	t.Logf("audit log: %v requests by component; %d probes forbidden", byUser, forbiddenProbes)
}

// podNames returns the names of pods.
func podNames(pods []corev1.Pod) []string {
	names := make([]string, 0, len(pods))
	for _, p := range pods {
		names = append(names, p.Name)
	}
	return names
}
