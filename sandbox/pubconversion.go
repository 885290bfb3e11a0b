package sandbox

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	kruisev1alpha1 "github.com/openkruise/kruise-api/policy/v1alpha1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	kruisebeta "github.com/budgetguard/budgetguard/apis/kruise/policy/v1beta1"
)

// The conversion of the PodUnavailableBudget CRD between
// policy.kruise.io/v1alpha1 and v1beta1, as OpenKruise's conversion webhook
// does it (apis/policy/v1alpha1/podunavailablebudget_conversion.go in
// openkruise/kruise, through apis/kruise/policy/v1beta1): the v1alpha1
// annotations kruise.io/pub-protect-operations and
// pub.kruise.io/protect-total-replicas become the v1beta1 spec fields and
// back; spec.ignoredPodSelector, which v1alpha1 cannot hold, is not in a
// v1alpha1 read, as in a cluster with OpenKruise. (A v1alpha1 update, of the
// spec or the status, was seen to keep it in the stored object: kube-apiserver
// 1.36, TestPUBv1beta1IsPreferred.)

// pubConversionPath is where the webhook server answers ConversionReviews.
const pubConversionPath = "/convert-podunavailablebudget"

// servePUBConversion answers a ConversionReview of PodUnavailableBudgets.
func servePUBConversion(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var review apiextensionsv1.ConversionReview
	if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
		http.Error(w, fmt.Sprintf("not a ConversionReview with a request: %v", err), http.StatusBadRequest)
		return
	}
	review.Response = convertPUBs(review.Request)
	review.Request = nil
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&review)
}

// convertPUBs converts every object of req to req.DesiredAPIVersion.
func convertPUBs(req *apiextensionsv1.ConversionRequest) *apiextensionsv1.ConversionResponse {
	resp := &apiextensionsv1.ConversionResponse{UID: req.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
	for i, in := range req.Objects {
		out, err := convertPUB(in.Raw, req.DesiredAPIVersion)
		if err != nil {
			resp.ConvertedObjects = nil
			resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: fmt.Sprintf("object %d: %v", i, err)}
			return resp
		}
		resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: out})
	}
	return resp
}

// convertPUB converts one PodUnavailableBudget, given as JSON, to the
// apiVersion want.
func convertPUB(raw []byte, want string) ([]byte, error) {
	var meta metav1.TypeMeta
	if err := json.Unmarshal(raw, &meta); err != nil {
		return nil, err
	}
	if meta.Kind != "PodUnavailableBudget" {
		return nil, fmt.Errorf("kind %q is not PodUnavailableBudget", meta.Kind)
	}
	var beta *kruisebeta.PodUnavailableBudget
	switch meta.APIVersion {
	case kruisebeta.GroupVersion.String():
		beta = &kruisebeta.PodUnavailableBudget{}
		if err := json.Unmarshal(raw, beta); err != nil {
			return nil, err
		}
	case kruisev1alpha1.GroupVersion.String():
		alpha := &kruisev1alpha1.PodUnavailableBudget{}
		if err := json.Unmarshal(raw, alpha); err != nil {
			return nil, err
		}
		var err error
		// OpenKruise's conversion fails on an annotation that does not
		// parse; so does this one.
		if beta, err = kruisebeta.FromV1alpha1(alpha); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("apiVersion %q is not served", meta.APIVersion)
	}
	switch want {
	case kruisebeta.GroupVersion.String():
		return json.Marshal(beta)
	case kruisev1alpha1.GroupVersion.String():
		return json.Marshal(kruisebeta.ToV1alpha1(beta))
	}
	return nil, fmt.Errorf("cannot convert to apiVersion %q", want)
}
