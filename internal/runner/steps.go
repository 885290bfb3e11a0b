package runner

import (
	"context"
	"errors"
	"fmt"
	kruisebeta "github.com/budgetguard/budgetguard/apis/kruise/policy/v1beta1"
	"strings"
	"time"

	kruisepolicy "github.com/openkruise/kruise-api/policy/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/budgetguard/budgetguard/internal/scenario"
)

// pollInterval is how often a wait step checks its condition.
const pollInterval = 200 * time.Millisecond

// describeStep names a step the way progress lines and errors show it.
func describeStep(s scenario.Step) string {
	switch {
	case s.Apply != nil:
		return "apply " + s.Apply.Phase
	case s.Wait != nil:
		w := s.Wait
		switch {
		case w.PodsReady != nil:
			return fmt.Sprintf("wait podsReady %s %s >=%d", w.PodsReady.Namespace, w.PodsReady.Selector, w.PodsReady.Count)
		case w.PodScheduled != nil:
			return fmt.Sprintf("wait podScheduled %s/%s", w.PodScheduled.Namespace, w.PodScheduled.Name)
		case w.BudgetsObserved:
			return "wait budgetsObserved"
		}
		return "wait"
	case s.SetReadiness != nil:
		r := s.SetReadiness
		return fmt.Sprintf("setReadiness %s %s %s", r.Namespace, r.Selector, r.Readiness)
	case s.Deschedule != nil:
		return "deschedule"
	case s.Settle != nil:
		return "settle " + s.Settle.Duration.String()
	case s.Delete != nil:
		return "delete " + objectName(s.Delete.Kind, s.Delete.Namespace, s.Delete.Name)
	case s.Patch != nil:
		return "patch " + objectName(s.Patch.Kind, s.Patch.Namespace, s.Patch.Name)
	case s.StaysPending != nil:
		return fmt.Sprintf("staysPending %s/%s %s", s.StaysPending.Namespace, s.StaysPending.Name, s.StaysPending.For)
	}
	return "empty step"
}

// apply creates every object of phase, in document order, with the runner's
// clients. Each run creates its own copies, so a scenario can run again.
func (r *run) apply(ctx context.Context, phase string) (string, error) {
	objects := r.sc.ObjectsInPhase(phase)
	if len(objects) == 0 {
		return "", fmt.Errorf("no objects in phase %q", phase)
	}
	for _, o := range objects {
		if err := r.create(ctx, o.Object.DeepCopyObject()); err != nil {
			return "", fmt.Errorf("%s: %w", o.Describe(), err)
		}
	}
	return plural(len(objects), "object"), nil
}

// create creates obj, one of the kinds a scenario may hold. A namespaced
// object without a namespace goes to "default", as kubectl would put it.
func (r *run) create(ctx context.Context, obj runtime.Object) error {
	create := metav1.CreateOptions{}
	var err error
	switch o := obj.(type) {
	case *corev1.Namespace:
		_, err = r.client.CoreV1().Namespaces().Create(ctx, o, create)
	case *corev1.Node:
		_, err = r.client.CoreV1().Nodes().Create(ctx, o, create)
	case *schedulingv1.PriorityClass:
		_, err = r.client.SchedulingV1().PriorityClasses().Create(ctx, o, create)
	case *appsv1.Deployment:
		_, err = r.client.AppsV1().Deployments(namespaceOf(o)).Create(ctx, o, create)
	case *appsv1.ReplicaSet:
		_, err = r.client.AppsV1().ReplicaSets(namespaceOf(o)).Create(ctx, o, create)
	case *appsv1.StatefulSet:
		_, err = r.client.AppsV1().StatefulSets(namespaceOf(o)).Create(ctx, o, create)
	case *corev1.Pod:
		err = r.createPod(ctx, o, create)
	case *policyv1.PodDisruptionBudget:
		_, err = r.client.PolicyV1().PodDisruptionBudgets(namespaceOf(o)).Create(ctx, o, create)
	case *kruisepolicy.PodUnavailableBudget:
		_, err = r.kruise.PolicyV1alpha1().PodUnavailableBudgets(namespaceOf(o)).Create(ctx, o, create)
	case *kruisebeta.PodUnavailableBudget:
		err = r.pubBeta.Post().Namespace(namespaceOf(o)).Resource("podunavailablebudgets").Body(o).Do(ctx).Error()
	default:
		return fmt.Errorf("cannot create a %T", obj)
	}
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	return nil
}

// priorityClassWait bounds how long createPod retries a pod that names a
// PriorityClass the API server's admission does not know yet.
const priorityClassWait = 30 * time.Second

// createPod creates a pod. The Priority admission plugin looks PriorityClasses
// up in an informer, so a pod created right after its class (the same phase
// may hold both) can be refused with "no PriorityClass with name ... was
// found" until that informer has the class; such a refusal is retried every
// pollInterval for up to priorityClassWait, and any other error is returned
// as it is.
func (r *run) createPod(ctx context.Context, pod *corev1.Pod, opts metav1.CreateOptions) error {
	deadline := time.Now().Add(priorityClassWait)
	for {
		_, err := r.client.CoreV1().Pods(namespaceOf(pod)).Create(ctx, pod, opts)
		if err == nil || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "no PriorityClass with name") || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (waiting for admission to know the pod's PriorityClass: %v)", err, ctx.Err())
		case <-time.After(pollInterval):
		}
	}
}

