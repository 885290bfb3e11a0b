package integration

import (
	"context"
	"flag"
	"fmt"
	"math/rand"
	"sort"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/budgetguard/budgetguard/internal/testenv"
	"github.com/budgetguard/budgetguard/internal/testobj"
	"github.com/budgetguard/budgetguard/plugins/budget"
	"github.com/budgetguard/budgetguard/sandbox"
)

var (
	differentialSeed      = flag.Int64("differential.seed", 3017, "seed of TestDifferentialEvictionAPI's scenarios")
	differentialScenarios = flag.Int("differential.scenarios", 75, "number of scenarios of TestDifferentialEvictionAPI")
)

// differentialSummary is the differential test's tally, for TestMain to print.
var differentialSummary string

// minDifferentialCases is the fewest cases the differential test must compare.
const minDifferentialCases = 300

// pdbNudgeAfter is how long the differential test lets a PDB's healthy count
// lag the pods before it touches the PDB (see runDiffScenario).
const pdbNudgeAfter = 3 * time.Second

type diffPDB struct {
	selector       string // "app": app=web, "all": {}, "none": nil
	minAvailable   *intstr.IntOrString
	maxUnavailable *intstr.IntOrString
	policy         *policyv1.UnhealthyPodEvictionPolicyType
}

type diffScenario struct {
	replicas  int
	notReady  map[int]bool
	stale     bool // pods of a missing controller: the PDB's status never catches up
	pdbs      []diffPDB
	disrupted int // index of a pod recorded in pdbs[0]'s DisruptedPods, or -1
	evict     int // index of the pod evicted for real at the end
}

func (s diffScenario) String() string {
	return fmt.Sprintf("replicas=%d notReady=%v stale=%v pdbs=%s disrupted=%d", s.replicas, s.notReady, s.stale, describePDBs(s.pdbs), s.disrupted)
}

func describePDBs(pdbs []diffPDB) string {
	out := ""
	for _, p := range pdbs {
		pol := "nil"
		if p.policy != nil {
			pol = string(*p.policy)
		}
		switch {
		case p.minAvailable != nil:
			out += fmt.Sprintf("[%s minAvailable=%s policy=%s]", p.selector, p.minAvailable.String(), pol)
		default:
			out += fmt.Sprintf("[%s maxUnavailable=%s policy=%s]", p.selector, p.maxUnavailable.String(), pol)
		}
	}
	return out
}

func pick[T any](rng *rand.Rand, xs ...T) T { return xs[rng.Intn(len(xs))] }

func randomPDB(rng *rand.Rand, replicas int, selector string) diffPDB {
	p := diffPDB{selector: selector}
	switch rng.Intn(4) {
	case 0:
		p.minAvailable = ptr.To(intstr.FromInt32(int32(rng.Intn(replicas + 1))))
	case 1:
		p.minAvailable = ptr.To(intstr.FromString(pick(rng, "0%", "25%", "50%", "75%", "100%")))
	case 2:
		p.maxUnavailable = ptr.To(intstr.FromInt32(int32(rng.Intn(3))))
	default:
		p.maxUnavailable = ptr.To(intstr.FromString(pick(rng, "0%", "25%", "50%", "100%")))
	}
	p.policy = pick(rng, nil, ptr.To(policyv1.IfHealthyBudget), ptr.To(policyv1.AlwaysAllow))
	return p
}

func randomScenario(rng *rand.Rand) diffScenario {
	s := diffScenario{replicas: 2 + rng.Intn(4), notReady: map[int]bool{}, disrupted: -1}
	for i := 0; i < s.replicas; i++ {
		if rng.Intn(100) < 35 {
			s.notReady[i] = true
		}
	}
	s.evict = rng.Intn(s.replicas)
	if rng.Intn(100) < 10 {
		s.stale = true
		p := randomPDB(rng, s.replicas, "app")
		p.minAvailable = nil
		p.maxUnavailable = ptr.To(pick(rng, intstr.FromInt32(1), intstr.FromString("50%")))
		s.pdbs = []diffPDB{p}
		return s
	}
	s.pdbs = []diffPDB{randomPDB(rng, s.replicas, pick(rng, "app", "app", "app", "app", "all", "none"))}
	if rng.Intn(100) < 20 {
		s.pdbs = append(s.pdbs, randomPDB(rng, s.replicas, pick(rng, "app", "all")))
	}
	if s.pdbs[0].selector != "none" && rng.Intn(100) < 25 {
		s.disrupted = rng.Intn(s.replicas)
	}
	return s
}

