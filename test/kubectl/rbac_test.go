package kubectl

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/budgetguard/budgetguard/internal/kubectlplugin"

	"github.com/budgetguard/budgetguard/internal/testenv"
)

// pluginRules are the rights docs/kubectl-plugin.md says the plugin needs,
// cluster-wide, without the resources named in except (as "nodes",
// "podunavailablebudgets", ...).
func pluginRules(except ...string) []rbacv1.PolicyRule {
	all := []struct {
		group, resource string
		verbs           []string
	}{
		{"", "nodes", []string{"get"}},
		{"", "events", []string{"list"}},
		{"", "pods", []string{"list", "watch"}},
		{"policy", "poddisruptionbudgets", []string{"list", "watch"}},
		{"apps", "replicasets", []string{"list", "watch"}},
		{"apps", "deployments", []string{"list", "watch"}},
		{"apps", "statefulsets", []string{"list", "watch"}},
		{"policy.kruise.io", "podunavailablebudgets", []string{"list", "watch"}},
	}
	var rules []rbacv1.PolicyRule
	for _, r := range all {
		if !slices.Contains(except, r.resource) {
			rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{r.group}, Resources: []string{r.resource}, Verbs: r.verbs})
		}
	}
	return rules
}

// userKubeconfig writes a kubeconfig for a ServiceAccount of ns that RBAC
// grants rules cluster-wide (and nothing else), once the authorizer has the
// grant, and returns its path.
func userKubeconfig(t *testing.T, ns string, rules []rbacv1.PolicyRule) string {
	t.Helper()
	ctx := testenv.Context(t)
	name := "plugin-user"
	testenv.Create(t, env.Client.CoreV1().ServiceAccounts(ns), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}})
	role := testenv.Create(t, env.Client.RbacV1().ClusterRoles(), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ns + "-plugin"}, Rules: rules})
	binding := testenv.Create(t, env.Client.RbacV1().ClusterRoleBindings(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-plugin"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
	})
	t.Cleanup(func() {
		_ = env.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
		_ = env.Client.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
	})
	user := "system:serviceaccount:" + ns + ":" + name
	for _, r := range rules {
		testenv.WaitFor(t, testenv.DefaultWait, user+" may "+r.Verbs[0]+" "+r.Resources[0], func(ctx context.Context) (bool, error) {
			sar, err := env.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: r.Verbs[0], Group: r.APIGroups[0], Resource: r.Resources[0], Namespace: ns},
			}}, metav1.CreateOptions{})
			if err != nil {
				return false, err
			}
			return sar.Status.Allowed, fmt.Errorf("not allowed yet: %s", sar.Status.Reason)
		})
	}
	tr, err := env.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s: %v", user, err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := cp.WriteKubeconfig(path, name, tr.Status.Token); err != nil {
		t.Fatal(err)
	}
	return path
}

