// Package agentmetrics holds the agent's Prometheus metrics. One Metrics value
// is registered per agent run, on the registry the agent serves, so tests can
// run several agents in one process.
package agentmetrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flotilla-io/flotilla/pkg/metrics"
)

const subsystem = "agent"

// Probe names used as the "probe" label.
const (
	ProbeAPIServer = "apiserver"
	ProbeDNS       = "dns"
)

// Metrics are the agent's own metrics.
type Metrics struct {
	// Leader is 1 while this agent holds the member's leader lease.
	Leader prometheus.Gauge
	// LeaderStepDowns counts leaders that stopped speaking for the cluster
	// on their own, by reason (pkg/agent/leader).
	LeaderStepDowns *prometheus.CounterVec
	// ProbeDuration is the latency of each probe.
	ProbeDuration *prometheus.HistogramVec
	// ProbeResults counts raw probe verdicts by reason, before damping.
	ProbeResults *prometheus.CounterVec
	// Condition is the damped status of each condition this agent owns
	// (1 for the status it currently has, 0 for the others).
	Condition *prometheus.GaugeVec
	// LeaseRenewals counts hub Lease renewals by result.
	LeaseRenewals *prometheus.CounterVec
	// HubRequestErrors counts failed requests to the hub by operation and
	// reason (Unauthorized, Forbidden, NotFound, Unreachable, …).
	HubRequestErrors *prometheus.CounterVec
	// StatusWrites counts Cluster status writes to the hub by result.
	StatusWrites *prometheus.CounterVec
	// DNSVerdicts is the number of fresh per-node DNS verdicts the leader
	// sees, by status.
	DNSVerdicts *prometheus.GaugeVec
	// WorkApplyDuration is the time to apply every manifest of one Work.
	WorkApplyDuration prometheus.Histogram
	// WorkApplies counts manifest outcomes (Applied, Unchanged, Conflict, …).
	WorkApplies *prometheus.CounterVec
	// WorkStatusWrites counts Work status writes by result.
	WorkStatusWrites *prometheus.CounterVec
	// WorksInFlight is the number of Works being synced right now.
	WorksInFlight prometheus.Gauge
	// ManifestsRefused counts manifests the agent refused to apply, by
	// reason (pkg/agent/execution admission), once per change of a Work.
	ManifestsRefused *prometheus.CounterVec
	// HubTokenExpiration is when the hub token this agent uses expires
	// (Unix seconds; pkg/agent/hubtoken). Alert on it getting close.
	HubTokenExpiration prometheus.Gauge
	// HubTokenRenewals counts renewals of the hub token by result.
	HubTokenRenewals *prometheus.CounterVec
}

// New creates the agent's metrics and registers them on reg.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: metrics.Namespace, Subsystem: subsystem, Name: "leader",
			Help: "1 while this agent is the leader of its member cluster, else 0.",
		}),
		LeaderStepDowns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Subsystem: subsystem, Name: "leader_step_downs_total",
			Help: "Times this agent stopped leading on its own, by reason: MemberLeaseNotRenewed (no member Lease renewal within the renew deadline), HubLeaseHeldByOther (another agent renews the hub Lease).",
		}, []string{"reason"}),
		ProbeDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: metrics.Namespace, Subsystem: subsystem, Name: "probe_duration_seconds",
			Help:    "Latency of the agent's health probes.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"probe"}),
		ProbeResults: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Subsystem: subsystem, Name: "probe_results_total",
			Help: "Raw probe verdicts (before flap damping) by probe, status and reason.",
		}, []string{"probe", "status", "reason"}),
		Condition: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: metrics.Namespace, Subsystem: subsystem, Name: "condition",
			Help: "Damped status of a condition this agent computes: 1 for the current status.",
		}, []string{"condition", "status"}),
		LeaseRenewals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Subsystem: subsystem, Name: "lease_renewals_total",
			Help: "Renewals of the cluster's Lease on the hub by result (success, error).",
		}, []string{"result"}),
		HubRequestErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Subsystem: subsystem, Name: "hub_request_errors_total",
			Help: "Failed requests to the hub by operation and reason.",
		}, []string{"operation", "reason"}),
		StatusWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Subsystem: subsystem, Name: "status_writes_total",
			Help: "Writes of the Cluster object (status or spec.id) to the hub by result.",
		}, []string{"result"}),
		DNSVerdicts: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: metrics.Namespace, Subsystem: subsystem, Name: "dns_verdicts",
			Help: "Fresh per-node DNS verdicts seen by the leader, by status.",
		}, []string{"status"}),
		WorkApplyDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: metrics.Namespace, Subsystem: subsystem, Name: "work_apply_duration_seconds",
			Help:    "Time to apply every manifest of one Work to the member.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}),
		WorkApplies: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Subsystem: subsystem, Name: "manifest_applies_total",
			Help: "Manifest outcomes by result: Created, Applied, Unchanged, Conflict, Refused, InvalidManifest, KindNotServed, NotFound, ApplyFailed.",
		}, []string{"result"}),
		WorkStatusWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Subsystem: subsystem, Name: "work_status_writes_total",
			Help: "Work status writes to the hub by result.",
		}, []string{"result"}),
		WorksInFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: metrics.Namespace, Subsystem: subsystem, Name: "works_in_flight",
			Help: "Works being synced right now.",
		}),
		ManifestsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Subsystem: subsystem, Name: "manifests_refused_total",
			Help: "Manifests the agent refused to apply, by reason (ClusterScopedKind, NamespaceNotOfSource, ProtectedNamespace, FlotillaKind); counted once per change of the Work.",
		}, []string{"reason"}),
		HubTokenExpiration: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: metrics.Namespace, Subsystem: subsystem, Name: "hub_token_expiration_timestamp_seconds",
			Help: "Expiry (Unix seconds) of the hub token this agent process uses; 0 when its hub credential is not a token it renews (client certificate, opaque token).",
		}),
		HubTokenRenewals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Subsystem: subsystem, Name: "hub_token_renewals_total",
			Help: "Renewals of the agent's hub token (TokenRequest for its own ServiceAccount) by result (success, error).",
		}, []string{"result"}),
	}
	reg.MustRegister(m.HubTokenExpiration, m.HubTokenRenewals)
	reg.MustRegister(m.LeaderStepDowns)
	reg.MustRegister(m.WorkApplyDuration, m.WorkApplies, m.WorkStatusWrites, m.WorksInFlight, m.ManifestsRefused)
	reg.MustRegister(m.Leader, m.ProbeDuration, m.ProbeResults, m.Condition, m.LeaseRenewals,
		m.HubRequestErrors, m.StatusWrites, m.DNSVerdicts)
	return m
}

// SetCondition records the damped status of condition.
func (m *Metrics) SetCondition(condition, status string) {
	metrics.SetOneHot(m.Condition, status, []string{"True", "False", "Unknown"}, condition)
}
