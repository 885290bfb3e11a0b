package budgetevictor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"

	"github.com/budgetguard/budgetguard/plugins/budget"
)

// The eviction gate reserves a budget at the eviction request itself rather
// than in PreEvictionFilter. Several descheduler strategies (RemoveDuplicates,
// RemovePodsHavingTooManyRestarts, PodLifeTime) call PreEvictionFilter while
// they list candidates, including pods they then keep; a reservation taken
// there would spend the budget on a pod that is never evicted. The gate sits
// on the client the descheduler hands its plugins, which is the client its
// pod evictor posts evictions with:
//
//   - a real clientset: the policy/v1 REST client's HTTP client gets a
//     RoundTripper that sees POST …/pods/NAME/eviction;
//   - the dry run's fake clientset: a reactor for create pods/eviction, in
//     front of the descheduler's own.
//
// For each eviction request the gate takes a live decision and reserves it in
// the ledger. A denied request is answered 429 with the budget's message and
// never reaches the API server. An allowed one is sent, and its reservation is
// cancelled when the API server does not accept it.
//
// The PUB records of an eviction whose outcome is unknown (a 5xx, a timeout)
// stay in the PUBs' status, and the gate keeps note of them. The next
// eviction request for the same pod (the descheduler's retry) is decided as
// any other, and, whatever its record step finds in the PUB's status,
// checked against the live count after that step; when it is refused, the
// pod stays, and its kept records are taken back.

// extensionEvictionRequest labels refusals made at the eviction request.
const extensionEvictionRequest = "EvictionRequest"

// evictionGate decides and reserves eviction requests against a cache.
type evictionGate struct {
	// sh holds the budget cache, built on the first decision, and the
	// Kruise client that writes the record of a PUB disruption into the
	// PUB's status before the eviction is sent: the API server does not
	// check PUBs (budget.RecordPUBDisruption). That client is nil when
	// PUBs are off, and in a dry run, which must not write to the cluster.
	sh     *shared
	pods   corelisters.PodLister
	logger klog.Logger
	kept   keptRecords
}

// keptRecords are the PUB records of evictions whose outcome is unknown, by
// pod UID: the pod may have gone, so they stay in the PUBs' status; if it
// has not, they are this gate's to take back.
type keptRecords struct {
	mu    sync.Mutex
	byPod map[types.UID]keptEntry
}

type keptEntry struct {
	recs []budget.PUBRecord
	at   time.Time
}

// keptFor bounds how long a kept record is remembered: as long as a
// reservation may hold, which no retry outwaits. Taking back a record that
// has left the PUB's status since changes nothing: UndoPUBRecords removes
// only the entry it was given.
const keptFor = budget.DefaultMaxHold

