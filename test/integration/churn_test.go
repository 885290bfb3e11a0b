package integration

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	kruiseinformers "github.com/openkruise/kruise-api/client/informers/externalversions"
	kruisepolicy "github.com/openkruise/kruise-api/policy/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	kruisebeta "github.com/budgetguard/budgetguard/apis/kruise/policy/v1beta1"
	"github.com/budgetguard/budgetguard/internal/audit"
	"github.com/budgetguard/budgetguard/internal/faults"
	"github.com/budgetguard/budgetguard/internal/testenv"
	"github.com/budgetguard/budgetguard/internal/testobj"
	"github.com/budgetguard/budgetguard/sandbox"
	"sigs.k8s.io/descheduler/pkg/descheduler"
)

// The churn: every actor that may take a pod away, at once, against the
// same budgets, judged by the independent auditor (internal/audit). The
// promise tests and the soak run it with different sizes.

// User agents of the churn's clients; the auditor tells the actors apart by
// them.
const (
	churnSchedulerUserAgent = "churn-scheduler"
	churnEvictorUserAgent   = "churn-direct-evictor"
	churnRunnerUserAgent    = "churn-runner"
	churnRolloutUserAgent   = "churn-rollout"
)

// churnConfig sizes a churn.
type churnConfig struct {
	seed int64
	// apps is the number of ReplicaSets, each under one budget, of
	// replicas pods that request podCPU each; nodes of nodeCPU CPUs hold
	// them. The first pubApps have a PodUnavailableBudget (by selector or
	// targetRef, its status simulated), the others a PDB.
	apps, pubApps, replicas, nodes int
	podCPU, nodeCPU                string
	// waveSize preemptors of preemptorCPU each per preemption wave; a
	// wave's preemptors are deleted after waveHold, bound or not.
	waveSize     int
	preemptorCPU string
	waveHold     time.Duration
	// descheduleEvery is the descheduler's interval; its strategy,
	// PodLifeTime, wants every app pod older than podLifeTime gone.
	descheduleEvery, podLifeTime time.Duration
	// evictEvery, flapEvery, editEvery: mean intervals of the direct
	// evictions, readiness flaps and budget edits.
	evictEvery, flapEvery, editEvery time.Duration
	// rollEvery, when set, is the mean interval of rolling updates: a
	// ReplicaSet's pods are replaced one at a time, the new one Ready
	// before the old one goes (see roll).
	rollEvery time.Duration
	// Run until disruptions pods were seen disrupted (as far as the
	// churn's own count goes) and minDuration has passed, or maxDuration
	// has passed.
	disruptions              int
	minDuration, maxDuration time.Duration
	// faults turns the fault mode on (faults_test.go).
	faults bool
}

// churnResult is what the auditor concluded about the churn's namespace,
// and the actors' own counts.
type churnResult struct {
	ns      string
	res     audit.Result
	elapsed time.Duration
	budgets int
	// evictor is what the Eviction API answered the direct evictor,
	// descheduler the descheduler.
	evictor, descheduler *evictionCounter
	flaps, edits, waves  int64
	// gangWaves, gangsBound: the waves that were pod groups (-gangs), and
	// those whose every pod was bound.
	gangWaves, gangsBound int64
	preemptorsBound       int64
	rolls                 int64
	// faults is the fault mode's injector (nil without it);
	// notSynced counts budgetguard's refusals because its cache was not
	// synced, by component.
	faults    *faults.Injector
	notSynced [2]float64
}

// disruptionsBy counts the auditor's disruptions in the namespace by
// component, with the direct evictor as "direct-evictor".
func (r *churnResult) disruptionsBy() map[string]int {
	out := map[string]int{}
	for _, d := range r.res.Disruptions {
		out[actorOf(d.Component, d.UserAgent)]++
	}
	return out
}

// refusalsBy counts the auditor's refusals in the namespace by component
// and HTTP code.
func (r *churnResult) refusalsBy() map[string]int {
	out := map[string]int{}
	for _, f := range r.res.Refusals {
		out[fmt.Sprintf("%s/%d", actorOf(f.Component, f.UserAgent), f.Code)]++
	}
	return out
}

func actorOf(c audit.Component, userAgent string) string {
	switch {
	case c != audit.ComponentOther:
	case strings.Contains(userAgent, churnEvictorUserAgent):
		return "direct-evictor"
	case strings.Contains(userAgent, churnRolloutUserAgent):
		return "rollout"
	}
	return string(c)
}

