// Package admission is the hub's validating admission webhook for
// ResourceInterpreterCustomizations (config.flotilla.io).
//
// Flotilla validates its API in the apiserver (OpenAPI schemas and CRD CEL
// rules, docs/api.md) and needs no webhook for it. A customization is the
// exception: its rules are CEL programs held in strings, and CRD validation
// can check a string's length or pattern but cannot compile the program in
// it or estimate its cost. So the hub compiles them here, on CREATE and
// UPDATE, and refuses a customization whose rules do not compile or may
// cost more than the budget, naming each field (docs/interpreter.md).
//
// Every hub replica serves the webhook, leader or not, with the serving
// certificate the CertController keeps in one Secret (or files from
// --webhook-cert-dir).
//
// The caller is not authenticated (any pod that reaches the port can send
// a review; manifests/hub's NetworkPolicy narrows who can): what a review
// makes the hub keep or answer is bounded (bounds.go), and a verdict is
// cached by the spec's content.
package admission

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"

	configv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/config/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/statuslimits"
)

// ValidatePath is where the hub serves the validation of
// ResourceInterpreterCustomizations (Karmada's webhook uses the same path).
const ValidatePath = "/validate-resourceinterpretercustomization"

// MaxRequestBytes bounds an AdmissionReview's body. The apiserver accepts
// objects up to 3 MiB and an UPDATE's review carries the object twice
// (object and oldObject) plus the request's metadata; controller-runtime's
// webhooks use the same bound.
const MaxRequestBytes = 7 << 20

// ValidateFunc validates a customization; its errors name the fields
// (customization.Validate). It must be a pure function of the spec: its
// verdict is cached by the spec's content.
type ValidateFunc func(*configv1alpha1.ResourceInterpreterCustomization) field.ErrorList

var customizationKind = configv1alpha1.SchemeGroupVersion.WithKind("ResourceInterpreterCustomization").GroupKind()

// Handler serves admission/v1 AdmissionReviews for
// ResourceInterpreterCustomizations.
type Handler struct {
	validate ValidateFunc
	metrics  *Metrics
	verdicts *verdicts
	// inFlight holds a token per review being read or decided.
	inFlight chan struct{}
}

// NewHandler returns a handler calling validate; metrics may be nil.
func NewHandler(validate ValidateFunc, metrics *Metrics) *Handler {
	return &Handler{validate: validate, metrics: metrics, verdicts: newVerdicts(),
		inFlight: make(chan struct{}, maxConcurrentReviews)}
}

// ServeHTTP answers one AdmissionReview. A body that is not one is an HTTP
// error (the apiserver applies the webhook's failurePolicy); a review is
// always answered with a review.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "only POST", http.StatusMethodNotAllowed)
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		http.Error(w, "Content-Type must be application/json", http.StatusUnsupportedMediaType)
		return
	}
	select {
	case h.inFlight <- struct{}{}:
		defer func() { <-h.inFlight }()
	case <-r.Context().Done():
		http.Error(w, "too many admission reviews in flight", http.StatusServiceUnavailable)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRequestBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			http.Error(w, fmt.Sprintf("request body larger than %d bytes", MaxRequestBytes), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, statuslimits.Truncate("reading the request body: "+err.Error(), maxMessage), http.StatusBadRequest)
		return
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil {
		http.Error(w, statuslimits.Truncate("decoding the AdmissionReview: "+err.Error(), maxMessage), http.StatusBadRequest)
		return
	}
	if review.Request == nil {
		http.Error(w, "the AdmissionReview has no request", http.StatusBadRequest)
		return
	}
	if len(review.Request.UID) > maxUID {
		http.Error(w, fmt.Sprintf("the AdmissionReview's uid is longer than %d bytes", maxUID), http.StatusBadRequest)
		return
	}
	resp := h.Review(review.Request)
	h.metrics.observe(review.Request, resp)
	out, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
		Response: resp,
	})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

// Review decides one admission request: CREATE and UPDATE of a
// customization are validated; anything else is allowed (the webhook is
// registered for nothing else, and must never stand in a tenant's way if
// it were).
func (h *Handler) Review(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	if req.Kind.Group != customizationKind.Group || req.Kind.Kind != customizationKind.Kind {
		kind := statuslimits.Truncate(req.Kind.String(), maxLogged)
		klog.InfoS("Admission request for a kind this webhook does not validate: allowed (check the ValidatingWebhookConfiguration's rules)",
			"kind", kind, "name", statuslimits.Truncate(req.Name, maxLogged))
		resp.Warnings = []string{fmt.Sprintf("the Flotilla hub's webhook validates only %s, not %s", customizationKind, kind)}
		return resp
	}
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return resp
	}
	ric := &configv1alpha1.ResourceInterpreterCustomization{}
	if err := json.Unmarshal(req.Object.Raw, ric); err != nil {
		resp.Allowed = false
		resp.Result = &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusBadRequest, Reason: metav1.StatusReasonBadRequest,
			Message: statuslimits.Truncate("decoding the ResourceInterpreterCustomization: "+err.Error(), maxMessage)}
		return resp
	}
	errs := h.verdicts.verdict(ric, h.validate)
	if len(errs) == 0 {
		return resp
	}
	// The apiserver's own answer to an invalid object: 422 Invalid, one
	// cause per field, and the message kubectl prints after "denied the
	// request: ".
	status := apierrors.NewInvalid(customizationKind, statuslimits.Truncate(ric.Name, maxLogged), errs).ErrStatus
	boundStatus(&status)
	resp.Allowed = false
	resp.Result = &status
	return resp
}