// keep notes recs, kept for the pod with uid.
func (k *keptRecords) keep(uid types.UID, recs []budget.PUBRecord, now time.Time) {
	if len(recs) == 0 {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.byPod == nil {
		k.byPod = map[types.UID]keptEntry{}
	}
	for id, e := range k.byPod {
		if now.Sub(e.at) > keptFor {
			delete(k.byPod, id)
		}
	}
	k.byPod[uid] = keptEntry{recs: append(k.byPod[uid].recs, recs...), at: now}
}

// take returns the records kept for the pod with uid and forgets them: the
// eviction now being admitted answers for them.
func (k *keptRecords) take(uid types.UID, now time.Time) []budget.PUBRecord {
	k.mu.Lock()
	defer k.mu.Unlock()
	e, ok := k.byPod[uid]
	if !ok {
		return nil
	}
	delete(k.byPod, uid)
	if now.Sub(e.at) > keptFor {
		return nil
	}
	return e.recs
}

// admitted is what an admitted eviction holds until the API server answers:
// the ledger reservation (nil when nothing was reserved), the PUB records
// written for it, and those an earlier eviction of the pod whose outcome is
// unknown left (kept).
type admitted struct {
	r    *budget.Reservation
	recs []budget.PUBRecord
	kept []budget.PUBRecord
	// pubs wrote recs, in the version of the PUB API the cache reads.
	pubs budget.PUBStatusClient
	// pod is the pod as it was decided on (nil when the cache does not
	// hold it): the eviction carries its preconditions.
	pod *v1.Pod
}

// failed gives back what the eviction held when it was not carried out:
// the reservation always, and the PUB records, its own and the kept ones,
// when it was refused (by the API server, a 4xx, or by the gate), so that
// the pod, which stays, is not free to take later under rule 5. When the
// outcome is unknown the records stay until Kruise's controller times them
// out, and are kept for the next eviction of the pod.
func (a admitted) failed(ctx context.Context, g *evictionGate, refused bool) {
	if a.r != nil {
		a.r.Cancel()
	}
	recs := append(slices.Clip(a.kept), a.recs...)
	if len(recs) == 0 {
		return
	}
	if !refused {
		g.kept.keep(a.pod.UID, recs, time.Now())
		return
	}
	if err := budget.UndoPUBRecords(ctx, a.pubs, recs); err != nil {
		g.logger.Info("Warning: the disruption of a pod whose eviction was refused is still recorded in its PodUnavailableBudget; the record times out", "err", err)
	}
}

// admit decides the eviction of namespace/name. It returns what to give
// back if the eviction then fails, or the Status to answer with when the
// eviction is refused.
func (g *evictionGate) admit(ctx context.Context, namespace, name string) (admitted, *metav1.Status) {
	c, err := g.sh.budgets()
	if err != nil {
		return admitted{}, g.refuse(namespace, name, ReasonCacheNotSynced, notSyncedMessage(err.Error()))
	}
	if !c.HasSynced() {
		_, why := c.NotSynced()
		return admitted{}, g.refuse(namespace, name, ReasonCacheNotSynced, notSyncedMessage(why))
	}
	pod, err := g.pods.Pods(namespace).Get(name)
	if err != nil {
		// The cache does not know the pod (yet, or any more): the API
		// server decides on its own, with its own budget check.
		g.logger.V(4).Info("Eviction of a pod the budget cache does not hold is passed through", "pod", klog.KRef(namespace, name), "err", err)
		return admitted{}, nil
	}
	if refs := evictedEarlier(g.sh, c, pod); refs != "" {
		return admitted{}, g.refuse(namespace, name, ReasonEvictedEarlierInDryRun, evictedEarlierMessage(refs))
	}
	// A retry gets no pass for the records its earlier attempt kept: it is
	// decided as any eviction, and a refusal takes them back (failed).
	a := admitted{pod: pod, kept: g.kept.take(pod.UID, time.Now())}
	if g.sh.kruise != nil {
		a.pubs = c.PUBStatusClient(g.sh.kruise)
	}
	d, r := c.Reserve(pod, budget.OperationEvict)
	if !d.Allowed {
		a.failed(ctx, g, true)
		return admitted{}, g.refuse(namespace, name, string(d.Reason()), d.Message())
	}
	a.r = r
	roundTrip := false
	if g.sh.kruise != nil {
		held := c.WithHeld(d, pod)
		roundTrip = spendsPUB(held)
		a.recs, err = budget.RecordPUBDisruptions(ctx, a.pubs, held, pod, budget.OperationEvict, time.Now())
		if err != nil {
			var de *budget.DeniedError
			if errors.As(err, &de) {
				a.failed(ctx, g, true)
				return admitted{}, g.refuse(namespace, name, string(de.Decision.Reason()), de.Decision.Message())
			}
			// Not recorded, so not sent: fail closed. The PUB API failed,
			// so the kept records stay for the next attempt.
			a.failed(ctx, g, false)
			return admitted{}, g.refuse(namespace, name, ReasonPUBRecordFailed, err.Error())
		}
	}
	// The record step took a round trip: it re-read each PUB the decision
	// spends, whatever it then found (a record to write, none needed, or
	// the record an earlier attempt of this eviction kept, which it
	// reuses). A covered pod may have turned not Ready since the decision:
	// checked against the live count once more just before the eviction is
	// sent, as preemption checks each victim. Without that round trip, the
	// decision just made is as fresh as a recheck.
	if roundTrip {
		var de *budget.DeniedError
		if err := c.RecheckLive(pod, budget.OperationEvict); errors.As(err, &de) {
			a.failed(ctx, g, true)
			return admitted{}, g.refuse(namespace, name, string(de.Decision.Reason()), de.Decision.Message())
		}
	}
	// A PUB that records the pod's disruption already lets it go for
	// nothing, but only while it is whole without it: read from the API
	// server (see budget.Cache.RecheckRecordedPUBs).
	if g.sh.kruise != nil {
		var de *budget.DeniedError
		if err := c.RecheckRecordedPUBs(ctx, a.pubs, pod, budget.OperationEvict); errors.As(err, &de) {
			a.failed(ctx, g, true)
			return admitted{}, g.refuse(namespace, name, string(de.Decision.Reason()), de.Decision.Message())
		} else if err != nil {
			a.failed(ctx, g, false)
			return admitted{}, g.refuse(namespace, name, ReasonPUBRecordFailed, err.Error())
		}
	}
	if r != nil {
		reservations.Inc()
		g.logger.V(3).Info("Reserved disruption budget for eviction", "pod", klog.KObj(pod), "budgets", d.Spends)
	}
	return a, nil
}

// spendsPUB reports whether d spends a PodUnavailableBudget, whose record
// step (budget.RecordPUBDisruptions) then re-reads it from the API server.
func spendsPUB(d budget.Decision) bool {
	for _, b := range d.Spends {
		if b.Kind == budget.KindPUB {
			return true
		}
	}
	return false
}

func (g *evictionGate) refuse(namespace, name, reason, message string) *metav1.Status {
	evictionsRefused.WithLabelValues(extensionEvictionRequest, reason).Inc()
	g.logger.V(2).Info("Eviction refused by budget", "extensionPoint", extensionEvictionRequest, "pod", klog.KRef(namespace, name), "reason", reason, "message", message)
	err := apierrors.NewTooManyRequests(fmt.Sprintf("%s refused the eviction of pod %s/%s: %s (%s)", PluginName, namespace, name, message, reason), 0)
	st := err.Status()
	st.Details = &metav1.StatusDetails{
		Name: name, Kind: "pods",
		Causes: []metav1.StatusCause{{Type: metav1.CauseType(policyDisruptionBudgetCause), Message: message}},
	}
	return &st
}

// policyDisruptionBudgetCause is the cause type the API server's Eviction
// handler uses when a budget refuses.
const policyDisruptionBudgetCause = "DisruptionBudget"

// install puts the gate on client. It returns false when the client is of a
// kind the gate cannot wrap; PreEvictionFilter then reserves instead.
func (g *evictionGate) install(client kubernetes.Interface) bool {
	switch c := client.(type) {
	case *kubernetes.Clientset:
		rc, ok := c.PolicyV1().RESTClient().(*rest.RESTClient)
		if !ok || rc == nil {
			return false
		}
		hc := rc.Client
		if hc == nil {
			hc = http.DefaultClient
		}
		if installed, done := hc.Transport.(*gateTransport); done {
			// The descheduler was built again on this client with a new
			// informer factory (the sandbox does so for every step; a
			// program may for every run): decide on the new cache from now
			// on, not on the first one, which has stopped.
			installed.gate.Store(g)
			return true
		}
		next := hc.Transport
		if next == nil {
			next = http.DefaultTransport
		}
		wrapped := *hc
		t := &gateTransport{next: next}
		t.gate.Store(g)
		wrapped.Transport = t
		rc.Client = &wrapped
		return true
	case *fake.Clientset:
		c.PrependReactor("create", "pods", g.react)
		return true
	}
	return false
}

// react is the fake clientset's reactor: a refused eviction is answered with
// the Status error; an allowed one goes on to the next reactor (the dry run's,
// which deletes the pod from the fake cluster).
func (g *evictionGate) react(action clienttesting.Action) (bool, runtime.Object, error) {
	if action.GetSubresource() != "eviction" {
		return false, nil, nil
	}
	create, ok := action.(clienttesting.CreateAction)
	if !ok {
		return false, nil, nil
	}
	name := ""
	if m, err := metaName(create.GetObject()); err == nil {
		name = m
	}
	if name == "" {
		return false, nil, nil
	}
	if _, st := g.admit(context.Background(), action.GetNamespace(), name); st != nil {
		return true, nil, &apierrors.StatusError{ErrStatus: *st}
	}
	return false, nil, nil
}

func metaName(obj runtime.Object) (string, error) {
	if obj == nil {
		return "", fmt.Errorf("no object")
	}
	acc, ok := obj.(metav1.Object)
	if !ok {
		return "", fmt.Errorf("%T has no metadata", obj)
	}
	return acc.GetName(), nil
}

// gateTransport is the RoundTripper of the policy/v1 REST client. Its gate
// is the one installed last.
type gateTransport struct {
	gate atomic.Pointer[evictionGate]
	next http.RoundTripper
}

func (t *gateTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	namespace, name, ok := evictionTarget(req)
	if !ok {
		return t.next.RoundTrip(req)
	}
	g := t.gate.Load()
	a, st := g.admit(req.Context(), namespace, name)
	if st != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return statusResponse(req, st), nil
	}
	if a.pod != nil {
		req = withPreconditions(req, a.pod, g.logger)
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.StatusCode < 200 || resp.StatusCode > 299 {
		a.failed(req.Context(), g, err == nil && resp.StatusCode >= 400 && resp.StatusCode < 500)
	}
	if err == nil && resp.StatusCode == http.StatusTooManyRequests {
		// The API server's budget check refused (our cache was behind).
		// Its Retry-After makes client-go retry up to 10 times, 10 s
		// apart, while the descheduler's evictor holds its lock; without
		// it the strategy moves on at once, as it would after any 429.
		resp.Header.Del("Retry-After")
		evictionsRefused.WithLabelValues(extensionAPIServer, "TooManyRequests").Inc()
	}
	return resp, err
}

// withPreconditions returns req with the preconditions of pod as it was
// decided on (budget.DisruptionPreconditions) in its Eviction's delete
// options, where the descheduler set none: the descheduler's body names the
// pod only. A body the gate cannot read goes as it is.
func withPreconditions(req *http.Request, pod *v1.Pod, logger klog.Logger) *http.Request {
	if req.Body == nil {
		return req
	}
	body, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if err != nil {
		// The body is lost; the request fails as it would have.
		logger.Info("Warning: cannot read an eviction request's body", "pod", klog.KObj(pod), "err", err)
		return req
	}
	out := req.Clone(req.Context())
	out.Body, out.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
	ev, ok := obj.(*policyv1.Eviction)
	if err != nil || !ok {
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		logger.V(2).Info("Eviction request body not understood; sent without the decided pod's preconditions", "pod", klog.KObj(pod), "type", fmt.Sprintf("%T", obj), "err", err)
		return out
	}
	want := budget.DisruptionPreconditions(pod)
	if ev.DeleteOptions == nil {
		ev.DeleteOptions = &metav1.DeleteOptions{}
	}
	if ev.DeleteOptions.Preconditions == nil {
		ev.DeleteOptions.Preconditions = &metav1.Preconditions{}
	}
	pre := ev.DeleteOptions.Preconditions
	if pre.UID == nil {
		pre.UID = want.UID
	}
	if pre.ResourceVersion == nil {
		pre.ResourceVersion = want.ResourceVersion
	}
	ev.SetGroupVersionKind(policyv1.SchemeGroupVersion.WithKind("Eviction"))
	data, err := json.Marshal(ev)
	if err != nil {
		return out
	}
	out.Body, out.ContentLength = io.NopCloser(bytes.NewReader(data)), int64(len(data))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
	out.Header = req.Header.Clone()
	out.Header.Set("Content-Type", "application/json")
	return out
}

// extensionAPIServer labels evictions the API server refused after the gate
// allowed them.
const extensionAPIServer = "APIServer"

// evictionTarget returns the namespace and name of a POST to a pod's
// eviction subresource: …/api/v1/namespaces/NS/pods/NAME/eviction (a
// kubeconfig server URL may add a path prefix).
func evictionTarget(req *http.Request) (string, string, bool) {
	if req.Method != http.MethodPost || req.URL == nil {
		return "", "", false
	}
	seg := strings.Split(strings.TrimSuffix(req.URL.Path, "/"), "/")
	n := len(seg)
	if n < 7 || seg[n-1] != "eviction" || seg[n-3] != "pods" || seg[n-5] != "namespaces" || seg[n-6] != "v1" || seg[n-7] != "api" {
		return "", "", false
	}
	if seg[n-4] == "" || seg[n-2] == "" {
		return "", "", false
	}
	return seg[n-4], seg[n-2], true
}

// statusResponse is the HTTP answer the API server would give with st.
func statusResponse(req *http.Request, st *metav1.Status) *http.Response {
	st.Kind, st.APIVersion = "Status", "v1"
	body, err := json.Marshal(st)
	if err != nil {
		body = []byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","code":429}`)
	}
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", st.Code, http.StatusText(int(st.Code))),
		StatusCode:    int(st.Code),
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{"Content-Type": []string{"application/json"}},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}