// ours reports whether a disruption was budgetguard's: the scheduler's or
// the descheduler's. Its promise forbids their violations. The others (the
// test's direct evictions, the rollouts) are the API server's own
// decisions on requests budgetguard never saw: the Eviction API decides on
// the budget's status, which the disruption controller writes some
// milliseconds after a pod's readiness changes, so an eviction in that
// window can leave a budget short. Theirs are shown, for comparison, and
// do not fail the test.
func ours(d audit.Disruption) bool {
	return d.Component == audit.ComponentScheduler || d.Component == audit.ComponentDescheduler
}

// verdict is the judge's charges by actor.
type verdict struct {
	violations, races, disagreements map[string]int
	ourViolations                    int
}

func (r *churnResult) verdict() verdict {
	v := verdict{violations: map[string]int{}, races: map[string]int{}, disagreements: map[string]int{}}
	for _, x := range r.res.Violations {
		v.violations[actorOf(x.Disruption.Component, x.Disruption.UserAgent)]++
		if ours(x.Disruption) {
			v.ourViolations++
		}
	}
	for _, x := range r.res.Races {
		v.races[actorOf(x.Disruption.Component, x.Disruption.UserAgent)]++
	}
	for _, x := range r.res.Disagreements {
		v.disagreements[actorOf(x.Disruption.Component, x.Disruption.UserAgent)]++
	}
	return v
}

// check fails t on a violation by budgetguard and on any disagreement
// between the judge and a budget's status, and logs every other charge.
func (r *churnResult) check(t *testing.T) {
	t.Helper()
	v := r.verdict()
	if v.ourViolations != 0 {
		t.Errorf("the auditor counted %d violations by budgetguard's scheduler and descheduler, want 0", v.ourViolations)
	}
	if n := len(r.res.Disagreements); n != 0 {
		t.Errorf("the auditor found %d disagreements between its judgement and a budget's status after a disruption by budgetguard, want 0", n)
	}
	if n := len(r.res.Violations) - v.ourViolations; n != 0 {
		t.Logf("the auditor counted %d violations by the API server's own decisions on the test's direct evictions and rollouts (shown, not failed)", n)
	}
}

// summary is the numbers of the run on one line each.
func (r *churnResult) summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "churn in %s over %s: %d budgets, %d disruptions by actor %v\n", r.ns, r.elapsed.Round(time.Second), r.budgets, len(r.res.Disruptions), sortedMap(r.disruptionsBy()))
	fmt.Fprintf(&b, "API refusals by actor/code %v; 429s: direct evictor %d, descheduler %d, scheduler %d\n", sortedMap(r.refusalsBy()),
		r.evictor.Count(http.StatusTooManyRequests), r.descheduler.Count(http.StatusTooManyRequests), r.refusalsBy()["scheduler/429"])
	fmt.Fprintf(&b, "preemption waves %d (preemptors bound %d; gangs %d, bound whole %d), readiness flaps %d, budget edits %d, rollouts %d\n", r.waves, r.preemptorsBound, r.gangWaves, r.gangsBound, r.flaps, r.edits, r.rolls)
	if r.faults != nil {
		fmt.Fprintf(&b, "faults injected: %s; refusals because the budget cache was not synced: scheduler %.0f, descheduler %.0f\n", r.faults, r.notSynced[0], r.notSynced[1])
	}
	w := r.res.Windows
	fmt.Fprintf(&b, "judge's windows: informer lag p99 %s (max %s, %d samples); PUB record-to-request delays %s\n", w.InformerLag.Duration, w.MaxInformerLag.Duration, w.LagSamples, recordDelays(w.RecordDelays))
	v := r.verdict()
	fmt.Fprintf(&b, "violations by actor %v, races by actor %v, disagreements by actor %v (budgetguard's violations: %d)",
		sortedMap(v.violations), sortedMap(v.races), sortedMap(v.disagreements), v.ourViolations)
	for _, x := range r.res.Violations {
		fmt.Fprintf(&b, "\n  violation %s %s/%s: %s %s %s/%s at %s left %d healthy, %d desired", x.Budget.Kind, x.Budget.Namespace, x.Budget.Name,
			actorOf(x.Disruption.Component, x.Disruption.UserAgent), x.Disruption.Action, x.Disruption.Namespace, x.Disruption.Pod,
			x.Disruption.Time.Format(time.RFC3339Nano), x.Healthy, x.Desired)
	}
	for _, x := range r.res.Races {
		fmt.Fprintf(&b, "\n  race %s %s/%s: %s %s %s/%s at %s left %d healthy, %d desired (known: %d of %d)", x.Budget.Kind, x.Budget.Namespace, x.Budget.Name,
			actorOf(x.Disruption.Component, x.Disruption.UserAgent), x.Disruption.Action, x.Disruption.Namespace, x.Disruption.Pod,
			x.Disruption.Time.Format(time.RFC3339Nano), x.Healthy, x.Desired, x.KnownHealthy, x.KnownDesired)
	}
	for _, x := range r.res.Disagreements {
		fmt.Fprintf(&b, "\n  disagreement %s %s/%s: %s %s %s/%s at %s judged %d of %d; status at %s says %d of %d", x.Budget.Kind, x.Budget.Namespace, x.Budget.Name,
			actorOf(x.Disruption.Component, x.Disruption.UserAgent), x.Disruption.Action, x.Disruption.Namespace, x.Disruption.Pod,
			x.Disruption.Time.Format(time.RFC3339Nano), x.Healthy, x.Desired, x.StatusTime.Format(time.RFC3339Nano), x.StatusHealthy, x.StatusDesired)
	}
	return b.String()
}

