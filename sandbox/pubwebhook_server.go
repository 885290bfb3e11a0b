package sandbox

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	kruiseclientset "github.com/openkruise/kruise-api/client/clientset/versioned"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	kruisev1alpha1 "github.com/openkruise/kruise-api/policy/v1alpha1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclientset "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
)

// This file serves pubwebhook.go's decisions to kube-apiserver over HTTPS
// on a loopback port, and registers them as OpenKruise registers its pod
// webhooks (config/webhook in kruise): vpod.kb.io validates pod updates
// and deletes, vpodeviction.kb.io evictions, mpod.kb.io mutates pod
// creations. It reads pods, workloads and PUBs from the API server, not
// from informers, so that a decision never sees an older PUB than the
// status update it writes.

// Names of the webhooks and their configurations, as kruise ships them.
const (
	PUBValidatingWebhookConfiguration = "kruise-validating-webhook-configuration"
	PUBMutatingWebhookConfiguration   = "kruise-mutating-webhook-configuration"
	pubWebhookPod                     = "vpod.kb.io"
	pubWebhookEviction                = "vpodeviction.kb.io"
	pubWebhookMutatePod               = "mpod.kb.io"
)

const (
	pubWebhookValidatePath = "/validate-pod"
	pubWebhookMutatePath   = "/mutate-pod"
	// pubWebhookProbeAnnotation marks the dry-run pod and names the
	// dry-run eviction with which Start checks that kube-apiserver calls
	// the webhooks.
	pubWebhookProbeAnnotation = "sandbox.budgetguard.io/pub-webhook-probe"
	pubWebhookProbeName       = "sandbox-pub-webhook-probe"
	pubWebhookTimeout         = 30 * time.Second
)

// pubConflictRetry is kruise's ConflictRetry: four attempts 500ms apart.
var pubConflictRetry = wait.Backoff{Steps: 4, Duration: 500 * time.Millisecond, Factor: 1.0, Jitter: 0.1}

// pubWebhook is the running webhook server.
type pubWebhook struct {
	client kubernetes.Interface
	// kruise is for the conversion probe, which creates a PUB at
	// v1alpha1; pubs reads and writes PUBs at v1beta1.
	kruise kruiseclientset.Interface
	pubs   pubClient
	logger klog.Logger
	now    func() time.Time
	// checkUpdates is kruise's PodUnavailableBudgetUpdateGate, off by
	// default there and here: pod updates are admitted unchecked.
	checkUpdates bool

	server   *http.Server
	listener net.Listener
	caBundle []byte
	done     chan struct{}

	locks sync.Map // PUB namespace/name -> *sync.Mutex, kruise's per-PUB lock

	mutateProbed, validateProbed atomic.Bool
	// converted: kube-apiserver called the PUB conversion (pubconversion.go).
	converted atomic.Bool
}

// startPUBWebhook starts the webhook server on a loopback port with a new
// self-signed certificate, registers its configurations and waits until
// kube-apiserver calls both. Stop it with stop.
func startPUBWebhook(ctx context.Context, cfg *rest.Config, logger klog.Logger) (_ *pubWebhook, err error) {
	w := &pubWebhook{logger: logger, now: time.Now, done: make(chan struct{})}
	webhookCfg := rest.AddUserAgent(rest.CopyConfig(cfg), "sandbox-pub-webhook")
	if w.client, err = kubernetes.NewForConfig(webhookCfg); err != nil {
		return nil, fmt.Errorf("PUB webhook: create client: %w", err)
	}
	if w.kruise, err = kruiseclientset.NewForConfig(webhookCfg); err != nil {
		return nil, fmt.Errorf("PUB webhook: create kruise client: %w", err)
	}
	if w.pubs, err = newPUBClient(webhookCfg); err != nil {
		return nil, fmt.Errorf("PUB webhook: %w", err)
	}
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		return nil, fmt.Errorf("PUB webhook: generate serving certificate: %w", err)
	}
	// certPEM holds the serving certificate and the CA that signed it.
	w.caBundle = certPEM
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("PUB webhook: load serving certificate: %w", err)
	}
	if w.listener, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("PUB webhook: listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc(pubWebhookValidatePath, w.serve(w.validate))
	mux.HandleFunc(pubWebhookMutatePath, w.serve(w.mutate))
	mux.HandleFunc(pubConversionPath, func(rw http.ResponseWriter, r *http.Request) {
		w.converted.Store(true)
		servePUBConversion(rw, r)
	})
	w.server = &http.Server{
		Handler:           mux,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	go func() {
		defer close(w.done)
		if err := w.server.ServeTLS(w.listener, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error(err, "PodUnavailableBudget webhook server stopped")
		}
	}()
	defer func() {
		if err != nil {
			w.stop()
		}
	}()
	if err := w.register(ctx); err != nil {
		return nil, err
	}
	if err := w.waitCalled(ctx); err != nil {
		return nil, err
	}
	if err := w.convertPUBs(ctx, webhookCfg); err != nil {
		return nil, err
	}
	logger.V(1).Info("Serving a PodUnavailableBudget webhook, as OpenKruise's", "address", w.listener.Addr().String())
	return w, nil
}

// stop shuts the server down, waiting up to 5s for requests under way. It
// leaves the configurations registered: kube-apiserver goes next.
func (w *pubWebhook) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.server.Shutdown(ctx); err != nil {
		_ = w.server.Close()
	}
	<-w.done
}