// namespaceOf sets an empty namespace to "default" and returns it.
func namespaceOf(o metav1.Object) string {
	if o.GetNamespace() == "" {
		o.SetNamespace(metav1.NamespaceDefault)
	}
	return o.GetNamespace()
}

// errTimedOut marks a wait that timed out.
var errTimedOut = errors.New("timed out")

// wait polls the step's condition every pollInterval until it holds. On a
// timeout it returns an error wrapping errTimedOut with what it saw last.
func (r *run) wait(ctx context.Context, w *scenario.WaitStep) (string, error) {
	timeout := w.Timeout
	if timeout <= 0 {
		timeout = scenario.DefaultWaitTimeout
	}
	var check func(context.Context) (bool, string, error)
	switch {
	case w.PodsReady != nil:
		check = r.podsReady(w.PodsReady)
	case w.PodScheduled != nil:
		check = r.podScheduled(w.PodScheduled)
	case w.BudgetsObserved:
		check = r.budgetsObserved
	default:
		return "", errors.New("a wait step without a condition")
	}
	deadline := time.Now().Add(timeout)
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	var last string
	for {
		ok, seen, err := check(ctx)
		switch {
		case err != nil:
			// An API error may pass; keep polling, and report it if the
			// wait times out.
			last = err.Error()
		case ok:
			return seen, nil
		default:
			last = seen
		}
		if !time.Now().Before(deadline) {
			return "", fmt.Errorf("%w after %s: %s", errTimedOut, timeout, last)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-ticker.C:
		}
	}
}

// podsReady holds when at least c.Count pods in c.Namespace matching
// c.Selector are Ready and not terminating.
func (r *run) podsReady(c *scenario.PodsReadyCondition) func(context.Context) (bool, string, error) {
	return func(ctx context.Context) (bool, string, error) {
		pods, err := r.client.CoreV1().Pods(c.Namespace).List(ctx, metav1.ListOptions{LabelSelector: c.Selector})
		if err != nil {
			return false, "", fmt.Errorf("list pods %s %s: %w", c.Namespace, c.Selector, err)
		}
		ready := 0
		for i := range pods.Items {
			if podReady(&pods.Items[i]) {
				ready++
			}
		}
		return ready >= c.Count, fmt.Sprintf("%d of %d pods Ready", ready, len(pods.Items)), nil
	}
}

// podReady: Ready and not terminating.
func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podScheduled holds when the pod is bound to a node.
func (r *run) podScheduled(c *scenario.PodScheduledCondition) func(context.Context) (bool, string, error) {
	return func(ctx context.Context) (bool, string, error) {
		p, err := r.client.CoreV1().Pods(c.Namespace).Get(ctx, c.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, fmt.Sprintf("pod %s/%s does not exist", c.Namespace, c.Name), nil
		}
		if err != nil {
			return false, "", fmt.Errorf("get pod %s/%s: %w", c.Namespace, c.Name, err)
		}
		if p.Spec.NodeName == "" {
			msg := fmt.Sprintf("pod %s/%s is not bound", c.Namespace, c.Name)
			if p.Status.NominatedNodeName != "" {
				msg += ", nominated to " + p.Status.NominatedNodeName
			}
			return false, msg, nil
		}
		return true, "bound to " + p.Spec.NodeName, nil
	}
}

// budgetsObserved holds when every PDB's status has observed its generation
// and, when PodUnavailableBudgets are served, every PUB's status too.
func (r *run) budgetsObserved(ctx context.Context) (bool, string, error) {
	pdbs, err := r.client.PolicyV1().PodDisruptionBudgets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, "", fmt.Errorf("list PodDisruptionBudgets: %w", err)
	}
	var behind []string
	for _, p := range pdbs.Items {
		if p.Status.ObservedGeneration < p.Generation {
			behind = append(behind, "pdb "+p.Namespace+"/"+p.Name)
		}
	}
	total := len(pdbs.Items)
	pubs, err := r.kruise.PolicyV1alpha1().PodUnavailableBudgets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsNotFound(err):
		// PUBs are not served.
	case err != nil:
		return false, "", fmt.Errorf("list PodUnavailableBudgets: %w", err)
	default:
		total += len(pubs.Items)
		for _, p := range pubs.Items {
			if p.Status.ObservedGeneration < p.Generation {
				behind = append(behind, "pub "+p.Namespace+"/"+p.Name)
			}
		}
	}
	if len(behind) > 0 {
		return false, "status not observed yet: " + strings.Join(behind, ", "), nil
	}
	return true, plural(total, "budget"), nil
}

// setReadiness sets the readiness annotation on the live pods that match.
func (r *run) setReadiness(ctx context.Context, s *scenario.SetReadinessStep) (string, error) {
	pods, err := r.client.CoreV1().Pods(s.Namespace).List(ctx, metav1.ListOptions{LabelSelector: s.Selector})
	if err != nil {
		return "", fmt.Errorf("list pods %s %s: %w", s.Namespace, s.Selector, err)
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, scenario.ReadinessAnnotation, s.Readiness)
	n := 0
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		_, err := r.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("annotate pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		n++
	}
	if n == 0 {
		return "", fmt.Errorf("no live pods in namespace %q match %q", s.Namespace, s.Selector)
	}
	return plural(n, "pod"), nil
}

// settle sleeps for d, or until ctx ends.
func settle(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// plural returns "1 pod", "2 pods".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
