package healthserver

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(body)
}

func TestReadyzReportsFailingChecksByName(t *testing.T) {
	s := New(":0", ":0", prometheus.NewRegistry())
	s.AddReadyzCheck("hub-apiserver", func(context.Context) error { return errors.New("connection refused") })
	s.AddReadyzCheck("member-apiserver", func(context.Context) error { return nil })
	h := s.Handler()

	code, body := get(t, h, "/readyz")
	if code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz = %d, want 503", code)
	}
	if !strings.Contains(body, "[-]hub-apiserver failed: connection refused") || !strings.Contains(body, "[+]member-apiserver ok") {
		t.Fatalf("/readyz body does not name the checks:\n%s", body)
	}
	// Liveness does not depend on readiness: an unreachable hub must not
	// get the agent restarted.
	if code, body := get(t, h, "/healthz"); code != http.StatusOK || body != "ok" {
		t.Fatalf("/healthz = %d %q", code, body)
	}
}

func TestReadyzOKWhenAllChecksPass(t *testing.T) {
	s := New(":0", ":0", prometheus.NewRegistry())
	s.AddReadyzCheck("a", func(context.Context) error { return nil })
	if code, body := get(t, s.Handler(), "/readyz"); code != http.StatusOK || body != "ok" {
		t.Fatalf("/readyz = %d %q", code, body)
	}
	if code, body := get(t, s.Handler(), "/readyz?verbose"); code != http.StatusOK || !strings.Contains(body, "[+]a ok") {
		t.Fatalf("/readyz?verbose = %d %q", code, body)
	}
}

func TestMetricsServesRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "flotilla_test_total", Help: "test"})
	reg.MustRegister(c)
	c.Inc()
	if code, body := get(t, New(":0", ":0", reg).Handler(), "/metrics"); code != http.StatusOK || !strings.Contains(body, "flotilla_test_total 1") {
		t.Fatalf("/metrics = %d %q", code, body)
	}
}

func TestRunFailsOnBusyAddress(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	err := New(addr, "0", prometheus.NewRegistry()).Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), addr) {
		t.Fatalf("Run on a busy address = %v, want an error naming %s", err, addr)
	}
}

// /debug/pprof/ is served only when profiling is enabled.
func TestProfilingOnlyWhenEnabled(t *testing.T) {
	s := New(":0", ":0", prometheus.NewRegistry())
	if code, _ := get(t, s.Handler(), "/debug/pprof/heap"); code != http.StatusNotFound {
		t.Fatalf("/debug/pprof/heap without profiling = %d, want 404", code)
	}
	s.EnableProfiling()
	if code, body := get(t, s.Handler(), "/debug/pprof/"); code != http.StatusOK || !strings.Contains(body, "heap") {
		t.Fatalf("/debug/pprof/ with profiling = %d %q", code, body)
	}
}
