package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	kruisebeta "github.com/budgetguard/budgetguard/apis/kruise/policy/v1beta1"
)

// This file holds the webhook's two handlers: what kruise's pod webhooks do
// with an AdmissionRequest before and after the decisions of pubwebhook.go.

// validate is kruise's validating pod handler for PUBs
// (podUnavailableBudgetValidatingPod): it picks the pod and the operation a
// request disrupts and decides it under the pod's related PUB.
func (w *pubWebhook) validate(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	var pod *corev1.Pod
	var op kruisebeta.PubOperation
	var dryRun bool
	switch req.Operation {
	case admissionv1.Update:
		if !w.checkUpdates || req.SubResource != "" {
			return admitResponse()
		}
		var newPod, oldPod corev1.Pod
		if err := json.Unmarshal(req.Object.Raw, &newPod); err != nil {
			return errorResponse(err)
		}
		if relatedPUBName(&newPod) == "" {
			return admitResponse()
		}
		if err := json.Unmarshal(req.OldObject.Raw, &oldPod); err != nil {
			return errorResponse(err)
		}
		if !pubUpdateMayDisrupt(&oldPod, &newPod) {
			return admitResponse()
		}
		var opts metav1.UpdateOptions
		if err := decodeOptions(req.Options.Raw, &opts); err != nil {
			return errorResponse(err)
		}
		pod, op, dryRun = &oldPod, kruisebeta.PubUpdateOperation, len(opts.DryRun) > 0
	case admissionv1.Delete:
		// Kruise admits a delete without the old object (Kubernetes
		// before 1.16) and deletes of subresources.
		if req.SubResource != "" || len(req.OldObject.Raw) == 0 {
			return admitResponse()
		}
		pod = &corev1.Pod{}
		if err := json.Unmarshal(req.OldObject.Raw, pod); err != nil {
			return errorResponse(err)
		}
		var opts metav1.DeleteOptions
		if err := decodeOptions(req.Options.Raw, &opts); err != nil {
			return errorResponse(err)
		}
		op, dryRun = kruisebeta.PubDeleteOperation, len(opts.DryRun) > 0
	case admissionv1.Create:
		if req.SubResource != "eviction" {
			return admitResponse()
		}
		if req.Name == pubWebhookProbeName && req.Namespace == metav1.NamespaceDefault {
			w.validateProbed.Store(true)
			return admitResponse()
		}
		// policy/v1 and v1beta1 Evictions share deleteOptions.
		var ev struct {
			DeleteOptions *metav1.DeleteOptions `json:"deleteOptions"`
		}
		if err := json.Unmarshal(req.Object.Raw, &ev); err != nil {
			return errorResponse(err)
		}
		dryRun = ev.DeleteOptions != nil && len(ev.DeleteOptions.DryRun) > 0
		var err error
		pod, err = w.client.CoreV1().Pods(req.Namespace).Get(ctx, req.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			// Kruise answers an error here (its cache has no such pod);
			// the sandbox lets kube-apiserver answer 404.
			return admitResponse()
		}
		if err != nil {
			return errorResponse(err)
		}
		op = kruisebeta.PubEvictOperation
	default:
		return admitResponse()
	}
	if relatedPUBName(pod) == "" {
		return admitResponse()
	}
	ok, reason, err := w.validatePod(ctx, pod, op, dryRun)
	switch {
	case err != nil:
		return errorResponse(err)
	case !ok:
		return denyResponse(reason)
	}
	return admitResponse()
}

// decodeOptions decodes a request's options; kube-apiserver leaves them
// empty in some requests.
func decodeOptions(raw []byte, into any) error {
	if len(raw) == 0 {
		return nil
	}
	return json.Unmarshal(raw, into)
}

// validatePod is kruise's PodUnavailableBudgetValidatePod: it admits pod
// when it is exempt or its PUB lets op go free; otherwise, holding the
// PUB's lock, it records the disruption in the PUB's status with the PUB's
// resourceVersion (not in dry-run), re-reading and deciding again on a
// conflict, and refuses when the PUB allows nothing. An error of the
// status update refuses too, with the error's message, as kruise does.
func (w *pubWebhook) validatePod(ctx context.Context, pod *corev1.Pod, op kruisebeta.PubOperation, dryRun bool) (bool, string, error) {
	if pubPodExempt(pod) {
		return true, "", nil
	}
	name := relatedPUBName(pod)
	pub, err := w.pubs.Get(ctx, pod.Namespace, name)
	if apierrors.IsNotFound(err) {
		return true, "", nil
	}
	if err != nil {
		return false, "", err
	}
	if free, err := pubAdmitsFree(pub, pod, op); err != nil || free {
		return free, "", err
	}
	mu := w.lock(pod.Namespace + "/" + name)
	refresh := false
	err = retry.RetryOnConflict(pubConflictRetry, func() error {
		mu.Lock()
		defer mu.Unlock()
		if refresh {
			cur, err := w.pubs.Get(ctx, pod.Namespace, name)
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return err
			}
			pub = cur
		}
		want, err := pubSpend(pub, pod.Name, op, w.now())
		if err != nil || dryRun {
			return err
		}
		err = w.pubs.UpdateStatus(ctx, want)
		if apierrors.IsNotFound(err) {
			return nil
		}
		refresh = true
		return err
	})
	if err != nil {
		w.logger.V(2).Info("PUB webhook refused a pod operation", "pod", klog.KObj(pod), "operation", op, "podUnavailableBudget", klog.KObj(pub), "reason", err.Error())
		return false, err.Error(), nil
	}
	w.logger.V(4).Info("PUB webhook admitted a pod operation", "pod", klog.KObj(pod), "operation", op, "podUnavailableBudget", klog.KObj(pub), "dryRun", dryRun)
	return true, "", nil
}

