package admission

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	configv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/config/v1alpha1"
)

// seriesOf counts the series of every metric reg holds.
func seriesOf(t *testing.T, reg *prometheus.Registry) int {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range families {
		n += len(f.GetMetric())
	}
	return n
}

// randomString is up to 64 random bytes, valid UTF-8 or not.
func randomString(r *rand.Rand) string {
	b := make([]byte, 1+r.IntN(64))
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
	return string(b)
}

// Any pod that reaches the port can send reviews: what it writes in one
// must not become a label value the hub keeps for ever.
func TestRequestsMetricHasFixedOperationLabels(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := NewHandler(refuseNonBool, NewMetrics(reg))
	before := seriesOf(t, reg)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 200 {
		op := admissionv1.Operation(randomString(r))
		if i%2 == 0 {
			op = admissionv1.Operation(fmt.Sprintf("OP%d", i))
		}
		post(t, h, "application/json", reviewOf(t, op, customization("true")))
	}
	for _, op := range []admissionv1.Operation{admissionv1.Create, admissionv1.Update, admissionv1.Delete, admissionv1.Connect} {
		post(t, h, "application/json", reviewOf(t, op, customization("true")))
		post(t, h, "application/json", reviewOf(t, op, customization("false")))
	}
	// operations (create, update, delete, connect, other) × results
	// (allowed, denied), whatever the requests said.
	const most = 5 * 2
	if got := seriesOf(t, reg) - before; got > most {
		t.Fatalf("200 reviews of random operations made %d series, want at most %d", got, most)
	}
}

// countingValidate counts the compiles the handler asks for.
func countingValidate(calls *atomic.Int64) ValidateFunc {
	return func(ric *configv1alpha1.ResourceInterpreterCustomization) field.ErrorList {
		calls.Add(1)
		return refuseNonBool(ric)
	}
}

func TestHandlerCompilesEachSpecOnce(t *testing.T) {
	var calls atomic.Int64
	h := NewHandler(countingValidate(&calls), nil)
	for i := range 20 {
		ric := customization("object.status.phase ==") // refused: the verdict is cached too
		ric.Name = fmt.Sprintf("copy-%d", i)           // the name is not what is compiled
		op := admissionv1.Create
		if i%2 == 1 {
			op = admissionv1.Update
		}
		_, review := post(t, h, "application/json", reviewOf(t, op, ric))
		if review == nil || review.Response.Allowed || !strings.Contains(review.Response.Result.Message, `"copy-`+fmt.Sprint(i)+`" is invalid`) {
			t.Fatalf("review %d: %+v", i, review)
		}
		post(t, h, "application/json", reviewOf(t, op, customization("true")))
	}
	if got := calls.Load(); got != 2 {
		t.Fatalf("40 reviews of 2 specs compiled %d times, want 2", got)
	}
}
func TestHandlerCompileCacheIsBounded(t *testing.T) {
	var calls atomic.Int64
	h := NewHandler(countingValidate(&calls), nil)
	for i := range 3 * verdictCacheSize {
		post(t, h, "application/json", reviewOf(t, admissionv1.Create, customization(fmt.Sprintf("%d == %d", i, i))))
	}
	if got := h.verdicts.Len(); got > verdictCacheSize {
		t.Fatalf("the cache holds %d verdicts, want at most %d", got, verdictCacheSize)
	}
	if got := calls.Load(); got != 3*verdictCacheSize {
		t.Fatalf("%d distinct specs compiled %d times", 3*verdictCacheSize, got)
	}
	// The first spec was evicted long ago: compiled again.
	post(t, h, "application/json", reviewOf(t, admissionv1.Create, customization("0 == 0")))
	if got := calls.Load(); got != 3*verdictCacheSize+1 {
		t.Fatalf("an evicted spec was not compiled again (%d compiles)", got)
	}
}

// longRefusal refuses with errors as long as the object's own strings.
func longRefusal(ric *configv1alpha1.ResourceInterpreterCustomization) field.ErrorList {
	var errs field.ErrorList
	for i := range 100 {
		src := ric.Spec.Customizations.HealthInterpretation.Expression
		errs = append(errs, field.Invalid(healthPath.Index(i), src, "compilation failed: "+src))
	}
	return errs
}

// A refusal quotes the object; what the webhook answers and keeps is
// bounded however large the object a caller sends.
func TestHandlerBoundsItsAnswer(t *testing.T) {
	h := NewHandler(longRefusal, nil)
	huge := customization(strings.Repeat("é", 200<<10))
	body := reviewOf(t, admissionv1.Create, huge)
	rec, review := post(t, h, "application/json", body)
	if review == nil || review.Response.Allowed {
		t.Fatalf("not refused: %s", rec.Body.String()[:200])
	}
	if rec.Body.Len() > MaxResponseBytes {
		t.Fatalf("answer of %d bytes, want at most %d", rec.Body.Len(), MaxResponseBytes)
	}
	st := review.Response.Result
	if !utf8.ValidString(st.Message) || len(st.Details.Causes) > maxCauses+1 {
		t.Fatalf("message valid=%v, %d causes", utf8.ValidString(st.Message), len(st.Details.Causes))
	}
	if last := st.Details.Causes[len(st.Details.Causes)-1]; !strings.Contains(last.Message, "more errors") {
		t.Errorf("the last cause %q does not say errors were left out", last.Message)
	}
}

// A request waits for a free slot without reading its body; a caller that
// gives up frees its place.
func TestHandlerBoundsConcurrentReviews(t *testing.T) {
	h := NewHandler(refuseNonBool, nil)
	for range cap(h.inFlight) {
		h.inFlight <- struct{}{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req := httptest.NewRequest(http.MethodPost, ValidatePath, bytes.NewReader(reviewOf(t, admissionv1.Create, customization("true")))).WithContext(ctx)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("with every slot taken: HTTP %d, want 503", rec.Code)
	}
	<-h.inFlight
	if _, review := post(t, h, "application/json", reviewOf(t, admissionv1.Create, customization("true"))); review == nil || !review.Response.Allowed {
		t.Fatalf("with a slot free: %+v", review)
	}
}
