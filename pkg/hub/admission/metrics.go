package admission

import (
	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/flotilla-io/flotilla/pkg/metrics"
)

const subsystem = "hub_webhook"

// Metrics are the webhook's metrics (docs/metrics.md).
type Metrics struct {
	// Requests counts admission reviews by operation and result (allowed,
	// denied).
	Requests *prometheus.CounterVec
	// CertificateExpiry is when the serving certificate in use expires
	// (Unix seconds); 0 while there is none.
	CertificateExpiry prometheus.Gauge
	// CertificateRotations counts serving certificates (and CAs) the
	// CertController issued, by what: certificate, ca.
	CertificateRotations *prometheus.CounterVec
}

// NewMetrics registers the webhook's metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: subsystem,
			Name: "requests_total", Help: "ResourceInterpreterCustomization admission reviews by operation (create, update, delete, connect, other) and result (allowed, denied)."},
			[]string{"operation", "result"}),
		CertificateExpiry: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: metrics.Namespace, Subsystem: subsystem,
			Name: "certificate_expiration_timestamp_seconds", Help: "When the webhook's serving certificate in use expires (Unix seconds); 0 while there is none."}),
		CertificateRotations: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: subsystem,
			Name: "certificates_issued_total", Help: "Serving certificates and CAs this replica issued into the webhook's Secret, by what (certificate, ca)."},
			[]string{"what"}),
	}
	reg.MustRegister(m.Requests, m.CertificateExpiry, m.CertificateRotations)
	return m
}

func (m *Metrics) observe(req *admissionv1.AdmissionRequest, resp *admissionv1.AdmissionResponse) {
	if m == nil {
		return
	}
	result := "allowed"
	if !resp.Allowed {
		result = "denied"
	}
	m.Requests.WithLabelValues(operationLabel(req.Operation), result).Inc()
}

// operationLabels are the values of the operation label: the review's
// operation is whatever the caller wrote (anyone who reaches the port can
// send one), and each distinct label value is a series the hub keeps.
var operationLabels = map[admissionv1.Operation]string{
	admissionv1.Create:  "create",
	admissionv1.Update:  "update",
	admissionv1.Delete:  "delete",
	admissionv1.Connect: "connect",
}

// operationLabel is op's label value: "other" for anything the apiserver
// never sends.
func operationLabel(op admissionv1.Operation) string {
	if l, ok := operationLabels[op]; ok {
		return l
	}
	return "other"
}

func (m *Metrics) issued(what string) {
	if m != nil {
		m.CertificateRotations.WithLabelValues(what).Inc()
	}
}

func (m *Metrics) expiry(unix float64) {
	if m != nil {
		m.CertificateExpiry.Set(unix)
	}
}