type diffTally struct {
	mu                   sync.Mutex
	cases, agree, reruns int
	nudges               int
	byOutcome            map[string]int
}

// TestDifferentialEvictionAPI compares, on seeded random scenarios, the
// budget package's decision for an eviction with what the real Eviction API
// answers on the same live state: allowed must be 2xx, denied must be 429,
// 500 or 403, with the status code the denial's reason implies. Most cases
// use a dry-run eviction, which runs the API server's checks without writing;
// each scenario ends with one real eviction.
//
// A case is only compared when neither the pod nor any PDB changed between
// reading them and the API server's answer, and the Cache had observed those
// exact versions; otherwise it is re-run. The comparison is never loosened.
func TestDifferentialEvictionAPI(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory := informers.NewSharedInformerFactory(cp.Client, 0)
	cache, err := budget.New(ctx, factory, budget.Options{})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	defer func() {
		cancel() // informers stop on cancel; Shutdown waits for them
		factory.Shutdown()
	}()
	if !cache.WaitForCacheSync(ctx) {
		t.Fatal("budget cache did not sync")
	}

	rng := rand.New(rand.NewSource(*differentialSeed))
	scenarios := make([]diffScenario, *differentialScenarios)
	for i := range scenarios {
		scenarios[i] = randomScenario(rng)
	}
	if missing := missingCoverage(scenarios); len(missing) > 0 {
		t.Fatalf("seed %d does not cover %v; choose another seed or more scenarios", *differentialSeed, missing)
	}
	tally := &diffTally{byOutcome: map[string]int{}}
	t.Run("scenarios", func(t *testing.T) {
		for i, sc := range scenarios {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				runDiffScenario(t, cache, sc, tally)
			})
		}
	})
	summary := fmt.Sprintf("differential (seed %d, %d scenarios): %d cases, %d agreements, %d re-runs after a state change, %d PDBs touched to requeue; outcomes %v",
		*differentialSeed, len(scenarios), tally.cases, tally.agree, tally.reruns, tally.nudges, tally.byOutcome)
	differentialSummary = summary // printed by TestMain, where test runners show it
	t.Log(summary)
	if t.Failed() {
		return
	}
	if tally.cases < minDifferentialCases {
		t.Fatalf("compared %d cases, want at least %d", tally.cases, minDifferentialCases)
	}
	if tally.agree != tally.cases {
		t.Fatalf("%d of %d cases disagree", tally.cases-tally.agree, tally.cases)
	}
}