// lock returns the mutex of the PUB key.
func (w *pubWebhook) lock(key string) *sync.Mutex {
	mu, _ := w.locks.LoadOrStore(key, &sync.Mutex{})
	return mu.(*sync.Mutex)
}

// mutate is kruise's pubMutatingPod: on a pod's creation it ties the pod to
// the PUB that covers it (pubForNewPod) with the related-pub annotations.
// Like kruise, it admits the pod unchanged when it cannot tell.
func (w *pubWebhook) mutate(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.Operation != admissionv1.Create || req.SubResource != "" || req.Resource.Resource != "pods" {
		return admitResponse()
	}
	var pod corev1.Pod
	if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
		return errorResponse(err)
	}
	if pod.Annotations[pubWebhookProbeAnnotation] != "" {
		w.mutateProbed.Store(true)
		return admitResponse()
	}
	namespace := req.Namespace
	list, err := w.pubs.List(ctx, namespace, metav1.ListOptions{})
	if err != nil {
		w.logger.Error(err, "PUB webhook: list PodUnavailableBudgets for a new pod", "namespace", namespace)
		return admitResponse()
	}
	if len(list.Items) == 0 {
		return admitResponse()
	}
	pubs := make([]*kruisebeta.PodUnavailableBudget, len(list.Items))
	for i := range list.Items {
		pubs[i] = &list.Items[i]
	}
	pub := pubForNewPod(&pod, w.workloadOf(ctx, namespace, &pod), pubs)
	if pub == nil {
		return admitResponse()
	}
	patch, err := json.Marshal([]map[string]any{{
		"op": "add", "path": "/metadata/annotations", "value": withRelatedPUB(pod.Annotations, pub.Name),
	}})
	if err != nil {
		return errorResponse(err)
	}
	resp := admitResponse()
	resp.Patch = patch
	resp.PatchType = ptr.To(admissionv1.PatchTypeJSONPatch)
	return resp
}

// workloadOf is what kruise's controller finder makes of a pod's controller
// (GetScaleAndSelectorForRef without UID): a ReplicationController,
// Deployment or StatefulSet that exists, a ReplicaSet that exists or, when
// a Deployment controls it, that Deployment; nil when the workload is not
// found or the pod has no controller. Other kinds are taken as named (kruise
// also looks for its own workloads and for scale subresources).
func (w *pubWebhook) workloadOf(ctx context.Context, namespace string, pod *corev1.Pod) *pubWorkloadRef {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return nil
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return nil
	}
	named := &pubWorkloadRef{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name}
	var getErr error
	switch (schema.GroupKind{Group: gv.Group, Kind: ref.Kind}) {
	case pubKindRC:
		_, getErr = w.client.CoreV1().ReplicationControllers(namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	case pubKindDeployment:
		_, getErr = w.client.AppsV1().Deployments(namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	case pubKindStatefulSet:
		_, getErr = w.client.AppsV1().StatefulSets(namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	case pubKindReplicaSet:
		rs, err := w.client.AppsV1().ReplicaSets(namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			getErr = err
			break
		}
		if owner := metav1.GetControllerOf(rs); owner != nil && owner.Kind == pubKindDeployment.Kind {
			if _, err := w.client.AppsV1().Deployments(namespace).Get(ctx, owner.Name, metav1.GetOptions{}); err != nil {
				return nil
			}
			return &pubWorkloadRef{APIVersion: owner.APIVersion, Kind: owner.Kind, Name: owner.Name}
		}
	}
	if getErr != nil {
		if !apierrors.IsNotFound(getErr) {
			w.logger.Error(getErr, "PUB webhook: find the workload of a new pod", "pod", klog.KRef(namespace, pod.Name), "controller", fmt.Sprintf("%s/%s", ref.Kind, ref.Name))
		}
		return nil
	}
	return named
}
