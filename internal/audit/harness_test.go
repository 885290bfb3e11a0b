package audit

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	kruisepolicy "github.com/openkruise/kruise-api/policy/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/budgetguard/budgetguard/internal/testobj"
)

const testNS = "shop"

// User agents as the sandbox's components send them.
const (
	uaScheduler   = "sandbox.test/v0.0.0 (linux/amd64) kubernetes/$Format/sandbox-scheduler"
	uaDescheduler = "sandbox-descheduler"
	uaKubelet     = "sandbox.test/v0.0.0 (linux/amd64) kubernetes/$Format/sandbox-kubelet"
	uaRunner      = "sandbox-runner"
	uaReplicaSet  = "sandbox.test/v0.0.0 (linux/amd64) kubernetes/$Format/sandbox-replicaset-controller"
)

func testOptions() Options {
	return Options{
		Components: []ComponentMatch{
			{UserAgentPrefix: "sandbox-scheduler", Component: ComponentScheduler},
			{UserAgentPrefix: "sandbox-descheduler", Component: ComponentDescheduler},
		},
		Ignore: []string{"sandbox-kubelet", "sandbox-runner"},
		PUBs:   true,
	}
}

// tickClock returns a strictly increasing time, one millisecond per call,
// so that informer observations and log lines are ordered as the test
// makes them.
type tickClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *tickClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Millisecond)
	return c.t
}