func runDiffScenario(t *testing.T, cache *budget.Cache, sc diffScenario, tally *diffTally) {
	ns := env.NewNamespace(t)
	node := env.CreateNode(t, ns, testobj.MakeNode())
	ctx := testenv.Context(t)
	t.Logf("scenario: %s", sc)

	var names []string
	if sc.stale {
		for i := 0; i < sc.replicas; i++ {
			name := fmt.Sprintf("web-%d", i)
			env.CreatePod(t, ns, testobj.BoundPod(node.Name).Name(name).Label("app", "web").OwnedBy("apps/v1", "ReplicaSet", "missing", "missing"))
			names = append(names, name)
		}
	} else {
		createReplicaSet(t, ns, "web", node.Name, int32(sc.replicas), nil)
		testenv.WaitFor(t, testenv.DefaultWait, "the ReplicaSet's pods", func(ctx context.Context) (bool, error) {
			list, err := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil || len(list.Items) != sc.replicas {
				return false, err
			}
			names = names[:0]
			for _, p := range list.Items {
				names = append(names, p.Name)
			}
			return true, nil
		})
	}
	sort.Strings(names)
	for i := range sc.notReady {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, sandbox.ReadinessAnnotation, sandbox.ReadinessNever)
		if _, err := cp.Client.CoreV1().Pods(ns).Patch(ctx, names[i], types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	testenv.WaitFor(t, testenv.DefaultWait, "pods running with the wanted readiness", func(ctx context.Context) (bool, error) {
		for i, n := range names {
			p, err := cp.Client.CoreV1().Pods(ns).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if p.Status.Phase != corev1.PodRunning || isReady(p) == sc.notReady[i] {
				return false, fmt.Errorf("pod %s: phase %s ready %v", n, p.Status.Phase, isReady(p))
			}
		}
		return true, nil
	})

	for i, spec := range sc.pdbs {
		pdb := &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pdb-%d", i)},
			Spec: policyv1.PodDisruptionBudgetSpec{
				MinAvailable:               spec.minAvailable,
				MaxUnavailable:             spec.maxUnavailable,
				UnhealthyPodEvictionPolicy: spec.policy,
			},
		}
		switch spec.selector {
		case "app":
			pdb.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
		case "all":
			pdb.Spec.Selector = &metav1.LabelSelector{}
		}
		if _, err := cp.Client.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if sc.disrupted >= 0 {
		testenv.WaitFor(t, testenv.DefaultWait, "pdb-0 synced", func(ctx context.Context) (bool, error) {
			p, err := cp.Client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "pdb-0", metav1.GetOptions{})
			return err == nil && p.Status.ObservedGeneration == p.Generation, err
		})
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			p, err := cp.Client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "pdb-0", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if p.Status.DisruptedPods == nil {
				p.Status.DisruptedPods = map[string]metav1.Time{}
			}
			p.Status.DisruptedPods[names[sc.disrupted]] = metav1.Now()
			_, err = cp.Client.PolicyV1().PodDisruptionBudgets(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// A pod under several PDBs wakes one of them only: the disruption
	// controller's updatePod requeues what getPdbForPod returns, the first
	// PDB its lister finds. When the controller synced another of the pod's
	// PDBs before its pod informer had the pod's last readiness change, no
	// later pod event brings that PDB's status up to date, and it keeps
	// counting the pod healthy until the informers resync. A metadata update
	// of the PDB requeues it (updateDB), so a PDB whose count is still
	// behind after a grace period is touched once per period; the summary
	// counts these nudges. A single PDB is always requeued and never nudged.
	var behindSince, lastNudge time.Time
	testenv.WaitFor(t, testenv.DefaultWait, "PDB status settled", func(ctx context.Context) (bool, error) {
		ok, behind, err := pdbsSettled(ctx, ns, sc, names)
		if behind == "" || len(sc.pdbs) < 2 {
			behindSince = time.Time{}
			return ok, err
		}
		if behindSince.IsZero() {
			behindSince = time.Now()
		}
		if time.Since(behindSince) >= pdbNudgeAfter && time.Since(lastNudge) >= pdbNudgeAfter {
			lastNudge = time.Now()
			patch := fmt.Sprintf(`{"metadata":{"annotations":{"test.budgetguard.io/requeue":%q}}}`, lastNudge.Format(time.RFC3339Nano))
			if _, perr := cp.Client.PolicyV1().PodDisruptionBudgets(ns).Patch(ctx, behind, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); perr != nil {
				return false, perr
			}
			t.Logf("%s: %v; touched it so that the disruption controller syncs it again", behind, err)
			tally.mu.Lock()
			tally.nudges++
			tally.mu.Unlock()
		}
		return ok, err
	})

	for _, n := range names {
		runDiffCase(t, cache, ns, n, true, tally)
	}
	runDiffCase(t, cache, ns, names[sc.evict], false, tally)
}

func isReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// pdbsSettled reports whether every PDB's status describes the pods as they
// are (or, for the stale scenario, whether the controller gave up syncing).
// When the controller has observed a PDB but counts a different number of
// healthy pods than the pods show, behind names that PDB.
func pdbsSettled(ctx context.Context, ns string, sc diffScenario, names []string) (ok bool, behind string, err error) {
	pods, err := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, "", err
	}
	pdbs, err := cp.Client.PolicyV1().PodDisruptionBudgets(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(pdbs.Items) != len(sc.pdbs) {
		return false, "", err
	}
	for _, pdb := range pdbs.Items {
		if sc.stale {
			c := findCondition(pdb.Status.Conditions, policyv1.DisruptionAllowedCondition)
			if c == nil || c.Reason != policyv1.SyncFailedReason {
				return false, "", fmt.Errorf("%s: not failed yet", pdb.Name)
			}
			continue
		}
		if pdb.Status.ObservedGeneration != pdb.Generation {
			return false, "", fmt.Errorf("%s: observedGeneration %d < %d", pdb.Name, pdb.Status.ObservedGeneration, pdb.Generation)
		}
		var healthy int32
		if pdb.Spec.Selector != nil {
			sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
			if err != nil {
				return false, "", err
			}
			for i := range pods.Items {
				p := &pods.Items[i]
				_, disrupted := pdb.Status.DisruptedPods[p.Name]
				if sel.Matches(labels.Set(p.Labels)) && isReady(p) && p.DeletionTimestamp == nil && !disrupted {
					healthy++
				}
			}
		}
		if pdb.Status.CurrentHealthy != healthy {
			return false, pdb.Name, fmt.Errorf("%s: currentHealthy %d, pods say %d", pdb.Name, pdb.Status.CurrentHealthy, healthy)
		}
		if sc.disrupted >= 0 && pdb.Name == "pdb-0" {
			if _, ok := pdb.Status.DisruptedPods[names[sc.disrupted]]; !ok {
				return false, "", fmt.Errorf("pdb-0 lost its DisruptedPods entry")
			}
		}
	}
	return true, "", nil
}

func findCondition(cs []metav1.Condition, t string) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == t {
			return &cs[i]
		}
	}
	return nil
}

