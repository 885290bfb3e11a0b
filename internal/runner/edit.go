package runner

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/budgetguard/budgetguard/internal/scenario"
)

// editor deletes or patches one object of a kind that delete and patch
// steps may name.
type editor struct {
	del   func(ctx context.Context, name string, opts metav1.DeleteOptions) error
	patch func(ctx context.Context, name string, data []byte) error
}

// deletePatcher is the part of a typed client's interface for one kind
// that delete and patch steps use.
type deletePatcher[T any] interface {
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
}

func editorOf[T any](x deletePatcher[T]) editor {
	return editor{del: x.Delete, patch: func(ctx context.Context, name string, data []byte) error {
		_, err := x.Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{})
		return err
	}}
}

// editorFor returns the editor of kind in namespace.
func (r *run) editorFor(kind, namespace string) (editor, error) {
	c := r.client
	switch kind {
	case "Node":
		return editorOf(c.CoreV1().Nodes()), nil
	case "PriorityClass":
		return editorOf(c.SchedulingV1().PriorityClasses()), nil
	case "Deployment":
		return editorOf(c.AppsV1().Deployments(namespace)), nil
	case "ReplicaSet":
		return editorOf(c.AppsV1().ReplicaSets(namespace)), nil
	case "StatefulSet":
		return editorOf(c.AppsV1().StatefulSets(namespace)), nil
	case "Pod":
		return editorOf(c.CoreV1().Pods(namespace)), nil
	case "PodDisruptionBudget":
		return editorOf(c.PolicyV1().PodDisruptionBudgets(namespace)), nil
	case "PodUnavailableBudget":
		if r.pubBeta == nil {
			return editorOf(r.kruise.PolicyV1alpha1().PodUnavailableBudgets(namespace)), nil
		}
		// At v1beta1, the stored version: a patch through v1alpha1 would
		// drop the fields only v1beta1 has. A merge patch of the fields
		// both versions share reads the same in either.
		return restEditor(r.pubBeta, "podunavailablebudgets", namespace), nil
	}
	return editor{}, fmt.Errorf("kind %q cannot be deleted or patched", kind)
}

// restEditor edits objects of resource in namespace through a REST client
// of their group and version.
func restEditor(c rest.Interface, resource, namespace string) editor {
	return editor{
		del: func(ctx context.Context, name string, opts metav1.DeleteOptions) error {
			return c.Delete().Namespace(namespace).Resource(resource).Name(name).Body(&opts).Do(ctx).Error()
		},
		patch: func(ctx context.Context, name string, data []byte) error {
			return c.Patch(types.MergePatchType).Namespace(namespace).Resource(resource).Name(name).Body(data).Do(ctx).Error()
		},
	}
}

// deleteObject carries out a delete step.
func (r *run) deleteObject(ctx context.Context, s *scenario.DeleteStep) (string, error) {
	e, err := r.editorFor(s.Kind, s.Namespace)
	if err != nil {
		return "", err
	}
	if err := e.del(ctx, s.Name, metav1.DeleteOptions{}); err != nil {
		return "", fmt.Errorf("delete %s: %w", objectName(s.Kind, s.Namespace, s.Name), err)
	}
	return "deleted", nil
}

// patchObject carries out a patch step.
func (r *run) patchObject(ctx context.Context, s *scenario.PatchStep) (string, error) {
	e, err := r.editorFor(s.Kind, s.Namespace)
	if err != nil {
		return "", err
	}
	if err := e.patch(ctx, s.Name, s.Patch); err != nil {
		return "", fmt.Errorf("patch %s: %w", objectName(s.Kind, s.Namespace, s.Name), err)
	}
	return "patched", nil
}

func objectName(kind, namespace, name string) string {
	if namespace == "" {
		return kind + " " + name
	}
	return kind + " " + namespace + "/" + name
}

// staysPending watches a pod for s.For. It fails only when the pod does not
// exist or cannot be read; a pod that gets bound ends the step early, and
// the outcome says so.
func (r *run) staysPending(ctx context.Context, s *scenario.StaysPendingStep) (string, error) {
	began := time.Now()
	deadline := began.Add(s.For)
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	for {
		p, err := r.client.CoreV1().Pods(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return "", fmt.Errorf("pod %s/%s does not exist", s.Namespace, s.Name)
		}
		if err != nil {
			return "", fmt.Errorf("get pod %s/%s: %w", s.Namespace, s.Name, err)
		}
		if p.Spec.NodeName != "" {
			return fmt.Sprintf("bound to %s after %.1fs", p.Spec.NodeName, time.Since(began).Seconds()), nil
		}
		if !time.Now().Before(deadline) {
			return fmt.Sprintf("stayed Pending for %s", s.For), nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-ticker.C:
		}
	}
}
