package admission

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	configv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/config/v1alpha1"
)

var healthPath = field.NewPath("spec", "customizations", "healthInterpretation", "expression")

// refuseNonBool is a stand-in validator: it refuses any health expression
// other than "true", and any status reflection expression too, so one
// object can carry two errors.
func refuseNonBool(ric *configv1alpha1.ResourceInterpreterCustomization) field.ErrorList {
	var errs field.ErrorList
	if h := ric.Spec.Customizations.HealthInterpretation; h != nil && h.Expression != "true" {
		errs = append(errs, field.Invalid(healthPath, h.Expression, "compile error: undeclared reference"))
	}
	if s := ric.Spec.Customizations.StatusReflection; s != nil {
		errs = append(errs, field.Invalid(field.NewPath("spec", "customizations", "statusReflection", "expression"), s.Expression,
			"estimated cost 9223372036854775807 exceeds the budget"))
	}
	return errs
}

func customization(health string) *configv1alpha1.ResourceInterpreterCustomization {
	return &configv1alpha1.ResourceInterpreterCustomization{
		TypeMeta:   metav1.TypeMeta{APIVersion: configv1alpha1.SchemeGroupVersion.String(), Kind: "ResourceInterpreterCustomization"},
		ObjectMeta: metav1.ObjectMeta{Name: "rollouts"},
		Spec: configv1alpha1.ResourceInterpreterCustomizationSpec{
			Target: configv1alpha1.CustomizationTarget{APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout"},
			Customizations: configv1alpha1.CustomizationRules{
				HealthInterpretation: &configv1alpha1.HealthInterpretation{Expression: health},
			},
		},
	}
}

func reviewOf(t *testing.T, op admissionv1.Operation, obj runtime.Object) []byte {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       types.UID("uid-1"),
			Kind:      metav1.GroupVersionKind{Group: "config.flotilla.io", Version: "v1alpha1", Kind: "ResourceInterpreterCustomization"},
			Resource:  metav1.GroupVersionResource{Group: "config.flotilla.io", Version: "v1alpha1", Resource: "resourceinterpretercustomizations"},
			Name:      "rollouts",
			Operation: op,
			Object:    runtime.RawExtension{Raw: raw},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

func post(t *testing.T, h http.Handler, contentType string, body []byte) (*httptest.ResponseRecorder, *admissionv1.AdmissionReview) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, ValidatePath, bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		return rec, nil
	}
	out := &admissionv1.AdmissionReview{}
	if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
		t.Fatalf("response is not an AdmissionReview: %v: %s", err, rec.Body)
	}
	if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" || out.Response == nil {
		t.Fatalf("response review: %s", rec.Body)
	}
	return rec, out
}

func TestHandlerRefusesNamingEachField(t *testing.T) {
	metrics := NewMetrics(prometheus.NewRegistry())
	h := NewHandler(refuseNonBool, metrics)
	ric := customization("object.status.phase ==")
	ric.Spec.Customizations.StatusReflection = &configv1alpha1.StatusReflection{Expression: "[1,2].map(x, [1,2].map(y, x*y))"}
	_, review := post(t, h, "application/json", reviewOf(t, admissionv1.Create, ric))
	if review == nil {
		t.Fatal("no review")
	}
	resp := review.Response
	if resp.Allowed || resp.UID != "uid-1" {
		t.Fatalf("allowed=%v uid=%q, want refused for uid-1", resp.Allowed, resp.UID)
	}
	st := resp.Result
	if st == nil || st.Code != http.StatusUnprocessableEntity || st.Reason != metav1.StatusReasonInvalid {
		t.Fatalf("status %+v, want 422 Invalid", st)
	}
	for _, want := range []string{
		`ResourceInterpreterCustomization.config.flotilla.io "rollouts" is invalid`,
		`spec.customizations.healthInterpretation.expression: Invalid value: "object.status.phase ==": compile error`,
		`spec.customizations.statusReflection.expression: Invalid value: `,
		`exceeds the budget`,
	} {
		if !strings.Contains(st.Message, want) {
			t.Errorf("message %q lacks %q", st.Message, want)
		}
	}
	if st.Details == nil || len(st.Details.Causes) != 2 || st.Details.Causes[0].Field != healthPath.String() {
		t.Errorf("causes %+v, want one per field, the health expression first", st.Details)
	}
	if v := testutil.ToFloat64(metrics.Requests.WithLabelValues("create", "denied")); v != 1 {
		t.Errorf("denied creates counted %v, want 1", v)
	}
}