// register creates the validating and the mutating configuration, as kruise
// ships them: failurePolicy Fail, v1 reviews only. sideEffects is
// NoneOnDryRun (kruise declares None, yet writes the PUB's status when not
// in dry-run).
func (w *pubWebhook) register(ctx context.Context) error {
	base := "https://" + w.listener.Addr().String()
	hook := func(name, path string, ops []admissionregistrationv1.OperationType, resource string) (admissionregistrationv1.WebhookClientConfig, []admissionregistrationv1.RuleWithOperations) {
		return admissionregistrationv1.WebhookClientConfig{URL: ptr.To(base + path), CABundle: w.caBundle},
			[]admissionregistrationv1.RuleWithOperations{{
				Operations: ops,
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{resource},
					Scope: ptr.To(admissionregistrationv1.NamespacedScope),
				},
			}}
	}
	validating := func(name string, ops []admissionregistrationv1.OperationType, resource string) admissionregistrationv1.ValidatingWebhook {
		cc, rules := hook(name, pubWebhookValidatePath, ops, resource)
		return admissionregistrationv1.ValidatingWebhook{
			Name: name, ClientConfig: cc, Rules: rules,
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNoneOnDryRun),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](30),
		}
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: PUBValidatingWebhookConfiguration},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			validating(pubWebhookPod, []admissionregistrationv1.OperationType{admissionregistrationv1.Update, admissionregistrationv1.Delete}, "pods"),
			validating(pubWebhookEviction, []admissionregistrationv1.OperationType{admissionregistrationv1.Create}, "pods/eviction"),
		},
	}
	cc, rules := hook(pubWebhookMutatePod, pubWebhookMutatePath, []admissionregistrationv1.OperationType{admissionregistrationv1.Create}, "pods")
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: PUBMutatingWebhookConfiguration},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: pubWebhookMutatePod, ClientConfig: cc, Rules: rules,
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](30),
			ReinvocationPolicy:      ptr.To(admissionregistrationv1.NeverReinvocationPolicy),
		}},
	}
	reg := w.client.AdmissionregistrationV1()
	if _, err := reg.ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("PUB webhook: create ValidatingWebhookConfiguration %s: %w", vwc.Name, err)
	}
	if _, err := reg.MutatingWebhookConfigurations().Create(ctx, mwc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("PUB webhook: create MutatingWebhookConfiguration %s: %w", mwc.Name, err)
	}
	return nil
}

