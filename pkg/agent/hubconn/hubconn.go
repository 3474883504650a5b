// Package hubconn classifies the agent's failures to talk to the hub and logs
// them once per change of state, so a hub that is down for an hour yields two
// log lines (down, back), not one per retry, while a metric counts every one.
package hubconn

import (
	"context"
	"errors"
	"net"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/klog/v2"

	"github.com/flotilla-io/flotilla/pkg/agent/agentmetrics"
)

// Reasons an operation on the hub failed.
const (
	ReasonUnauthorized = "Unauthorized" // 401: expired or revoked credentials
	ReasonForbidden    = "Forbidden"    // 403: RBAC refuses the agent's identity
	ReasonNotFound     = "NotFound"
	ReasonConflict     = "Conflict"
	ReasonInvalid      = "Invalid"
	ReasonThrottled    = "Throttled"
	ReasonTimeout      = "Timeout"
	ReasonUnreachable  = "Unreachable" // connection refused, reset, DNS failure
	ReasonServerError  = "ServerError"
	ReasonOther        = "Other"
)

// Reason classifies err; "" for nil.
func Reason(err error) string {
	var netErr net.Error
	switch {
	case err == nil:
		return ""
	case apierrors.IsUnauthorized(err):
		return ReasonUnauthorized
	case apierrors.IsForbidden(err):
		return ReasonForbidden
	case apierrors.IsNotFound(err):
		return ReasonNotFound
	case apierrors.IsConflict(err):
		return ReasonConflict
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return ReasonInvalid
	case apierrors.IsTooManyRequests(err):
		return ReasonThrottled
	case apierrors.IsTimeout(err), apierrors.IsServerTimeout(err), errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &netErr) && netErr.Timeout():
		return ReasonTimeout
	case utilnet.IsConnectionRefused(err), utilnet.IsConnectionReset(err), utilnet.IsProbableEOF(err),
		errors.As(err, new(*net.OpError)), errors.As(err, new(*net.DNSError)):
		return ReasonUnreachable
	case apierrors.IsInternalError(err), apierrors.IsServiceUnavailable(err), apierrors.IsUnexpectedServerError(err):
		return ReasonServerError
	default:
		return ReasonOther
	}
}

// Tracker follows the outcome of one recurring operation on the hub.
type Tracker struct {
	operation string
	metrics   *agentmetrics.Metrics

	mu   sync.Mutex
	last string // reason of the last failure, "" after a success
}

// NewTracker returns a tracker for operation (e.g. "renew-lease").
func NewTracker(operation string, m *agentmetrics.Metrics) *Tracker {
	return &Tracker{operation: operation, metrics: m}
}

// Observe records the result of one attempt: every failure is counted; the
// log line comes only when the state (ok, or the failure's reason) changes.
// It returns the failure's reason, "" on success.
func (t *Tracker) Observe(logger klog.Logger, err error, keysAndValues ...any) string {
	reason := Reason(err)
	if reason != "" && t.metrics != nil {
		t.metrics.HubRequestErrors.WithLabelValues(t.operation, reason).Inc()
	}
	t.mu.Lock()
	changed := reason != t.last
	previous := t.last
	t.last = reason
	t.mu.Unlock()
	if !changed {
		return reason
	}
	kv := append([]any{"operation", t.operation}, keysAndValues...)
	if reason == "" {
		logger.Info("Hub operation succeeds again", append(kv, "previousFailure", previous)...)
	} else {
		logger.Error(err, "Hub operation failing; retrying with backoff (logged again only when this changes)", append(kv, "reason", reason)...)
	}
	return reason
}
