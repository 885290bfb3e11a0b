package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	kruiseinformers "github.com/openkruise/kruise-api/client/informers/externalversions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/klog/v2/ktesting"

	kruisebeta "github.com/budgetguard/budgetguard/apis/kruise/policy/v1beta1"
	"github.com/budgetguard/budgetguard/internal/testenv"
	"github.com/budgetguard/budgetguard/internal/testobj"
	"github.com/budgetguard/budgetguard/plugins/budget"
)

// TestPUBv1beta1IsPreferred: where the API server serves
// policy.kruise.io/v1beta1 (as OpenKruise's CRD does, and the sandbox's),
// the budget cache reads PUBs there, and decides by the fields v1alpha1
// cannot say: spec.ignoredPodSelector lets the pods it selects go, and
// spec.protectOperations names what is protected. A cache that can read
// only v1alpha1 still protects the ignored pod: more than OpenKruise, never
// less.
func TestPUBv1beta1IsPreferred(t *testing.T) {
	ns := env.NewNamespace(t)
	node := env.ReadyNode(t, ns, "4")
	for track, replicas := range map[string]int32{"stable": 2, "canary": 1} {
		tmpl := testobj.BoundPod(node).Label("app", "web").Label("track", track).GracePeriod(0).Template()
		env.CreateReplicaSet(t, ns, testobj.MakeReplicaSet().Name("web-"+track).Replicas(replicas).Template(tmpl))
	}
	pods := env.WaitForReadyPods(t, ns, map[string]string{"app": "web"}, 3)

	alpha := env.CreatePUB(t, ns, testobj.MakePUB().Name("web").MatchLabels("app", "web").MaxUnavailable(intstr.FromInt32(1)))
	env.SetPUBStatus(t, alpha, 3, 3, 0)

	beta, err := budget.NewPUBv1beta1Client(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t)
	var pub kruisebeta.PodUnavailableBudget
	if err := beta.Get().Namespace(ns).Resource("podunavailablebudgets").Name("web").Do(ctx).Into(&pub); err != nil {
		t.Fatalf("get the PUB at v1beta1: %v", err)
	}
	if pub.Status.DesiredAvailable != 3 || pub.Spec.MaxUnavailable == nil {
		t.Fatalf("the PUB read at v1beta1 lost what v1alpha1 wrote: %+v", pub)
	}
	pub.Spec.IgnoredPodSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"track": "canary"}}
	pub.Spec.ProtectOperations = []kruisebeta.PubOperation{kruisebeta.PubEvictOperation}
	if err := beta.Put().Namespace(ns).Resource("podunavailablebudgets").Name("web").Body(&pub).Do(ctx).Into(&pub); err != nil {
		t.Fatalf("update the PUB at v1beta1: %v", err)
	}
	// The spec changed its generation: the status is written again, at
	// v1beta1 (a v1alpha1 status update would carry the stored object
	// through v1alpha1, which has no ignoredPodSelector).
	pub.Status.ObservedGeneration = pub.Generation
	if err := beta.Put().Namespace(ns).Resource("podunavailablebudgets").Name("web").SubResource("status").Body(&pub).Do(ctx).Into(&pub); err != nil {
		t.Fatalf("update the PUB's status at v1beta1: %v", err)
	}
	if pub.Spec.IgnoredPodSelector == nil || len(pub.Spec.ProtectOperations) != 1 {
		t.Fatalf("the PUB lost its v1beta1 fields: %+v", pub.Spec)
	}
	last := pub.ResourceVersion

	byTrack := map[string]*corev1.Pod{}
	for i := range pods {
		byTrack[pods[i].Labels["track"]] = &pods[i]
	}

	for _, tc := range []struct {
		name    string
		beta    bool
		version string
		// canary: whether the canary pod may be evicted.
		canary bool
	}{
		{name: "v1beta1", beta: true, version: budget.PUBGroupVersionV1beta1, canary: true},
		{name: "v1alpha1 only", beta: false, version: budget.PUBGroupVersion, canary: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, lctx := ktesting.NewTestContext(t)
			lctx, cancel := context.WithCancel(lctx)
			defer cancel()
			factory := informers.NewSharedInformerFactory(cp.Client, 0)
			kf := kruiseinformers.NewSharedInformerFactory(cp.KruiseClient, 0)
			opts := budget.Options{KruiseInformers: kf, Discovery: cp.Client.Discovery()}
			if tc.beta {
				opts.PUBv1beta1 = &budget.PUBv1beta1Source{Client: beta, Namespace: ns}
			}
			c, err := budget.New(lctx, factory, opts)
			if err != nil {
				t.Fatal(err)
			}
			factory.Start(lctx.Done())
			kf.Start(lctx.Done())
			syncCtx, stop := context.WithTimeout(lctx, 30*time.Second)
			defer stop()
			if !c.WaitForCacheSync(syncCtx) {
				reason, msg := c.NotSynced()
				t.Fatalf("the cache did not sync: %s: %s", reason, msg)
			}
			if got := c.PUBVersion(); got != tc.version {
				t.Errorf("the cache reads %q, want %q", got, tc.version)
			}
			// The cache may hold the PUB before its last status: wait.
			testenv.WaitFor(t, 30*time.Second, "the cache holds the PUB's last version", func(context.Context) (bool, error) {
				v, ok := c.ObservedResourceVersion(budget.KindPUB, ns, "web")
				return ok && v == last, nil
			})

			stable := c.Decide(byTrack["stable"], budget.OperationEvict)
			if stable.Allowed || !strings.Contains(stable.Message(), "pub "+ns+"/web") {
				t.Errorf("evict a stable pod: allowed %v (%s); want it refused by pub %s/web", stable.Allowed, stable.Message(), ns)
			}
			canary := c.Decide(byTrack["canary"], budget.OperationEvict)
			if canary.Allowed != tc.canary {
				t.Errorf("evict the canary pod: allowed %v (%s); want %v", canary.Allowed, canary.Message(), tc.canary)
			}
			if tc.beta {
				if d := c.Decide(byTrack["stable"], budget.OperationDelete); !d.Allowed {
					t.Errorf("delete a stable pod: refused (%s); protectOperations [EVICT] leaves a delete free", d.Message())
				}
			}

			// The durable record is written in the version the cache
			// reads, and leaves the spec as it is: a v1alpha1 status
			// update too, although v1alpha1 (behind the sandbox's
			// conversion, as OpenKruise's) cannot hold
			// ignoredPodSelector.
			var cur kruisebeta.PodUnavailableBudget
			if err := beta.Get().Namespace(ns).Resource("podunavailablebudgets").Name("web").Do(ctx).Into(&cur); err != nil {
				t.Fatal(err)
			}
			cur.Status.UnavailableAllowed = 1
			if err := beta.Put().Namespace(ns).Resource("podunavailablebudgets").Name("web").SubResource("status").Body(&cur).Do(ctx).Error(); err != nil {
				t.Fatal(err)
			}
			rec, err := budget.RecordPUBDisruption(ctx, c.PUBStatusClient(cp.KruiseClient), ns, "web", byTrack["stable"], budget.OperationEvict, time.Now())
			if err != nil || rec == nil {
				t.Fatalf("record the eviction of a stable pod: %+v, %v", rec, err)
			}
			if err := beta.Get().Namespace(ns).Resource("podunavailablebudgets").Name("web").Do(ctx).Into(&cur); err != nil {
				t.Fatal(err)
			}
			if _, ok := cur.Status.DisruptedPods[byTrack["stable"].Name]; !ok || cur.Status.UnavailableAllowed != 0 {
				t.Errorf("the record is not in the status: %+v", cur.Status)
			}
			if cur.Spec.IgnoredPodSelector == nil {
				t.Errorf("after a status record at %s, spec.ignoredPodSelector is gone", tc.version)
			}
			if len(cur.Spec.ProtectOperations) != 1 {
				t.Errorf("after a status record at %s, spec.protectOperations is %v, want [EVICT]", tc.version, cur.Spec.ProtectOperations)
			}
			// Back as the next case expects it.
			cur.Spec.IgnoredPodSelector = pub.Spec.IgnoredPodSelector
			if err := beta.Put().Namespace(ns).Resource("podunavailablebudgets").Name("web").Body(&cur).Do(ctx).Into(&cur); err != nil {
				t.Fatal(err)
			}
			cur.Status = pub.Status
			cur.Status.ObservedGeneration = cur.Generation
			if err := beta.Put().Namespace(ns).Resource("podunavailablebudgets").Name("web").SubResource("status").Body(&cur).Do(ctx).Into(&cur); err != nil {
				t.Fatal(err)
			}
			last = cur.ResourceVersion
		})
	}
}
