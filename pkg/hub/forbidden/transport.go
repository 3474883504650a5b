package forbidden

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
)

// maxStatusBody bounds what is read of a 403 response to find the
// permission in it (a Status is a few hundred bytes).
const maxStatusBody = 64 << 10

// Transport wraps rt so that every write the apiserver refuses for want of
// a permission is counted in writes (labels resource, verb) and logged.
// Only 403 responses to writes are looked at: the Status body is read, and
// handed on unchanged to the client, which turns it into the usual error.
// A 403 that is not an authorization refusal (an admission plugin's, e.g. a
// namespace being deleted) is not counted.
func Transport(rt http.RoundTripper, writes *prometheus.CounterVec) http.RoundTripper {
	return &transport{next: rt, writes: writes}
}

type transport struct {
	next   http.RoundTripper
	writes *prometheus.CounterVec
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusForbidden || !writeMethod(req.Method) || resp.Body == nil {
		return resp, err
	}
	data, readErr := io.ReadAll(io.LimitReader(resp.Body, maxStatusBody))
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(data))
	if readErr != nil {
		return resp, nil
	}
	var status struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(data, &status) != nil {
		return resp, nil
	}
	if d, ok := ParseMessage(status.Message); ok && Write(d.Verb) {
		t.writes.WithLabelValues(d.Resource, d.Verb).Inc()
		klog.ErrorS(nil, "The apiserver refused the hub a write: its role lacks the permission",
			"permission", d.Permission(), "user", d.User, "role", Role, "url", req.URL.Path)
	}
	return resp, nil
}

func writeMethod(m string) bool {
	switch m {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}