func TestHandlerAllows(t *testing.T) {
	h := NewHandler(refuseNonBool, nil)
	for name, body := range map[string][]byte{
		"a valid create":  reviewOf(t, admissionv1.Create, customization("true")),
		"a valid update":  reviewOf(t, admissionv1.Update, customization("true")),
		"a delete":        reviewOf(t, admissionv1.Delete, customization("not even CEL")),
		"another kind":    bytes.Replace(reviewOf(t, admissionv1.Create, customization("x")), []byte(`"version":"v1alpha1","kind":"ResourceInterpreterCustomization"`), []byte(`"version":"v1alpha1","kind":"Deployment"`), 1),
		"charset in type": reviewOf(t, admissionv1.Create, customization("true")),
	} {
		ct := "application/json"
		if name == "charset in type" {
			ct = "application/json; charset=utf-8"
		}
		_, review := post(t, h, ct, body)
		if review == nil || !review.Response.Allowed {
			t.Errorf("%s: not allowed: %+v", name, review)
		}
		if name == "another kind" && len(review.Response.Warnings) == 0 {
			t.Errorf("%s: allowed without a warning", name)
		}
	}
}

func TestHandlerRefusesAnUpdateMadeInvalid(t *testing.T) {
	_, review := post(t, NewHandler(refuseNonBool, nil), "application/json", reviewOf(t, admissionv1.Update, customization("1 +")))
	if review == nil || review.Response.Allowed {
		t.Fatalf("an update to an expression that does not compile was allowed: %+v", review)
	}
}

func TestHandlerRejectsWhatIsNotAReview(t *testing.T) {
	h := NewHandler(refuseNonBool, nil)
	valid := reviewOf(t, admissionv1.Create, customization("true"))
	for name, tc := range map[string]struct {
		method, contentType string
		body                []byte
		want                int
	}{
		"GET":              {http.MethodGet, "application/json", nil, http.StatusMethodNotAllowed},
		"YAML":             {http.MethodPost, "application/yaml", valid, http.StatusUnsupportedMediaType},
		"not JSON":         {http.MethodPost, "application/json", []byte("{"), http.StatusBadRequest},
		"no request":       {http.MethodPost, "application/json", []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`), http.StatusBadRequest},
		"over the bound":   {http.MethodPost, "application/json", append(append([]byte(`{"x":"`), bytes.Repeat([]byte("a"), MaxRequestBytes)...), '"', '}'), http.StatusRequestEntityTooLarge},
		"at most the size": {http.MethodPost, "application/json", valid, http.StatusOK},
	} {
		req := httptest.NewRequest(tc.method, ValidatePath, bytes.NewReader(tc.body))
		req.Header.Set("Content-Type", tc.contentType)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("%s: HTTP %d, want %d (%s)", name, rec.Code, tc.want, rec.Body)
		}
	}
}

func TestHandlerRefusesAnObjectItCannotDecode(t *testing.T) {
	body := reviewOf(t, admissionv1.Create, customization("true"))
	body = bytes.Replace(body, []byte(`"target":{"apiVersion"`), []byte(`"target":7,"t":{"apiVersion"`), 1)
	_, review := post(t, NewHandler(refuseNonBool, nil), "application/json", body)
	if review == nil || review.Response.Allowed || review.Response.Result.Code != http.StatusBadRequest {
		t.Fatalf("an undecodable object: %+v", review)
	}
}