// lineOf returns the line of s that starts with prefix, or "".
func lineOf(s, prefix string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// TestDocumentedRightsSuffice: with exactly the rights the documentation
// lists, why and lint answer, and nothing is unknown.
func TestDocumentedRightsSuffice(t *testing.T) {
	ns, node := namespaceWithNode(t)
	barePods(t, ns, node, "web", 1, nil)
	kubeconfig := userKubeconfig(t, ns, pluginRules())
	r := kubectlWith(t, kubeconfig, "why", "web-0", "-n", ns)
	if r.code != 0 || strings.Contains(r.out, "unknown") || lineOf(r.out, "NODE REMOVAL") == "" {
		t.Errorf("why: exit code %d, stderr %q, stdout:\n%s", r.code, r.errOut, r.out)
	}
	if r := kubectlWith(t, kubeconfig, "lint", "-n", ns); r.code != 0 {
		t.Errorf("lint: exit code %d, stderr %q, stdout:\n%s", r.code, r.errOut, r.out)
	}
}

// TestWhyWithoutNodeRights: a user who may not get nodes is told that what
// depends on the node is unknown, and why; not that the node is not being
// removed, and not that preemption may take the pod.
func TestWhyWithoutNodeRights(t *testing.T) {
	ns, node := namespaceWithNode(t)
	barePods(t, ns, node, "web", 1, nil)
	kubeconfig := userKubeconfig(t, ns, pluginRules("nodes"))

	r := kubectlWith(t, kubeconfig, "why", "web-0", "-n", ns)
	if r.code != 0 {
		t.Fatalf("exit code %d, stderr %q", r.code, r.errOut)
	}
	for _, field := range []string{"NODE TAINTS", "NODE REMOVAL"} {
		if l := lineOf(r.out, field); !strings.Contains(l, "unknown: no permission to get nodes") {
			t.Errorf("%s line %q does not say it is unknown for want of get on nodes:\n%s", field, l, r.out)
		}
	}
	if l := lineOf(r.out, "PREEMPTION-DELETE"); !strings.Contains(l, "UNKNOWN") || strings.Contains(l, "ALLOWED") {
		t.Errorf("PREEMPTION-DELETE line %q: want UNKNOWN (it depends on the node), not ALLOWED:\n%s", l, r.out)
	}
	expect(t, r, 0, "why-no-node-rights.txt", stabilizer(ns))

	r = kubectlWith(t, kubeconfig, "why", "web-0", "-n", ns, "-o", "json")
	var out kubectlplugin.WhyOutput
	if err := json.Unmarshal([]byte(r.out), &out); err != nil {
		t.Fatalf("-o json: %v\n%s", err, r.out)
	}
	if a := out.Autoscaler; a.NodeBeingRemoved != nil || a.NodeDeletionCandidate != nil || !strings.Contains(a.NodeUnknown, "no permission to get nodes") {
		t.Errorf("autoscaler %+v: want nodeBeingRemoved and nodeDeletionCandidate null, nodeUnknown naming get nodes", a)
	}
	if d := out.Decisions[1]; d.Allowed || d.Result != kubectlplugin.ResultUnknown {
		t.Errorf("preemption-delete %+v: want not allowed, result %s", d, kubectlplugin.ResultUnknown)
	}
}

// TestLintWithoutPUBRights: a user who may not list PodUnavailableBudgets
// is told so at once, with the verb and the resource, instead of waiting
// 30 s for the informers and being told nothing precise.
func TestLintWithoutPUBRights(t *testing.T) {
	ns, node := namespaceWithNode(t)
	barePods(t, ns, node, "web", 1, nil)
	kubeconfig := userKubeconfig(t, ns, pluginRules("podunavailablebudgets"))

	start := time.Now()
	r := kubectlWith(t, kubeconfig, "lint", "-n", ns)
	took := time.Since(start)
	if r.code != kubectlplugin.ExitFailed {
		t.Errorf("exit code %d, want %d; stdout:\n%s", r.code, kubectlplugin.ExitFailed, r.out)
	}
	// The verb is the one the API server refused first: the informers'
	// first request is a list, or a watch that sends the initial list.
	want := regexp.MustCompile(`no permission to (list|watch) podunavailablebudgets\.policy\.kruise\.io in namespace ` + regexp.QuoteMeta(ns) + ` `)
	if !want.MatchString(r.errOut) {
		t.Errorf("stderr %q does not match %q", r.errOut, want)
	}
	// The sandbox serves policy.kruise.io/v1beta1: the plugin reads PUBs
	// there, and the refused request says so.
	if beta := "/apis/policy.kruise.io/v1beta1/"; !strings.Contains(r.errOut, beta) {
		t.Errorf("stderr %q does not name the refused request at %s", r.errOut, beta)
	}
	if took > 10*time.Second {
		t.Errorf("lint took %s to report a refusal the first list got", took.Round(time.Millisecond))
	}
}