// recordDelays summarises the record-to-request delays by component.
func recordDelays(d map[audit.Component][]metav1.Duration) string {
	parts := []string{}
	for _, c := range slices.Sorted(maps.Keys(d)) {
		s := d[c]
		if len(s) == 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s: %d, median %s, max %s", c, len(s), s[len(s)/2].Duration, s[len(s)-1].Duration))
	}
	return "{" + strings.Join(parts, "; ") + "}"
}

func sortedMap(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// pdbShapes are the budgets a churn's apps get and its edits switch to:
// integers and percentages of both kinds, and every unhealthy-pod policy.
// Some allow nothing.
func randomPDBSpec(rng *rand.Rand, replicas int) policyv1.PodDisruptionBudgetSpec {
	var spec policyv1.PodDisruptionBudgetSpec
	switch rng.IntN(4) {
	case 0:
		spec.MinAvailable = ptr.To(intstr.FromInt32(int32(1 + rng.IntN(replicas))))
	case 1:
		spec.MaxUnavailable = ptr.To(intstr.FromInt32(int32(rng.IntN(3))))
	case 2:
		spec.MinAvailable = ptr.To(intstr.FromString(fmt.Sprintf("%d%%", []int{25, 50, 75, 100}[rng.IntN(4)])))
	default:
		spec.MaxUnavailable = ptr.To(intstr.FromString(fmt.Sprintf("%d%%", []int{0, 25, 50}[rng.IntN(3)])))
	}
	switch rng.IntN(3) {
	case 1:
		spec.UnhealthyPodEvictionPolicy = ptr.To(policyv1.IfHealthyBudget)
	case 2:
		spec.UnhealthyPodEvictionPolicy = ptr.To(policyv1.AlwaysAllow)
	}
	return spec
}

// randomPUB is a PodUnavailableBudget for app, by selector or by
// targetRef to its ReplicaSet, with an integer or percentage
// maxUnavailable or minAvailable; the sandbox simulates its status.
func randomPUB(rng *rand.Rand, app string) *kruisepolicy.PodUnavailableBudget {
	w := testobj.MakePUB().Name(app)
	if rng.IntN(2) == 0 {
		w.MatchLabels("app", app)
	} else {
		w.TargetRef("apps/v1", "ReplicaSet", app)
	}
	switch rng.IntN(4) {
	case 0:
		w.MaxUnavailable(intstr.FromInt32(int32(1 + rng.IntN(2))))
	case 1:
		w.MinAvailable(intstr.FromInt32(int32(2 + rng.IntN(2))))
	case 2:
		w.MaxUnavailable(intstr.FromString([]string{"25%", "50%"}[rng.IntN(2)]))
	default:
		w.MinAvailable(intstr.FromString([]string{"50%", "75%"}[rng.IntN(2)]))
	}
	pub := w.Obj()
	pub.Labels = map[string]string{simulatedPUBLabel: "true"}
	return pub
}

func describePDBSpec(s policyv1.PodDisruptionBudgetSpec) string {
	var parts []string
	if s.MinAvailable != nil {
		parts = append(parts, "minAvailable="+s.MinAvailable.String())
	}
	if s.MaxUnavailable != nil {
		parts = append(parts, "maxUnavailable="+s.MaxUnavailable.String())
	}
	if s.UnhealthyPodEvictionPolicy != nil {
		parts = append(parts, string(*s.UnhealthyPodEvictionPolicy))
	}
	return strings.Join(parts, ",")
}

// churn is one run.
type churn struct {
	t    *testing.T
	cfg  churnConfig
	ns   string
	low  string
	high string
	// nodes are the churn's nodes; scheds its two scheduler profiles.
	nodes  []string
	scheds [2]string
	runner kubernetes.Interface
	apps   []string
	// pdbApps and pubApps are the apps under a PDB and under a PUB.
	pdbApps, pubApps []string
	// seen holds every app pod UID seen, for the progress count.
	seenMu sync.Mutex
	seen   map[types.UID]bool

	flaps, edits, waves, bound, rolls atomic.Int64
	// gangs counts the pod groups of the churn (-gangs).
	gangs gangCounts
}

// runChurn sets the churn up, runs every actor until cfg says stop, stops
// them all, and returns what the auditor concluded.
func runChurn(t *testing.T, cfg churnConfig) *churnResult {
	t.Helper()
	c := &churn{t: t, cfg: cfg, seen: map[types.UID]bool{}}
	c.ns = env.NewNamespace(t)
	c.low, c.high, _ = priorityClasses(t, c.ns)
	c.runner = clientAs(t, churnRunnerUserAgent)

	nodes, sel := evictorNodes(t, c.ns, cfg.nodes)
	for _, n := range nodes {
		testenv.WaitFor(t, testenv.DefaultWait, "node "+n.Name+" Ready", env.NodeReady(n.Name))
		c.nodes = append(c.nodes, n.Name)
	}

	// testenv.Context ends after 2 minutes; the churn may run longer.
	ctx, cancel := context.WithTimeout(t.Context(), cfg.maxDuration+5*time.Minute)
	t.Cleanup(cancel)
	// The auditor starts before anything is disrupted.
	a, err := audit.New(audit.Options{
		Config:  cp.Config,
		LogPath: auditLog,
		Components: []audit.ComponentMatch{
			{UserAgentPrefix: churnSchedulerUserAgent, Component: audit.ComponentScheduler},
			{UserAgentPrefix: deschedulerUserAgent, Component: audit.ComponentDescheduler},
		},
		Ignore: []string{"sandbox-kubelet", churnRunnerUserAgent},
		PUBs:   true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(ctx); err != nil {
		t.Fatalf("start the auditor: %v", err)
	}
	finished := false
	t.Cleanup(func() {
		if !finished {
			_, _ = a.Finish(context.Background())
		}
	})

	// The fault mode starts before the components: they start while
	// discovery fails.
	var inj *faults.Injector
	schedBefore, deschedBefore := notSyncedRefusals(t)
	if cfg.faults {
		inj = churnInjector(t, cfg.seed)
		clientFaults.Store(inj)
		t.Cleanup(func() { clientFaults.Store(nil) })
		inj.Arm()
	}

	// One kube-scheduler, two profiles, both BudgetAwarePreemption with
	// Delete actuation.
	c.scheds = [2]string{"churn-a-" + c.ns, "churn-b-" + c.ns}
	schedCfg := rest.AddUserAgent(rest.CopyConfig(cp.Config), churnSchedulerUserAgent)
	if inj != nil {
		schedCfg = inj.WrapConfig(schedCfg)
	}
	schedClient, err := kubernetes.NewForConfig(schedCfg)
	if err != nil {
		t.Fatal(err)
	}
	var docs []string
	for _, s := range c.scheds {
		docs = append(docs, testobj.SchedulerConfig{SchedulerName: s, Args: "{actuation: Delete}"}.YAML())
	}
	stopScheduler, err := runSchedulerProfiles(t, c.ns, schedClient, schedCfg, docs...)
	if err != nil {
		t.Fatalf("start scheduler: %v", err)
	}

	setupRNG := rand.New(rand.NewPCG(uint64(cfg.seed), 0))
	for i := range cfg.apps {
		name := fmt.Sprintf("app-%02d", i)
		c.apps = append(c.apps, name)
		tmpl := testobj.MakePod().Label("app", name).Label("churn", "app").PriorityClass(c.low).GracePeriod(0).
			SchedulerName(c.scheds[i%2]).OnNodes(c.nodes...).Container("app", cfg.podCPU).Template()
		if *gangs && i == cfg.apps-1 && i >= cfg.pubApps {
			c.groupApp(t, name, &tmpl)
		}
		env.CreateReplicaSet(t, c.ns, testobj.MakeReplicaSet().Name(name).Replicas(int32(cfg.replicas)).Template(tmpl))
		if i < cfg.pubApps {
			c.pubApps = append(c.pubApps, name)
			// Every other PUB is written at v1beta1, OpenKruise's stored
			// version, with the operations it protects in its spec.
			pub := randomPUB(setupRNG, name)
			pub.Namespace = c.ns
			if len(c.pubApps)%2 == 0 {
				env.CreatePUBv1beta1(t, pub, func(s *kruisebeta.PodUnavailableBudgetSpec) {
					s.ProtectOperations = []kruisebeta.PubOperation{kruisebeta.PubDeleteOperation, kruisebeta.PubEvictOperation, kruisebeta.PubUpdateOperation}
				})
			} else {
				testenv.Create(t, cp.KruiseClient.PolicyV1alpha1().PodUnavailableBudgets(c.ns), pub)
			}
			continue
		}
		c.pdbApps = append(c.pdbApps, name)
		pdb := testobj.MakePDB().Name(name).MatchLabels("app", name).Obj()
		pdb.Spec = randomPDBSpec(setupRNG, cfg.replicas)
		pdb.Spec.Selector = testobj.Selector("app", name)
		testenv.Create(t, cp.Client.PolicyV1().PodDisruptionBudgets(c.ns), pdb)
	}
	env.WaitForReadyPods(t, c.ns, map[string]string{"churn": "app"}, cfg.apps*cfg.replicas)
	testenv.WaitFor(t, testenv.DefaultWait, "every budget's status up to date", func(ctx context.Context) (bool, error) {
		list, err := cp.Client.PolicyV1().PodDisruptionBudgets(c.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, p := range list.Items {
			if p.Status.ObservedGeneration < p.Generation || p.Status.ExpectedPods != int32(cfg.replicas) {
				return false, fmt.Errorf("pdb %s: %+v", p.Name, p.Status)
			}
		}
		pubs, err := cp.KruiseClient.PolicyV1alpha1().PodUnavailableBudgets(c.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, p := range pubs.Items {
			if p.Status.ObservedGeneration < p.Generation || p.Status.TotalReplicas != int32(cfg.replicas) {
				return false, fmt.Errorf("pub %s: %+v", p.Name, p.Status)
			}
		}
		return true, nil
	})

	if inj != nil {
		inj.Arm() // the descheduler starts while discovery fails, too
	}
	stopDescheduler := startDeschedulerLoops(t, testobj.DeschedulerPolicy{
		NodeSelector: sel, Namespace: c.ns, BudgetAware: true,
		Strategy: "PodLifeTime", StrategyArgs: fmt.Sprintf("{maxPodLifeTimeSeconds: %d}", int(cfg.podLifeTime.Seconds())), ExtensionPoint: "deschedule",
	}.YAML(), cfg.descheduleEvery)
	evictor, evictorClient := countingClient(t, churnEvictorUserAgent, 100, 0)
	hist := watchHistory(t, c.runner, c.ns)

	began := time.Now()
	runCtx, stopActors := context.WithCancel(ctx)
	var wg sync.WaitGroup
	actors := []func(context.Context, *rand.Rand){
		c.preemptionWaves,
		func(ctx context.Context, rng *rand.Rand) { c.directEvictions(ctx, rng, evictorClient) },
		c.readinessFlaps,
		c.budgetEdits,
	}
	if cfg.rollEvery > 0 {
		_, rolloutClient := countingClient(t, churnRolloutUserAgent, 100, 0)
		actors = append(actors, func(ctx context.Context, rng *rand.Rand) { c.rollingUpdates(ctx, rng, rolloutClient) })
	}
	for i, actor := range actors {
		rng := rand.New(rand.NewPCG(uint64(cfg.seed), uint64(i+1)))
		wg.Go(func() { actor(runCtx, rng) })
	}
	lastLog := time.Now()
	for {
		n := c.progress(ctx)
		elapsed := time.Since(began)
		if (n >= cfg.disruptions && elapsed >= cfg.minDuration) || elapsed >= cfg.maxDuration || ctx.Err() != nil {
			break
		}
		if time.Since(lastLog) >= 30*time.Second {
			t.Logf("churn: %s, about %d disruptions so far", elapsed.Round(time.Second), n)
			lastLog = time.Now()
		}
		time.Sleep(500 * time.Millisecond)
	}
	stopActors()
	wg.Wait()
	if elapsed := time.Since(began); elapsed < cfg.minDuration {
		t.Errorf("the churn ran %s, want at least %s (context: %v)", elapsed.Round(time.Second), cfg.minDuration, ctx.Err())
	}
	descheduler := stopDescheduler()
	stopScheduler()
	elapsed := time.Since(began)
	if inj != nil {
		inj.Pause()
	}
	schedAfter, deschedAfter := notSyncedRefusals(t)

	finished = true
	res, err := a.Finish(ctx)
	if err != nil {
		t.Fatalf("auditor: %v", err)
	}
	out := &churnResult{ns: c.ns, elapsed: elapsed, evictor: evictor, descheduler: descheduler,
		flaps: c.flaps.Load(), edits: c.edits.Load(), waves: c.waves.Load(), preemptorsBound: c.bound.Load(), rolls: c.rolls.Load(),
		gangWaves: c.gangs.waves.Load(), gangsBound: c.gangs.bound.Load(),
		faults: inj, notSynced: [2]float64{schedAfter - schedBefore, deschedAfter - deschedBefore}}
	out.res.Disruptions = slices.DeleteFunc(res.Disruptions, func(d audit.Disruption) bool { return d.Namespace != c.ns })
	out.res.Refusals = slices.DeleteFunc(res.Refusals, func(r audit.Refusal) bool { return r.Namespace != c.ns })
	// Charges are kept whatever their namespace.
	out.res.Violations, out.res.Races, out.res.Disagreements, out.res.Windows = res.Violations, res.Races, res.Disagreements, res.Windows
	for _, d := range res.Disagreements {
		t.Logf("history around the disagreement on %s/%s after %s %s of %s:\n%s", d.Budget.Namespace, d.Budget.Name, d.Disruption.UserAgent, d.Disruption.Action, d.Disruption.Pod,
			hist.around(d.Disruption.Pod, d.Budget.Name, d.Disruption.Time))
	}
	for _, v := range res.Violations {
		t.Logf("history around the violation of %s/%s by %s %s of %s:\n%s", v.Budget.Namespace, v.Budget.Name, v.Disruption.UserAgent, v.Disruption.Action, v.Disruption.Pod,
			hist.around(v.Disruption.Pod, v.Budget.Name, v.Disruption.Time))
		t.Logf("audit log lines of %s:\n%s", v.Disruption.Pod, grepFile(auditLog, v.Disruption.Pod))
	}
	for _, b := range res.Budgets {
		if b.Budget.Namespace == c.ns {
			out.res.Budgets = append(out.res.Budgets, b)
			out.budgets++
		}
	}
	return out
}

// clientAs is a client of cp with userAgent.
func clientAs(t *testing.T, userAgent string) kubernetes.Interface {
	t.Helper()
	cfg := rest.AddUserAgent(rest.CopyConfig(cp.Config), userAgent)
	cfg.QPS, cfg.Burst = 200, 400
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// progress lists the apps' pods and returns how many app pods were seen
// beyond the apps' replicas: about the number of disruptions so far (pods
// created and gone between two lists are missed).
func (c *churn) progress(ctx context.Context) int {
	list, err := c.runner.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{LabelSelector: "churn=app"})
	if err != nil {
		return 0
	}
	c.seenMu.Lock()
	defer c.seenMu.Unlock()
	for _, p := range list.Items {
		c.seen[p.UID] = true
	}
	return len(c.seen) - c.cfg.apps*c.cfg.replicas
}

// sleep waits about mean (uniformly between half and one and a half of
// it), and says whether ctx is still alive.
func sleep(ctx context.Context, rng *rand.Rand, mean time.Duration) bool {
	d := mean/2 + time.Duration(rng.Int64N(int64(mean)+1))
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// appPods lists the running app pods that are not terminating.
func (c *churn) appPods(ctx context.Context) []corev1.Pod {
	list, err := c.runner.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{LabelSelector: "churn=app"})
	if err != nil {
		return nil
	}
	return slices.DeleteFunc(list.Items, func(p corev1.Pod) bool {
		return p.DeletionTimestamp != nil || p.Spec.NodeName == ""
	})
}

// preemptionWaves creates waveSize high-priority preemptors, alternating
// between the two profiles, waits waveHold, and deletes them (bound or
// not), over and over.
func (c *churn) preemptionWaves(ctx context.Context, rng *rand.Rand) {
	for wave := 0; ctx.Err() == nil; wave++ {
		c.waves.Add(1)
		var names []string
		gang := ""
		if *gangs && wave%2 == 1 {
			gang, names = c.createGang(ctx, rng, wave)
		}
		if gang == "" {
			for i := range c.cfg.waveSize {
				name := fmt.Sprintf("preemptor-%d-%d", wave, i)
				pod := testobj.MakePod().Name(name).Label("role", "preemptor").SchedulerName(c.scheds[rng.IntN(2)]).
					PriorityClass(c.high).GracePeriod(0).OnNodes(c.nodes...).Container("app", c.cfg.preemptorCPU).Obj()
				if _, err := c.runner.CoreV1().Pods(c.ns).Create(ctx, pod, metav1.CreateOptions{}); err == nil {
					names = append(names, name)
				}
			}
		}
		sleep(ctx, rng, c.cfg.waveHold)
		// Deleting them is the runner's business, not a disruption: the
		// context may be over.
		bg := context.WithoutCancel(ctx)
		bound := 0
		for _, name := range names {
			if p, err := c.runner.CoreV1().Pods(c.ns).Get(bg, name, metav1.GetOptions{}); err == nil && p.Spec.NodeName != "" {
				c.bound.Add(1)
				bound++
			}
			_ = c.runner.CoreV1().Pods(c.ns).Delete(bg, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		}
		if gang != "" {
			c.deleteGang(bg, gang, bound, len(names))
		}
		if !sleep(ctx, rng, c.cfg.waveHold/2) {
			return
		}
	}
}

// directEvictions posts an eviction of a random pod of an app under a PDB
// every evictEvery, as kubectl drain would: the API server checks the PDB.
// Apps under a PUB are left alone: no OpenKruise webhook runs here to
// refuse what their PUB forbids, as it would in a cluster.
func (c *churn) directEvictions(ctx context.Context, rng *rand.Rand, client kubernetes.Interface) {
	for sleep(ctx, rng, c.cfg.evictEvery) {
		pods := slices.DeleteFunc(c.appPods(ctx), func(p corev1.Pod) bool { return slices.Contains(c.pubApps, p.Labels["app"]) })
		if len(pods) == 0 {
			continue
		}
		p := pods[rng.IntN(len(pods))]
		_ = client.PolicyV1().Evictions(c.ns).Evict(ctx, &policyv1.Eviction{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: c.ns},
		})
	}
}

// readinessFlaps makes a random app pod not Ready for a while (the
// simulated kubelet follows its readiness annotation), then Ready again.
func (c *churn) readinessFlaps(ctx context.Context, rng *rand.Rand) {
	for sleep(ctx, rng, c.cfg.flapEvery) {
		pods := c.appPods(ctx)
		if len(pods) == 0 {
			continue
		}
		p := pods[rng.IntN(len(pods))]
		if !c.setReadiness(ctx, p.Name, sandbox.ReadinessNever) {
			continue
		}
		c.flaps.Add(1)
		down := time.Duration(500+rng.IntN(2500)) * time.Millisecond
		go func() {
			time.Sleep(down)
			c.setReadiness(context.WithoutCancel(ctx), p.Name, sandbox.ReadinessReady)
		}()
	}
}

func (c *churn) setReadiness(ctx context.Context, pod, value string) bool {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, sandbox.ReadinessAnnotation, value)
	_, err := c.runner.CoreV1().Pods(c.ns).Patch(ctx, pod, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err == nil
}

// budgetEdits gives a random app's PDB another random spec.
func (c *churn) budgetEdits(ctx context.Context, rng *rand.Rand) {
	for sleep(ctx, rng, c.cfg.editEvery) {
		name := c.pdbApps[rng.IntN(len(c.pdbApps))]
		spec := randomPDBSpec(rng, c.cfg.replicas)
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			pdb, err := c.runner.PolicyV1().PodDisruptionBudgets(c.ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			spec.Selector = pdb.Spec.Selector
			pdb.Spec = spec
			_, err = c.runner.PolicyV1().PodDisruptionBudgets(c.ns).Update(ctx, pdb, metav1.UpdateOptions{})
			return err
		})
		if err == nil {
			c.edits.Add(1)
		} else if ctx.Err() == nil && !apierrors.IsNotFound(err) {
			c.t.Logf("edit pdb %s: %v", name, err)
		}
	}
}

// rollingUpdates rolls a random app to a new template revision: the
// ReplicaSet's template gets a new annotation, and its old pods are evicted
// one at a time through the Eviction API (a 429 is retried a little
// later), each replaced by the ReplicaSet with a pod of the new revision, as
// a drain-based rollout would do it (a Deployment's own scale-down does
// not look at PDBs). Only apps under a PDB: see directEvictions.
func (c *churn) rollingUpdates(ctx context.Context, rng *rand.Rand, client kubernetes.Interface) {
	for rev := 1; sleep(ctx, rng, c.cfg.rollEvery); rev++ {
		name := c.pdbApps[rng.IntN(len(c.pdbApps))]
		value := fmt.Sprint(rev)
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			rs, err := c.runner.AppsV1().ReplicaSets(c.ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if rs.Spec.Template.Annotations == nil {
				rs.Spec.Template.Annotations = map[string]string{}
			}
			rs.Spec.Template.Annotations[churnRevisionAnnotation] = value
			_, err = c.runner.AppsV1().ReplicaSets(c.ns).Update(ctx, rs, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			continue
		}
		c.rolls.Add(1)
		deadline := time.Now().Add(10 * c.cfg.rollEvery)
		for ctx.Err() == nil && time.Now().Before(deadline) {
			list, err := c.runner.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
			if err != nil {
				break
			}
			old := slices.DeleteFunc(list.Items, func(p corev1.Pod) bool {
				return p.DeletionTimestamp != nil || p.Annotations[churnRevisionAnnotation] == value
			})
			if len(old) == 0 {
				break
			}
			_ = client.PolicyV1().Evictions(c.ns).Evict(ctx, &policyv1.Eviction{
				ObjectMeta: metav1.ObjectMeta{Name: old[0].Name, Namespace: c.ns},
			})
			sleep(ctx, rng, 300*time.Millisecond)
		}
	}
}

// churnRevisionAnnotation is the template revision of a rolled app.
const churnRevisionAnnotation = "churn.budgetguard.io/revision"

// history records what happened to the pods and PDBs of a namespace, to
// explain a violation.
type history struct {
	mu     sync.Mutex
	events []historyEvent
}

type historyEvent struct {
	at   time.Time
	pod  string
	pdb  string
	what string
}

func watchHistory(t *testing.T, client kubernetes.Interface, ns string) *history {
	t.Helper()
	h := &history{}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	add := func(e historyEvent) {
		h.mu.Lock()
		defer h.mu.Unlock()
		e.at = time.Now()
		h.events = append(h.events, e)
	}
	podEv := func(verb string) func(obj any) {
		return func(obj any) {
			if p, ok := obj.(*corev1.Pod); ok {
				var conds []string
				for _, c := range p.Status.Conditions {
					conds = append(conds, fmt.Sprintf("%s=%s", c.Type, c.Status))
				}
				add(historyEvent{pod: p.Name, what: fmt.Sprintf("%s rv=%s deleting=%v readiness=%q %v", verb, p.ResourceVersion, p.DeletionTimestamp != nil,
					p.Annotations[sandbox.ReadinessAnnotation], conds)})
			}
		}
	}
	_, _ = factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: podEv("add"), UpdateFunc: func(_, o any) { podEv("update")(o) }, DeleteFunc: podEv("delete"),
	})
	pdbEv := func(obj any) {
		if p, ok := obj.(*policyv1.PodDisruptionBudget); ok {
			add(historyEvent{pdb: p.Name, what: fmt.Sprintf("rv=%s gen=%d spec=%s status: observed=%d healthy=%d desired=%d allowed=%d disrupted=%v",
				p.ResourceVersion, p.Generation, describePDBSpec(p.Spec), p.Status.ObservedGeneration, p.Status.CurrentHealthy, p.Status.DesiredHealthy,
				p.Status.DisruptionsAllowed, p.Status.DisruptedPods)})
		}
	}
	_, _ = factory.Policy().V1().PodDisruptionBudgets().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: pdbEv, UpdateFunc: func(_, o any) { pdbEv(o) },
	})
	kf := kruiseinformers.NewSharedInformerFactoryWithOptions(cp.KruiseClient, 0, kruiseinformers.WithNamespace(ns))
	_, _ = kf.Policy().V1alpha1().PodUnavailableBudgets().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { pubEv(add, obj) }, UpdateFunc: func(_, o any) { pubEv(add, o) },
	})
	stop := make(chan struct{})
	factory.Start(stop)
	kf.Start(stop)
	factory.WaitForCacheSync(stop)
	kf.WaitForCacheSync(stop)
	t.Cleanup(func() { close(stop); factory.Shutdown(); kf.Shutdown() })
	return h
}

