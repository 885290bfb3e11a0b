package budget

import (
	"context"
	"fmt"
	"testing"
	"time"

	kruisefake "github.com/openkruise/kruise-api/client/clientset/versioned/fake"
	kruiseinformers "github.com/openkruise/kruise-api/client/informers/externalversions"
	kruisepolicy "github.com/openkruise/kruise-api/policy/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

const ns = "shop"

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// harness drives a Cache by calling its informer handlers directly, so a
// test controls exactly which events the Cache has seen and in what order.
type harness struct {
	t       testing.TB
	clock   *testingclock.FakeClock
	factory informers.SharedInformerFactory
	c       *Cache
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	clk := testingclock.NewFakeClock(epoch)
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	kf := kruiseinformers.NewSharedInformerFactory(kruisefake.NewSimpleClientset(), 0)
	c, err := New(context.Background(), factory, Options{Clock: clk, KruiseInformers: kf})
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, clock: clk, factory: factory, c: c}
}

func (h *harness) pdb(p *policyv1.PodDisruptionBudget) { h.c.onPDB(p, false) }
func (h *harness) pub(p *kruisepolicy.PodUnavailableBudget) {
	h.c.onPUB(p, false)
}
func (h *harness) podEvent(p *v1.Pod, deleted bool) { h.c.onPod(p, deleted) }

func (h *harness) add(objs ...any) {
	h.t.Helper()
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *appsv1.ReplicaSet:
			err = h.factory.Apps().V1().ReplicaSets().Informer().GetIndexer().Add(o)
		case *appsv1.Deployment:
			err = h.factory.Apps().V1().Deployments().Informer().GetIndexer().Add(o)
		case *appsv1.StatefulSet:
			err = h.factory.Apps().V1().StatefulSets().Informer().GetIndexer().Add(o)
		case *policyv1.PodDisruptionBudget:
			h.pdb(o)
		case *kruisepolicy.PodUnavailableBudget:
			h.pub(o)
		default:
			err = fmt.Errorf("harness cannot add %T", o)
		}
		if err != nil {
			h.t.Fatal(err)
		}
	}
}

// podOpt modifies a test pod.
type podOpt func(*v1.Pod)

func mkPod(name string, opts ...podOpt) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name), Labels: map[string]string{"app": "web"}},
		Status: v1.PodStatus{
			Phase:      v1.PodRunning,
			Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}},
		},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func labelsOf(kv ...string) podOpt {
	return func(p *v1.Pod) {
		p.Labels = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}
func notReady(p *v1.Pod) { p.Status.Conditions[0].Status = v1.ConditionFalse }
func phase(ph v1.PodPhase) podOpt {
	return func(p *v1.Pod) { p.Status.Phase = ph }
}
func terminating(p *v1.Pod) { p.DeletionTimestamp = ptr.To(metav1.NewTime(epoch)) }
func annotate(k, v string) podOpt {
	return func(p *v1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[k] = v
	}
}
func ownedBy(apiVersion, kind, name string) podOpt {
	return func(p *v1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID("uid-" + name), Controller: ptr.To(true)}}
	}
}

// pdbStatus is healthy/desired/allowed, the numbers operators read.
type pdbStatus struct{ healthy, desired, allowed int32 }

type pdbOpt func(*policyv1.PodDisruptionBudget)

func mkPDB(name string, sel *metav1.LabelSelector, st pdbStatus, opts ...pdbOpt) *policyv1.PodDisruptionBudget {
	p := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-pdb-" + name), Generation: 1},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: sel, MinAvailable: ptr.To(intstr.FromInt32(st.desired))},
		Status: policyv1.PodDisruptionBudgetStatus{
			ObservedGeneration: 1,
			CurrentHealthy:     st.healthy,
			DesiredHealthy:     st.desired,
			DisruptionsAllowed: st.allowed,
			ExpectedPods:       st.healthy,
		},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func policy(p policyv1.UnhealthyPodEvictionPolicyType) pdbOpt {
	return func(b *policyv1.PodDisruptionBudget) { b.Spec.UnhealthyPodEvictionPolicy = &p }
}
func disrupted(names ...string) pdbOpt {
	return func(b *policyv1.PodDisruptionBudget) {
		if b.Status.DisruptedPods == nil {
			b.Status.DisruptedPods = map[string]metav1.Time{}
		}
		for _, n := range names {
			b.Status.DisruptedPods[n] = metav1.NewTime(epoch)
		}
	}
}

func appWeb() *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
}

type pubOpt func(*kruisepolicy.PodUnavailableBudget)

// mkPUB builds a PUB with status available/desired/allowed.
func mkPUB(name string, st pdbStatus, opts ...pubOpt) *kruisepolicy.PodUnavailableBudget {
	p := &kruisepolicy.PodUnavailableBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-pub-" + name), Generation: 1},
		Status: kruisepolicy.PodUnavailableBudgetStatus{
			ObservedGeneration: 1,
			CurrentAvailable:   st.healthy,
			DesiredAvailable:   st.desired,
			UnavailableAllowed: st.allowed,
			TotalReplicas:      st.healthy,
		},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func pubSelector(sel *metav1.LabelSelector) pubOpt {
	return func(p *kruisepolicy.PodUnavailableBudget) { p.Spec.Selector = sel }
}
func pubTarget(apiVersion, kind, name string) pubOpt {
	return func(p *kruisepolicy.PodUnavailableBudget) {
		p.Spec.TargetReference = &kruisepolicy.TargetReference{APIVersion: apiVersion, Kind: kind, Name: name}
	}
}
func pubAnnotate(k, v string) pubOpt {
	return func(p *kruisepolicy.PodUnavailableBudget) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[k] = v
	}
}
func pubRecorded(disruptedPod, unavailablePod string) pubOpt {
	return func(p *kruisepolicy.PodUnavailableBudget) {
		if disruptedPod != "" {
			p.Status.DisruptedPods = map[string]metav1.Time{disruptedPod: metav1.NewTime(epoch)}
		}
		if unavailablePod != "" {
			p.Status.UnavailablePods = map[string]metav1.Time{unavailablePod: metav1.NewTime(epoch)}
		}
	}
}

func replicaSet(name, deployment string) *appsv1.ReplicaSet {
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name)}}
	if deployment != "" {
		rs.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: deployment, UID: types.UID("uid-" + deployment), Controller: ptr.To(true)}}
	}
	return rs
}

func deployment(name string) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name)}}
}

func statefulSet(name string) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name)}}
}
