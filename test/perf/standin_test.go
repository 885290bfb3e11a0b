//go:build perf

package perf

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	kruiseclient "github.com/openkruise/kruise-api/client/clientset/versioned"
	kruiseinformers "github.com/openkruise/kruise-api/client/informers/externalversions"
	kruisepolicy "github.com/openkruise/kruise-api/policy/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// standin plays, for the pods and budgets of one namespace, the parts that
// scheduler_perf leaves out: a kubelet that marks bound pods Running and
// Ready, and a disruption controller (and Kruise's PUB controller) that
// writes each budget's status once, when the budget appears, from its spec
// and the pods it selects. It never writes a status again: the API server's
// eviction handler and budgetguard's PUB record spend the budgets from
// there, as they would between two passes of the real controllers. It also
// counts the victims of each application, to tell how many were taken
// beyond what their budget allowed.
type standin struct {
	ns      string
	client  kubernetes.Interface
	kruise  kruiseclient.Interface
	factory informers.SharedInformerFactory
	kfac    kruiseinformers.SharedInformerFactory
	queue   workqueue.TypedRateLimitingInterface[item]
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu sync.Mutex
	// budgets maps an application (the value of its pods' app label) to
	// its budget and what that budget allowed when its status was written.
	budgets map[string]allowance
	victims map[string]int
	// lastPrepared is when the last pod was marked Ready or the last
	// status written; firstVictim is when the first pod went.
	lastPrepared, firstVictim time.Time
	errs                      []error
}

type itemKind int

const (
	podItem itemKind = iota
	pdbItem
	pubItem
)

type item struct {
	kind itemKind
	name string
}

type allowance struct {
	kind, name string
	allowed    int32
}

// standinWorkers update statuses in parallel; the API server is in-process.
const standinWorkers = 4

func startStandin(ctx context.Context, client kubernetes.Interface, kruise kruiseclient.Interface, ns string) (*standin, error) {
	ctx, cancel := context.WithCancel(ctx)
	s := &standin{
		ns:      ns,
		client:  client,
		kruise:  kruise,
		factory: informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns)),
		kfac:    kruiseinformers.NewSharedInformerFactoryWithOptions(kruise, 0, kruiseinformers.WithNamespace(ns)),
		queue:   workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[item]()),
		cancel:  cancel,
		budgets: map[string]allowance{},
		victims: map[string]int{},
	}
	pods := s.factory.Core().V1().Pods().Informer()
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.podChanged(obj) },
		UpdateFunc: func(_, obj any) { s.podChanged(obj) },
		DeleteFunc: s.podDeleted,
	}); err != nil {
		cancel()
		return nil, err
	}
	if _, err := s.factory.Policy().V1().PodDisruptionBudgets().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if pdb, ok := obj.(*policyv1.PodDisruptionBudget); ok {
				s.queue.Add(item{pdbItem, pdb.Name})
			}
		},
	}); err != nil {
		cancel()
		return nil, err
	}
	if _, err := s.kfac.Policy().V1alpha1().PodUnavailableBudgets().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if pub, ok := obj.(*kruisepolicy.PodUnavailableBudget); ok {
				s.queue.Add(item{pubItem, pub.Name})
			}
		},
	}); err != nil {
		cancel()
		return nil, err
	}
	s.factory.Start(ctx.Done())
	s.kfac.Start(ctx.Done())
	for typ, ok := range s.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			s.stop()
			return nil, fmt.Errorf("stand-in: the %v informer did not sync", typ)
		}
	}
	for typ, ok := range s.kfac.WaitForCacheSync(ctx.Done()) {
		if !ok {
			s.stop()
			return nil, fmt.Errorf("stand-in: the %v informer did not sync", typ)
		}
	}
	for range standinWorkers {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			for s.next(ctx) {
			}
		}()
	}
	return s, nil
}

// stop ends the workers and the informers and waits for them.
func (s *standin) stop() {
	s.cancel()
	s.queue.ShutDown()
	s.wg.Wait()
	s.factory.Shutdown()
	s.kfac.Shutdown()
}

