package admission

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	configv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/config/v1alpha1"
	compile "github.com/flotilla-io/flotilla/pkg/resourceinterpreter/customization"
)

// maxReviewTime bounds one review of a fuzzed request, compile included
// (the fuzzer's inputs are small; generous for a loaded machine).
const maxReviewTime = time.Second

// mostSeries is what the webhook's metrics may ever hold: operation ×
// result of requests_total, the expiry gauge, certificate and ca.
const mostSeries = 5*2 + 1 + 2

// checkReview posts body and checks the webhook's promises to any caller:
// no panic, bounded time and answer, an answer that is an AdmissionReview
// for the request's uid or an HTTP error, and no metric series beyond the
// fixed set.
func checkReview(t *testing.T, h *Handler, reg *prometheus.Registry, body []byte) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, ValidatePath, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	start := time.Now()
	h.ServeHTTP(rec, req)
	if d := time.Since(start); d > maxReviewTime {
		t.Fatalf("a review took %v (> %v): %q", d, maxReviewTime, body)
	}
	if rec.Body.Len() > MaxResponseBytes {
		t.Fatalf("an answer of %d bytes (> %d)", rec.Body.Len(), MaxResponseBytes)
	}
	if n := seriesOf(t, reg); n > mostSeries {
		t.Fatalf("%d metric series (> %d) after %q", n, mostSeries, body)
	}
	switch rec.Code {
	case http.StatusOK:
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		if !utf8.Valid(rec.Body.Bytes()) {
			t.Fatalf("an HTTP error that is not UTF-8: %q", rec.Body.Bytes())
		}
		return
	default:
		t.Fatalf("HTTP %d: %s", rec.Code, rec.Body)
	}
	var in, out admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &in); err != nil || in.Request == nil {
		t.Fatalf("answered %q with a review", body)
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil || out.Response.UID != in.Request.UID {
		t.Fatalf("the answer is not a review for uid %q: %s", in.Request.UID, rec.Body)
	}
	if r := out.Response.Result; r != nil && (!utf8.ValidString(r.Message) || len(r.Message) > maxMessage) {
		t.Fatalf("a refusal's message of %d bytes, valid UTF-8 %v", len(r.Message), utf8.ValidString(r.Message))
	}
}

// review is an AdmissionReview of a customization whose health expression
// is health, with the request's other strings as given.
func review(t *testing.T, uid, op, name, group, kind, health string) []byte {
	t.Helper()
	ric := customization(health)
	ric.Name = name
	raw, err := json.Marshal(ric)
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: types.UID(uid), Kind: metav1.GroupVersionKind{Group: group, Version: "v1alpha1", Kind: kind},
			Name: name, Operation: admissionv1.Operation(op), Object: runtime.RawExtension{Raw: raw},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// FuzzAdmissionReview sends the webhook (with the real compile) any body,
// and reviews whose every string the caller chose.
func FuzzAdmissionReview(f *testing.F) {
	valid := func(op, health string) []byte {
		b, _ := json.Marshal(admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{UID: "u", Kind: metav1.GroupVersionKind{Group: "config.flotilla.io", Version: "v1alpha1", Kind: "ResourceInterpreterCustomization"},
				Operation: admissionv1.Operation(op), Object: runtime.RawExtension{Raw: []byte(`{"metadata":{"name":"x"},"spec":{"target":{"apiVersion":"example.com/v1","kind":"W"},"customizations":{"healthInterpretation":{"expression":` + health + `}}}}`)}},
		})
		return b
	}
	f.Add(valid("CREATE", `"true"`), "u", "CREATE", "x", "config.flotilla.io", "ResourceInterpreterCustomization", "object.status.phase ==")
	f.Add(valid("UPDATE", `7`), "u", "UPDATE", "x", "config.flotilla.io", "ResourceInterpreterCustomization", `[1,2].map(x, [1,2].map(y, x*y))`)
	f.Add([]byte(`{"request":{"uid":"u","operation":"\u0000\ud800"}}`), "u", "ÉVIL\xff", "é", "apps", "Deployment", "")
	f.Add([]byte(`{"request":null}`), "", "DELETE", "", "", "", "true")
	f.Add([]byte(`{`), "u", "CONNECT", "x", "config.flotilla.io", "ResourceInterpreterCustomization", `object.spec.a.all(x, object.spec.b.all(y, object.spec.c.all(z, x + y + z > 0)))`)
	// Build the CEL environments (~0.7 s, once per process) before any
	// review is timed.
	compile.Validate(&configv1alpha1.ResourceInterpreterCustomization{})
	reg := prometheus.NewRegistry()
	h := NewHandler(compile.Validate, NewMetrics(reg))
	// The certificate metrics are series too, as on a serving hub.
	h.metrics.issued("certificate")
	h.metrics.issued("ca")
	f.Fuzz(func(t *testing.T, body []byte, uid, op, name, group, kind, health string) {
		checkReview(t, h, reg, body)
		checkReview(t, h, reg, review(t, uid, op, name, group, kind, health))
		if group == "" { // mostly reviews of customizations
			checkReview(t, h, reg, review(t, uid, op, name, configv1alpha1.SchemeGroupVersion.Group, "ResourceInterpreterCustomization", health))
		}
	})
}