// liveState is the pod and PDBs as the API server has them, by resourceVersion.
type liveState struct {
	pod  *corev1.Pod
	pdbs []policyv1.PodDisruptionBudget
	key  string
}

func readLive(ctx context.Context, ns, name string) (liveState, error) {
	pod, err := cp.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return liveState{}, err
	}
	list, err := cp.Client.PolicyV1().PodDisruptionBudgets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return liveState{}, err
	}
	key := "pod=" + pod.ResourceVersion
	for _, p := range list.Items {
		key += fmt.Sprintf(" %s=%s", p.Name, p.ResourceVersion)
	}
	return liveState{pod: pod, pdbs: list.Items, key: key}, nil
}

// wantCode is the status code the Eviction API answers for a denial reason.
var wantCode = map[budget.Reason]int32{
	budget.ReasonMultiplePDBs:         500,
	budget.ReasonStaleStatus:          429,
	budget.ReasonInsufficientBudget:   429,
	budget.ReasonNegativeAllowed:      403,
	budget.ReasonTooManyDisruptedPods: 403,
}

func runDiffCase(t *testing.T, cache *budget.Cache, ns, name string, dryRun bool, tally *diffTally) {
	t.Helper()
	ctx := testenv.Context(t)
	for attempt := 0; attempt < 20; attempt++ {
		if attempt > 0 {
			tally.mu.Lock()
			tally.reruns++
			tally.mu.Unlock()
			time.Sleep(200 * time.Millisecond)
		}
		// Read the live state until the Cache has observed exactly its PDB
		// versions: a PDB may move on after the read, so re-read, not wait.
		var before liveState
		testenv.WaitFor(t, testenv.DefaultWait, "the budget cache to observe the live PDBs", func(ctx context.Context) (bool, error) {
			var err error
			if before, err = readLive(ctx, ns, name); err != nil {
				return false, err
			}
			for _, p := range before.pdbs {
				if v, _ := cache.ObservedResourceVersion(budget.KindPDB, ns, p.Name); v != p.ResourceVersion {
					return false, fmt.Errorf("%s: cache has %q, API server %q", p.Name, v, p.ResourceVersion)
				}
			}
			return true, nil
		})
		d := cache.Decide(before.pod, budget.OperationEvict)

		again, err := readLive(ctx, ns, name)
		if err != nil {
			t.Fatal(err)
		}
		if again.key != before.key {
			continue // the state moved while we decided
		}
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
		if dryRun {
			ev.DeleteOptions = &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}
		}
		evictErr := evictOnce(ctx, ev)
		if dryRun {
			after, err := readLive(ctx, ns, name)
			if err != nil {
				t.Fatal(err)
			}
			if after.key != before.key {
				continue // the state moved while the API server answered
			}
		}
		code := int32(200)
		if evictErr != nil {
			status, ok := evictErr.(apierrors.APIStatus)
			if !ok {
				t.Fatalf("eviction of %s/%s: %v", ns, name, evictErr)
			}
			code = status.Status().Code
		}
		agree := (d.Allowed && code/100 == 2) || (!d.Allowed && code == wantCode[d.Reason()])
		tally.mu.Lock()
		tally.cases++
		if agree {
			tally.agree++
		}
		outcome := fmt.Sprintf("%d", code)
		if !d.Allowed {
			outcome = fmt.Sprintf("%d/%s", code, d.Reason())
		}
		tally.byOutcome[outcome]++
		tally.mu.Unlock()
		if !agree {
			t.Errorf("pod %s/%s (ready=%v, dryRun=%v): budget says allowed=%v %q, Eviction API says %d: %v\nPDBs: %s",
				ns, name, isReady(before.pod), dryRun, d.Allowed, d.Message(), code, evictErr, describeLive(before.pdbs))
		}
		return
	}
	t.Fatalf("pod %s/%s: the state kept changing; no case could be compared", ns, name)
}