func (s *standin) podChanged(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil || podReady(pod) {
		return
	}
	s.queue.Add(item{podItem, pod.Name})
}

func (s *standin) podDeleted(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.firstVictim.IsZero() {
		s.firstVictim = time.Now()
	}
	s.victims[pod.Labels["app"]]++
}

func (s *standin) next(ctx context.Context) bool {
	it, shutdown := s.queue.Get()
	if shutdown {
		return false
	}
	defer s.queue.Done(it)
	var err error
	switch it.kind {
	case podItem:
		err = s.markReady(ctx, it.name)
	case pdbItem:
		err = s.writePDBStatus(ctx, it.name)
	case pubItem:
		err = s.writePUBStatus(ctx, it.name)
	}
	switch {
	case err == nil:
		s.queue.Forget(it)
	case apierrors.IsConflict(err) && s.queue.NumRequeues(it) < 5:
		s.queue.AddRateLimited(it)
	case ctx.Err() == nil:
		s.mu.Lock()
		s.errs = append(s.errs, err)
		s.mu.Unlock()
	}
	return true
}

func (s *standin) prepared() {
	s.mu.Lock()
	s.lastPrepared = time.Now()
	s.mu.Unlock()
}

func (s *standin) markReady(ctx context.Context, name string) error {
	pod, err := s.factory.Core().V1().Pods().Lister().Pods(s.ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil || pod.Spec.NodeName == "" || podReady(pod) {
		return err
	}
	pod = pod.DeepCopy()
	now := metav1.Now()
	pod.Status.Phase = corev1.PodRunning
	pod.Status.StartTime = &now
	pod.Status.Conditions = nil
	for _, t := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	if _, err := s.client.CoreV1().Pods(s.ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("stand-in: mark pod %s/%s ready: %w", s.ns, name, err)
	}
	s.prepared()
	return nil
}

// selected counts the pods that selector selects, and names their
// application (the one app label value of the selector).
func (s *standin) selected(selector *metav1.LabelSelector) (int32, string, error) {
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		return 0, "", err
	}
	pods, err := s.factory.Core().V1().Pods().Lister().Pods(s.ns).List(sel)
	if err != nil {
		return 0, "", err
	}
	var app string
	if selector != nil {
		app = selector.MatchLabels["app"]
	}
	if app == "" {
		return 0, "", fmt.Errorf("selector %s names no app label", labels.Set(selector.MatchLabels))
	}
	return int32(len(pods)), app, nil
}

// desired is how many of expected pods must stay, from minAvailable or
// maxUnavailable (a percentage rounds up, as the disruption controller's).
func desired(minAvailable, maxUnavailable *intstr.IntOrString, expected int32) (int32, error) {
	switch {
	case minAvailable != nil:
		n, err := intstr.GetScaledValueFromIntOrPercent(minAvailable, int(expected), true)
		return int32(n), err
	case maxUnavailable != nil:
		n, err := intstr.GetScaledValueFromIntOrPercent(maxUnavailable, int(expected), true)
		return max(0, expected-int32(n)), err
	}
	return expected, nil
}

