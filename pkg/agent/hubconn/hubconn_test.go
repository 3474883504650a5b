package hubconn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/flotilla-io/flotilla/pkg/agent/agentmetrics"
)

// connectionRefused is the error a dial to a closed port returns.
var connectionRefused = &net.OpError{Op: "dial", Net: "tcp",
	Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}

func TestReason(t *testing.T) {
	gr := schema.GroupResource{Group: "cluster.flotilla.io", Resource: "clusters"}
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ""},
		{"401", apierrors.NewUnauthorized("token expired"), ReasonUnauthorized},
		{"403", apierrors.NewForbidden(gr, "member1", errors.New("RBAC")), ReasonForbidden},
		{"404", apierrors.NewNotFound(gr, "member1"), ReasonNotFound},
		{"404 wrapped", fmt.Errorf("register it: %w", apierrors.NewNotFound(gr, "member1")), ReasonNotFound},
		{"409", apierrors.NewConflict(gr, "member1", errors.New("modified")), ReasonConflict},
		{"400", apierrors.NewBadRequest("bad"), ReasonInvalid},
		{"422", apierrors.NewInvalid(schema.GroupKind{Group: gr.Group, Kind: "Cluster"}, "member1",
			field.ErrorList{field.Required(field.NewPath("spec"), "")}), ReasonInvalid},
		{"429", apierrors.NewTooManyRequests("slow down", 1), ReasonThrottled},
		{"500", apierrors.NewInternalError(errors.New("etcd")), ReasonServerError},
		{"503", apierrors.NewServiceUnavailable("starting"), ReasonServerError},
		{"504", apierrors.NewTimeoutError("slow", 1), ReasonTimeout},
		{"connection refused", connectionRefused, ReasonUnreachable},
		// client-go wraps transport errors in a *url.Error.
		{"connection refused in url.Error", &url.Error{Op: "Get", URL: "https://hub", Err: connectionRefused}, ReasonUnreachable},
		{"EOF", io.EOF, ReasonUnreachable},
		{"DNS failure", &net.DNSError{Err: "no such host", Name: "hub"}, ReasonUnreachable},
		{"context deadline", context.DeadlineExceeded, ReasonTimeout},
		{"wrapped context deadline", fmt.Errorf("renew: %w", context.DeadlineExceeded), ReasonTimeout},
		{"other", errors.New("something else"), ReasonOther},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Reason(tc.err); got != tc.want {
				t.Fatalf("Reason(%v) = %q, want %q", tc.err, got, tc.want)
			}
		})
	}
}

func TestTrackerCountsEveryFailureAndLogsOnlyChanges(t *testing.T) {
	var lines []string
	logger := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{})
	m := agentmetrics.New(prometheus.NewRegistry())
	tr := NewTracker("renew-lease", m)
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "leases"}, "member1", errors.New("RBAC"))

	steps := []struct {
		err        error
		wantReason string
		wantLogged bool
	}{
		{nil, "", false}, // success from the start is no change
		{connectionRefused, ReasonUnreachable, true},
		{connectionRefused, ReasonUnreachable, false},
		{connectionRefused, ReasonUnreachable, false},
		{forbidden, ReasonForbidden, true}, // another reason is a change
		{nil, "", true},                    // recovered
		{nil, "", false},
		{connectionRefused, ReasonUnreachable, true}, // failing again after recovery
	}
	for i, s := range steps {
		before := len(lines)
		if got := tr.Observe(logger, s.err, "lease", "member1"); got != s.wantReason {
			t.Fatalf("step %d: Observe(%v) = %q, want %q", i, s.err, got, s.wantReason)
		}
		if logged := len(lines) > before; logged != s.wantLogged {
			t.Fatalf("step %d: logged %v, want %v (lines %q)", i, logged, s.wantLogged, lines[before:])
		}
	}
	// The log lines carry the operation and the caller's key/values.
	for _, l := range lines {
		if !strings.Contains(l, `"operation"="renew-lease"`) || !strings.Contains(l, `"lease"="member1"`) {
			t.Errorf("log line %s lacks the operation or the caller's values", l)
		}
	}
	// Every failure is counted, logged or not.
	for reason, want := range map[string]float64{ReasonUnreachable: 4, ReasonForbidden: 1} {
		if got := counterValue(t, m.HubRequestErrors.WithLabelValues("renew-lease", reason)); got != want {
			t.Errorf("hub_request_errors_total{reason=%q} = %v, want %v", reason, got, want)
		}
	}
}

func TestTrackerWithoutMetrics(t *testing.T) {
	// Metrics are optional: a nil *Metrics must not panic.
	tr := NewTracker("get-cluster", nil)
	if got := tr.Observe(funcr.New(func(string, string) {}, funcr.Options{}), context.DeadlineExceeded); got != ReasonTimeout {
		t.Fatalf("Observe = %q, want %q", got, ReasonTimeout)
	}
}

// counterValue reads a counter. (prometheus/testutil.ToFloat64 would do, but
// it needs a module this repository's go.mod does not list.)
func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