// advance moves the clock on by d.
func (c *tickClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// harness runs an Auditor on fake clientsets and a synthetic audit log.
type harness struct {
	t       *testing.T
	ctx     context.Context
	kube    *fake.Clientset
	dyn     *dynamicfake.FakeDynamicClient
	a       *Auditor
	clock   *tickClock
	logFile *os.File
	auditID int
}

// newHarness starts an auditor with opts (Config and LogPath are filled
// in) over fake clientsets that hold objects (PUBs go to the kruise one).
func newHarness(t *testing.T, opts Options, objects ...runtime.Object) *harness {
	t.Helper()
	return newHarnessWithLog(t, opts, nil, objects...)
}

// newHarnessWithLog is newHarness with a log that holds before when the
// auditor starts.
func newHarnessWithLog(t *testing.T, opts Options, before []byte, objects ...runtime.Object) *harness {
	t.Helper()
	// kruise-api's generated fake predates streaming lists and never sends
	// the initial-events bookmark that a real API server sends.
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	var kubeObjs, kruiseObjs []runtime.Object
	for _, o := range objects {
		if p, ok := o.(*kruisepolicy.PodUnavailableBudget); ok {
			kruiseObjs = append(kruiseObjs, pubUnstructured(t, p))
		} else {
			kubeObjs = append(kubeObjs, o)
		}
	}
	h := &harness{
		t:     t,
		ctx:   t.Context(),
		kube:  fake.NewClientset(kubeObjs...),
		dyn:   dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{pubGVR: "PodUnavailableBudgetList"}, kruiseObjs...),
		clock: &tickClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
	}
	// The fake delivers only what happens after its watch started; signal
	// the start so that the test does not write before it.
	watching := make(chan struct{}, 1)
	h.dyn.PrependWatchReactor("*", func(action k8stesting.Action) (bool, watch.Interface, error) {
		var opts []metav1.ListOptions
		if wa, ok := action.(k8stesting.WatchActionImpl); ok {
			opts = append(opts, wa.ListOptions)
		}
		w, err := h.dyn.Tracker().Watch(action.GetResource(), action.GetNamespace(), opts...)
		if err != nil {
			return false, nil, err
		}
		watching <- struct{}{}
		return true, w, nil
	})
	opts.LogPath = filepath.Join(t.TempDir(), LogFileName)
	f, err := os.Create(opts.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	h.logFile = f
	t.Cleanup(func() { _ = f.Close() })
	if _, err := f.Write(before); err != nil {
		t.Fatal(err)
	}
	a, err := newAuditor(opts, h.kube, h.dyn, nil, h.clock.now)
	if err != nil {
		t.Fatalf("newAuditor: %v", err)
	}
	h.a = a
	if err := a.Start(h.ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if opts.PUBs {
		select {
		case <-watching:
		case <-time.After(10 * time.Second):
			t.Fatal("the PodUnavailableBudget informer did not start its watch")
		}
	}
	t.Cleanup(func() { a.stop() })
	return h
}

func (h *harness) observed() int {
	h.a.mu.Lock()
	defer h.a.mu.Unlock()
	return len(h.a.observations)
}

// observedSince reports whether the auditor recorded an observation of an
// object named name after its first n observations.
func (h *harness) observedSince(n int, name string) bool {
	h.a.mu.Lock()
	defer h.a.mu.Unlock()
	for _, o := range h.a.observations[n:] {
		if o.podKey.name == name || o.budget.Name == name || o.workloadKey.name == name {
			return true
		}
	}
	return false
}

// change runs write, which makes one informer event about the object named
// name, and waits until the auditor has recorded that event: not any
// event, as an informer's late event about another object would let the
// test go on before this one is recorded, and stamp it after the steps
// that follow (seen once under load in TestPUBViolationByTargetRefAndSelector).
func (h *harness) change(what, name string, write func() error) {
	h.t.Helper()
	before := h.observed()
	if err := write(); err != nil {
		h.t.Fatalf("%s: %v", what, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !h.observedSince(before, name) {
		if time.Now().After(deadline) {
			h.t.Fatalf("%s: the auditor's informers did not see it", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// write calls op, a typed client's Create or Update, on obj and waits until
// the auditor has seen the change.
func write[T metav1.Object, O any](h *harness, verb string, op func(context.Context, T, O) (T, error), obj T, opts O) {
	h.t.Helper()
	h.change(fmt.Sprintf("%s %T %s", verb, obj, obj.GetName()), obj.GetName(), func() error {
		_, err := op(h.ctx, obj, opts)
		return err
	})
}

// The writes of the tests, each seen by the auditor before it returns.
func (h *harness) createPod(p *corev1.Pod) {
	write(h, "create", h.kube.CoreV1().Pods(p.Namespace).Create, p, metav1.CreateOptions{})
}
func (h *harness) updatePod(p *corev1.Pod) {
	write(h, "update", h.kube.CoreV1().Pods(p.Namespace).Update, p, metav1.UpdateOptions{})
}
func (h *harness) createPDB(p *policyv1.PodDisruptionBudget) {
	write(h, "create", h.kube.PolicyV1().PodDisruptionBudgets(p.Namespace).Create, p, metav1.CreateOptions{})
}
func (h *harness) updatePDB(p *policyv1.PodDisruptionBudget) {
	write(h, "update", h.kube.PolicyV1().PodDisruptionBudgets(p.Namespace).Update, p, metav1.UpdateOptions{})
}
func (h *harness) createPUB(p *kruisepolicy.PodUnavailableBudget, extra ...func(map[string]any)) {
	res := h.dyn.Resource(pubGVR).Namespace(p.Namespace)
	create := func(ctx context.Context, u *unstructured.Unstructured, o metav1.CreateOptions) (*unstructured.Unstructured, error) {
		return res.Create(ctx, u, o)
	}
	write(h, "create", create, pubUnstructured(h.t, p, extra...), metav1.CreateOptions{})
}
func (h *harness) updatePUB(p *kruisepolicy.PodUnavailableBudget, extra ...func(map[string]any)) {
	res := h.dyn.Resource(pubGVR).Namespace(p.Namespace)
	update := func(ctx context.Context, u *unstructured.Unstructured, o metav1.UpdateOptions) (*unstructured.Unstructured, error) {
		return res.Update(ctx, u, o)
	}
	write(h, "update", update, pubUnstructured(h.t, p, extra...), metav1.UpdateOptions{})
}

// pubGVR is where the harness serves PUBs (the auditor reads v1alpha1
// unless told otherwise).
var pubGVR = schema.GroupVersionResource{Group: "policy.kruise.io", Version: "v1alpha1", Resource: "podunavailablebudgets"}

// pubUnstructured is p as the dynamic client serves it; extra sets fields
// v1alpha1 has not (spec.ignoredPodSelector, spec.protectOperations).
func pubUnstructured(t *testing.T, p *kruisepolicy.PodUnavailableBudget, extra ...func(map[string]any)) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion("policy.kruise.io/v1alpha1")
	u.SetKind("PodUnavailableBudget")
	for _, f := range extra {
		f(u.Object)
	}
	return u
}

func (h *harness) deletePod(p *corev1.Pod) {
	h.t.Helper()
	h.change("delete pod "+p.Name, p.Name, func() error {
		return h.kube.CoreV1().Pods(p.Namespace).Delete(h.ctx, p.Name, metav1.DeleteOptions{})
	})
}

// logged describes one audit log line.
type logged struct {
	ua      string
	action  Action
	pod     string
	code    int32
	message string
	dryRun  bool
	// took is how long the API server took to answer (the log's
	// stageTimestamp minus its requestReceivedTimestamp); 500µs when 0.
	took time.Duration
}

// log appends an audit event for l, received now by the test clock, and
// returns that time as the log will carry it (to the microsecond).
func (h *harness) log(l logged) time.Time {
	h.t.Helper()
	h.auditID++
	received := metav1.NewMicroTime(h.clock.now())
	ev := auditv1.Event{
		TypeMeta:   metav1.TypeMeta{APIVersion: "audit.k8s.io/v1", Kind: "Event"},
		Level:      auditv1.LevelRequest,
		AuditID:    types.UID(fmt.Sprintf("audit-%d", h.auditID)),
		Stage:      auditv1.StageResponseComplete,
		UserAgent:  l.ua,
		User:       userInfo(),
		ObjectRef:  &auditv1.ObjectReference{Resource: "pods", Namespace: testNS, Name: l.pod, APIVersion: "v1"},
		RequestURI: "/api/v1/namespaces/" + testNS + "/pods/" + l.pod,
		ResponseStatus: &metav1.Status{
			Code:    l.code,
			Message: l.message,
		},
		RequestReceivedTimestamp: received,
		StageTimestamp:           metav1.NewMicroTime(received.Add(cmp.Or(l.took, 500*time.Microsecond))),
	}
	var dry []string
	if l.dryRun {
		dry = []string{metav1.DryRunAll}
	}
	var body any
	switch l.action {
	case ActionDelete:
		ev.Verb = "delete"
		body = metav1.DeleteOptions{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "DeleteOptions"}, DryRun: dry}
	case ActionEvict:
		ev.Verb = "create"
		ev.ObjectRef.Subresource = "eviction"
		ev.RequestURI += "/eviction"
		body = policyv1.Eviction{
			TypeMeta:      metav1.TypeMeta{APIVersion: "policy/v1", Kind: "Eviction"},
			ObjectMeta:    metav1.ObjectMeta{Name: l.pod, Namespace: testNS},
			DeleteOptions: &metav1.DeleteOptions{DryRun: dry},
		}
	}
	raw, err := json.Marshal(body)
	if err != nil {
		h.t.Fatal(err)
	}
	ev.RequestObject = &runtime.Unknown{Raw: raw, ContentType: runtime.ContentTypeJSON}
	line, err := json.Marshal(ev)
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.logFile.Write(append(line, '\n')); err != nil {
		h.t.Fatal(err)
	}
	return received.Time
}

func userInfo() authenticationv1.UserInfo {
	return authenticationv1.UserInfo{Username: "system:apiserver", Groups: []string{"system:authenticated", "system:masters"}}
}

func (h *harness) finish() Result {
	h.t.Helper()
	res, err := h.a.Finish(h.ctx)
	if err != nil {
		h.t.Fatalf("Finish: %v", err)
	}
	return res
}

// runningPod is a Running, Ready pod in testNS on node-1, with UID
// "uid-<name>".
func runningPod(name string) *testobj.PodWrapper {
	return testobj.RunningPod(testNS, name).Node("node-1")
}

// webPod is a runningPod labelled app=web.
func webPod(name string) *testobj.PodWrapper { return runningPod(name).Label("app", "web") }

// deleted is when the tests' pods start terminating.
var deleted = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// terminating is p as the API server leaves it on a delete with a grace
// period.
func terminating(p *testobj.PodWrapper) *corev1.Pod {
	return p.Terminating(deleted).DeletionGracePeriod(30).Obj()
}

// pdb is a PDB in testNS over the pods labelled app=app, with a computed
// status that requires desired healthy pods.
func pdb(app string, desired int32) *testobj.PDBWrapper {
	return testobj.MakePDB().Namespace(testNS).Name(app).Generation(1).Status(0, desired, 0).MatchLabels("app", app)
}

// pub is a PUB in testNS with a computed status that requires desired
// available pods.
func pub(name string, desired int32) *testobj.PUBWrapper {
	return testobj.MakePUB().Namespace(testNS).Name(name).Generation(1).Status(0, desired, 0)
}

// webWorkload is Deployment web and its ReplicaSet web-1, with the UIDs
// "uid-deploy-web" and "uid-rs-web-1", and a PUB web that targets the
// Deployment and requires desired available pods.
func webWorkload(desired int32) (*appsv1.Deployment, *appsv1.ReplicaSet, *kruisepolicy.PodUnavailableBudget) {
	d := testobj.MakeDeployment().Namespace(testNS).Name("web").UID("uid-deploy-web").Obj()
	rs := testobj.MakeReplicaSet().Namespace(testNS).Name("web-1").UID("uid-rs-web-1").OwnedBy("apps/v1", "Deployment", d.Name, d.UID).Obj()
	return d, rs, pub("web", desired).TargetRef("apps/v1", "Deployment", "web").Obj()
}

func ref(kind, name string) BudgetRef {
	return BudgetRef{Kind: kind, Namespace: testNS, Name: name}
}

// webPods creates the PDB web with desired healthy pods and a Running,
// Ready pod app=web for each name, and returns those pods by name.
func (h *harness) webPods(desired int32, names ...string) map[string]*testobj.PodWrapper {
	h.t.Helper()
	h.createPDB(pdb("web", desired).Obj())
	pods := make(map[string]*testobj.PodWrapper, len(names))
	for _, name := range names {
		pods[name] = webPod(name)
		h.createPod(pods[name].Obj())
	}
	return pods
}

// webDeleteViolation is the violation of PDB web by the scheduler's delete
// of pod, received at at, which left healthy of desired.
func webDeleteViolation(at time.Time, pod string, healthy, desired int32) Violation {
	web := ref(KindPDB, "web")
	return Violation{
		Budget: web,
		Disruption: Disruption{Time: at, Component: ComponentScheduler, UserAgent: uaScheduler, Action: ActionDelete,
			Namespace: testNS, Pod: pod, Budgets: []BudgetRef{web}, WasHealthy: true},
		Healthy: healthy, Desired: desired,
	}
}

// checkViolations fails t unless got are exactly want.
func checkViolations(t *testing.T, want, got []Violation) {
	t.Helper()
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("violations (-want,+got):\n%s", diff)
	}
}

// logPUBWrite appends an audit event of an update of PUB name's status by
// ua, received now by the test clock and answered 500µs later, whose body
// records pods in status.disruptedPods; it returns when it was answered.
func (h *harness) logPUBWrite(ua, name string, code int32, pods ...string) time.Time {
	h.t.Helper()
	h.auditID++
	received := metav1.NewMicroTime(h.clock.now())
	answered := metav1.NewMicroTime(received.Add(500 * time.Microsecond))
	disrupted := map[string]string{}
	for _, p := range pods {
		disrupted[p] = received.UTC().Format(time.RFC3339)
	}
	raw, err := json.Marshal(map[string]any{
		"apiVersion": "policy.kruise.io/v1beta1", "kind": "PodUnavailableBudget",
		"metadata": map[string]any{"name": name, "namespace": testNS},
		"status":   map[string]any{"disruptedPods": disrupted},
	})
	if err != nil {
		h.t.Fatal(err)
	}
	ev := auditv1.Event{
		TypeMeta:  metav1.TypeMeta{APIVersion: "audit.k8s.io/v1", Kind: "Event"},
		Level:     auditv1.LevelRequest,
		AuditID:   types.UID(fmt.Sprintf("audit-%d", h.auditID)),
		Stage:     auditv1.StageResponseComplete,
		Verb:      "update",
		UserAgent: ua,
		User:      userInfo(),
		ObjectRef: &auditv1.ObjectReference{Resource: "podunavailablebudgets", Subresource: "status", APIGroup: "policy.kruise.io",
			APIVersion: "v1beta1", Namespace: testNS, Name: name},
		RequestURI:               "/apis/policy.kruise.io/v1beta1/namespaces/" + testNS + "/podunavailablebudgets/" + name + "/status",
		ResponseStatus:           &metav1.Status{Code: code},
		RequestReceivedTimestamp: received,
		StageTimestamp:           answered,
		RequestObject:            &runtime.Unknown{Raw: raw, ContentType: runtime.ContentTypeJSON},
	}
	line, err := json.Marshal(ev)
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.logFile.Write(append(line, '\n')); err != nil {
		h.t.Fatal(err)
	}
	return answered.Time
}

// checkRaces fails t unless the races found are, by pod, want.
func checkRaces(t *testing.T, want []string, got []Race) {
	t.Helper()
	var pods []string
	for _, r := range got {
		pods = append(pods, r.Disruption.Pod)
	}
	if diff := gocmp.Diff(want, pods); diff != "" {
		t.Errorf("races by pod (-want,+got):\n%s\n%+v", diff, got)
	}
}