func (s *standin) writePDBStatus(ctx context.Context, name string) error {
	pdb, err := s.factory.Policy().V1().PodDisruptionBudgets().Lister().PodDisruptionBudgets(s.ns).Get(name)
	if err != nil || pdb.Status.ObservedGeneration >= pdb.Generation {
		return err
	}
	expected, app, err := s.selected(pdb.Spec.Selector)
	if err != nil {
		return fmt.Errorf("stand-in: PDB %s/%s: %w", s.ns, name, err)
	}
	want, err := desired(pdb.Spec.MinAvailable, pdb.Spec.MaxUnavailable, expected)
	if err != nil {
		return fmt.Errorf("stand-in: PDB %s/%s: %w", s.ns, name, err)
	}
	allowed := max(0, expected-want)
	pdb = pdb.DeepCopy()
	cond := metav1.Condition{Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionTrue,
		Reason: policyv1.SufficientPodsReason, LastTransitionTime: metav1.Now(), ObservedGeneration: pdb.Generation}
	if allowed == 0 {
		cond.Status, cond.Reason = metav1.ConditionFalse, policyv1.InsufficientPodsReason
	}
	pdb.Status = policyv1.PodDisruptionBudgetStatus{
		ObservedGeneration: pdb.Generation,
		DisruptionsAllowed: allowed,
		CurrentHealthy:     expected,
		DesiredHealthy:     want,
		ExpectedPods:       expected,
		Conditions:         []metav1.Condition{cond},
	}
	if _, err := s.client.PolicyV1().PodDisruptionBudgets(s.ns).UpdateStatus(ctx, pdb, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("stand-in: write the status of PDB %s/%s: %w", s.ns, name, err)
	}
	s.mu.Lock()
	s.budgets[app] = allowance{kind: "PDB", name: name, allowed: allowed}
	s.mu.Unlock()
	s.prepared()
	return nil
}

func (s *standin) writePUBStatus(ctx context.Context, name string) error {
	pub, err := s.kfac.Policy().V1alpha1().PodUnavailableBudgets().Lister().PodUnavailableBudgets(s.ns).Get(name)
	if err != nil || pub.Status.ObservedGeneration >= pub.Generation {
		return err
	}
	expected, app, err := s.selected(pub.Spec.Selector)
	if err != nil {
		return fmt.Errorf("stand-in: PUB %s/%s: %w", s.ns, name, err)
	}
	want, err := desired(pub.Spec.MinAvailable, pub.Spec.MaxUnavailable, expected)
	if err != nil {
		return fmt.Errorf("stand-in: PUB %s/%s: %w", s.ns, name, err)
	}
	allowed := max(0, expected-want)
	pub = pub.DeepCopy()
	pub.Status = kruisepolicy.PodUnavailableBudgetStatus{
		ObservedGeneration: pub.Generation,
		UnavailableAllowed: allowed,
		CurrentAvailable:   expected,
		DesiredAvailable:   want,
		TotalReplicas:      expected,
	}
	if _, err := s.kruise.PolicyV1alpha1().PodUnavailableBudgets(s.ns).UpdateStatus(ctx, pub, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("stand-in: write the status of PUB %s/%s: %w", s.ns, name, err)
	}
	s.mu.Lock()
	s.budgets[app] = allowance{kind: "PUB", name: name, allowed: allowed}
	s.mu.Unlock()
	s.prepared()
	return nil
}

// report checks that the run was what it claims (every budget had its
// status and every pod was Ready before the first victim went) and reports
// the victims: all of them, and those beyond their budgets' allowance.
func (s *standin) report(b *testing.B, wantBudgets int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, err := range s.errs {
		b.Error(err)
	}
	if len(s.budgets) != wantBudgets {
		b.Errorf("stand-in: wrote the status of %d budgets, want %d", len(s.budgets), wantBudgets)
	}
	if !s.firstVictim.IsZero() && s.lastPrepared.After(s.firstVictim) {
		b.Errorf("stand-in: a pod was marked Ready or a budget's status written %s after the first victim went; lengthen the workload's sleep before the measured pods",
			s.lastPrepared.Sub(s.firstVictim))
	}
	var total, overPDB, overPUB int
	for app, n := range s.victims {
		total += n
		a, ok := s.budgets[app]
		if !ok || int32(n) <= a.allowed {
			continue
		}
		over := n - int(a.allowed)
		if a.kind == "PUB" {
			overPUB += over
		} else {
			overPDB += over
		}
	}
	b.ReportMetric(float64(total), "victims")
	b.ReportMetric(float64(overPDB+overPUB), "overbudget-victims")
	b.ReportMetric(float64(overPDB), "overbudget-pdb-victims")
	b.ReportMetric(float64(overPUB), "overbudget-pub-victims")
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