func describeLive(pdbs []policyv1.PodDisruptionBudget) string {
	out := ""
	for _, p := range pdbs {
		out += fmt.Sprintf("\n  %s gen=%d status=%+v", p.Name, p.Generation, p.Status)
	}
	return out
}

// evictOnce posts an eviction without client-go's retries: a 429 carries
// Retry-After: 10, which the typed client would silently honour ten times.
func evictOnce(ctx context.Context, ev *policyv1.Eviction) error {
	return cp.Client.PolicyV1().RESTClient().Post().AbsPath("/api/v1").
		Namespace(ev.Namespace).Resource("pods").Name(ev.Name).SubResource("eviction").
		MaxRetries(0).Body(ev).Do(ctx).Error()
}

// missingCoverage lists the categories the issue requires that no scenario
// exercises.
func missingCoverage(scenarios []diffScenario) []string {
	seen := map[string]bool{}
	for _, s := range scenarios {
		seen[fmt.Sprint("notReady=", len(s.notReady) > 0)] = true
		seen[fmt.Sprint("ready=", len(s.notReady) < s.replicas)] = true
		seen[fmt.Sprint("stale=", s.stale)] = true
		seen[fmt.Sprint("disrupted=", s.disrupted >= 0)] = true
		seen[fmt.Sprint("twoPDBs=", len(s.pdbs) > 1)] = true
		for _, p := range s.pdbs {
			seen["selector="+p.selector] = true
			pol := "nil"
			if p.policy != nil {
				pol = string(*p.policy)
			}
			seen["policy="+pol] = true
			v, kind := p.maxUnavailable, "maxUnavailable"
			if p.minAvailable != nil {
				v, kind = p.minAvailable, "minAvailable"
			}
			seen[fmt.Sprint(kind, " percent=", v.Type == intstr.String)] = true
		}
	}
	var missing []string
	for _, want := range []string{
		"notReady=true", "ready=true", "stale=true", "disrupted=true", "twoPDBs=true",
		"selector=app", "selector=all", "selector=none",
		"policy=nil", "policy=IfHealthyBudget", "policy=AlwaysAllow",
		"minAvailable percent=false", "minAvailable percent=true",
		"maxUnavailable percent=false", "maxUnavailable percent=true",
	} {
		if !seen[want] {
			missing = append(missing, want)
		}
	}
	return missing
}