func pubEv(add func(historyEvent), obj any) {
	if p, ok := obj.(*kruisepolicy.PodUnavailableBudget); ok {
		add(historyEvent{pdb: p.Name, what: fmt.Sprintf("PUB rv=%s gen=%d status: observed=%d total=%d available=%d desired=%d allowed=%d disrupted=%v unavailable=%v",
			p.ResourceVersion, p.Generation, p.Status.ObservedGeneration, p.Status.TotalReplicas, p.Status.CurrentAvailable, p.Status.DesiredAvailable,
			p.Status.UnavailableAllowed, p.Status.DisruptedPods, p.Status.UnavailablePods)})
	}
}

// around returns the events of the app of pod and of pdb from 5 s before
// at to 1 s after.
func (h *history) around(pod, pdb string, at time.Time) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var b strings.Builder
	for _, e := range h.events {
		if e.at.Before(at.Add(-5*time.Second)) || e.at.After(at.Add(time.Second)) {
			continue
		}
		if e.pdb == pdb || (e.pod != "" && strings.HasPrefix(e.pod, pdb+"-")) {
			fmt.Fprintf(&b, "  %s %s%s %s\n", e.at.Format("15:04:05.000000"), e.pod, e.pdb, e.what)
		}
	}
	return b.String()
}

func grepFile(path, s string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// startDeschedulerLoops runs the real descheduler with policy against cp,
// a loop every interval, until the test ends or the stop function it
// returns is called; stop waits for the loop under way and returns what
// the Eviction API answered over all loops.
func startDeschedulerLoops(t *testing.T, policy string, interval time.Duration) (stop func() *evictionCounter) {
	t.Helper()
	rs, p, counter := deschedulerServer(t, policy, deschedulerUserAgent, 0)
	rs.DeschedulingInterval = interval
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- descheduler.RunDeschedulerStrategies(ctx, rs, p, "policy/v1") }()
	var once sync.Once
	stop = func() *evictionCounter {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil && ctx.Err() == nil {
				t.Errorf("descheduler: %v", err)
			}
		})
		return counter
	}
	t.Cleanup(func() { stop() })
	return stop
}