// waitCalled sends a dry-run pod creation and a dry-run eviction of a pod
// that does not exist until kube-apiserver has called the mutating and the
// validating webhook with them (it picks new configurations up through an
// informer).
func (w *pubWebhook) waitCalled(ctx context.Context) error {
	pods := w.client.CoreV1().Pods(metav1.NamespaceDefault)
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: pubWebhookProbeName, Annotations: map[string]string{pubWebhookProbeAnnotation: "true"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "probe"}}},
	}
	dryRun := []string{metav1.DryRunAll}
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, pubWebhookTimeout, true, func(ctx context.Context) (bool, error) {
		if !w.mutateProbed.Load() {
			_, _ = pods.Create(ctx, probe, metav1.CreateOptions{DryRun: dryRun})
		}
		if !w.validateProbed.Load() {
			_ = pods.EvictV1(ctx, &policyv1.Eviction{
				ObjectMeta:    metav1.ObjectMeta{Name: pubWebhookProbeName, Namespace: metav1.NamespaceDefault},
				DeleteOptions: &metav1.DeleteOptions{DryRun: dryRun},
			})
		}
		return w.mutateProbed.Load() && w.validateProbed.Load(), nil
	})
	if err != nil {
		return fmt.Errorf("PUB webhook: kube-apiserver did not call it within %s (mutating called: %t, validating called: %t): %w",
			pubWebhookTimeout, w.mutateProbed.Load(), w.validateProbed.Load(), err)
	}
	return nil
}

// convertPUBs makes kube-apiserver convert PodUnavailableBudgets between
// v1alpha1 and v1beta1 through this server, as OpenKruise's conversion
// webhook does (pubconversion.go), and waits until it does: a dry-run
// create at v1alpha1 is converted to the stored v1beta1.
func (w *pubWebhook) convertPUBs(ctx context.Context, cfg *rest.Config) error {
	ext, err := apiextensionsclientset.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("PUB conversion: create client: %w", err)
	}
	crds := ext.ApiextensionsV1().CustomResourceDefinitions()
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd, err := crds.Get(ctx, PUBCRDName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
			Strategy: apiextensionsv1.WebhookConverter,
			Webhook: &apiextensionsv1.WebhookConversion{
				ClientConfig: &apiextensionsv1.WebhookClientConfig{
					URL:      ptr.To("https://" + w.listener.Addr().String() + pubConversionPath),
					CABundle: w.caBundle,
				},
				ConversionReviewVersions: []string{"v1"},
			},
		}
		_, err = crds.Update(ctx, crd, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("PUB conversion: register it on CRD %s: %w", PUBCRDName, err)
	}
	probe := &kruisev1alpha1.PodUnavailableBudget{
		ObjectMeta: metav1.ObjectMeta{Name: pubWebhookProbeName, Namespace: metav1.NamespaceDefault},
		Spec: kruisev1alpha1.PodUnavailableBudgetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{pubWebhookProbeAnnotation: "true"}},
			MaxUnavailable: ptr.To(intstr.FromInt32(1)),
		},
	}
	pubs := w.kruise.PolicyV1alpha1().PodUnavailableBudgets(metav1.NamespaceDefault)
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, pubWebhookTimeout, true, func(ctx context.Context) (bool, error) {
		_, _ = pubs.Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return w.converted.Load(), nil
	})
	if err != nil {
		return fmt.Errorf("PUB conversion: kube-apiserver did not call it within %s: %w", pubWebhookTimeout, err)
	}
	return nil
}

// serve decodes an AdmissionReview, answers it with decide's response and
// the request's UID.
func (w *pubWebhook) serve(decide func(context.Context, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse) http.HandlerFunc {
	return func(rw http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(io.LimitReader(r.Body, 8<<20)).Decode(&review); err != nil || review.Request == nil {
			http.Error(rw, "want an admission.k8s.io/v1 AdmissionReview with a request", http.StatusBadRequest)
			return
		}
		resp := decide(r.Context(), review.Request)
		resp.UID = review.Request.UID
		review.Request = nil
		review.Response = resp
		rw.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(rw).Encode(&review); err != nil {
			w.logger.Error(err, "PUB webhook: write admission response")
		}
	}
}

// admitResponse, denyResponse and errorResponse build responses as controller-runtime's
// admission.Allowed, ValidationResponse(false, reason) and Errored(400, err)
// do; kube-apiserver wraps a denial's message as
// `admission webhook "<name>" denied the request: <message>`.
func admitResponse() *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Allowed: true, Result: &metav1.Status{Code: http.StatusOK}}
}

func denyResponse(reason string) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Result: &metav1.Status{Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: reason}}
}

func errorResponse(err error) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Result: &metav1.Status{Code: http.StatusBadRequest, Message: err.Error()}}
}
