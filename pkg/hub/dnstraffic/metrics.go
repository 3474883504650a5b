package dnstraffic

import (
	"strings"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flotilla-io/flotilla/pkg/metrics"
)

const subsystem = "dns_traffic"

// Query results beside the rcode names.
const (
	// ResultNoData is NOERROR with an empty answer: the name exists but
	// has no record of the asked type (or every cluster is blocked).
	ResultNoData = "nodata"
	// ResultDropped is a query not answered because MaxInFlight queries
	// were already being handled.
	ResultDropped = "dropped"
)

// Metrics are the DNS traffic manager's metrics.
type Metrics struct {
	// Queries counts queries by result: the reply's rcode name lowercased,
	// "nodata" or "dropped".
	Queries *prometheus.CounterVec
	// AnswerRecords counts records sent in answer sections by type (A, AAAA).
	AnswerRecords *prometheus.CounterVec
	// RequestDuration is the time from a query reaching the handler to its
	// reply written.
	RequestDuration prometheus.Histogram
	// Hosts is the number of hosts (wildcards included) in the snapshot
	// being served.
	Hosts prometheus.Gauge
	// HostConflicts is the number of hosts (wildcards included) claimed
	// by more than one MCI; only the oldest claimant's addresses are
	// served for each.
	HostConflicts prometheus.Gauge
	// HostsWithoutAddresses is the number of hosts served with no address
	// at all (the MCI has no load-balancer address: no backend, or every
	// backend cluster blocked): their queries get empty answers.
	HostsWithoutAddresses prometheus.Gauge
	// Panics counts handler panics recovered (a bug: each is also a
	// servfail).
	Panics prometheus.Counter
	// ViewStaleSeconds is how long the host apiserver has not answered
	// the freshness check while it fails (0 while it answers): the age of
	// the view being served.
	ViewStaleSeconds prometheus.Gauge
	// StaleAnswers counts replies sent from a stale view (within the
	// horizon; past it, replies are SERVFAIL and counted as such).
	StaleAnswers prometheus.Counter

	// Children resolved once: the handler runs per packet.
	results map[int]prometheus.Counter
	nodata  prometheus.Counter
	dropped prometheus.Counter
	recA    prometheus.Counter
	recAAAA prometheus.Counter
}

// NewMetrics creates the metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Queries: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: subsystem,
			Name: "queries_total", Help: "DNS queries by result (rcode name lowercased, nodata, dropped)."}, []string{"result"}),
		AnswerRecords: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: subsystem,
			Name: "answer_records_total", Help: "Records sent in DNS answer sections by type."}, []string{"type"}),
		RequestDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: metrics.Namespace, Subsystem: subsystem,
			Name: "request_duration_seconds", Help: "Time from a DNS query reaching the handler to its reply written.",
			Buckets: prometheus.ExponentialBuckets(0.00001, 4, 9)}),
		Hosts: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: metrics.Namespace, Subsystem: subsystem,
			Name: "hosts", Help: "MultiClusterIngress hosts (wildcards included) the DNS traffic manager answers for."}),
		HostConflicts: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: metrics.Namespace, Subsystem: subsystem,
			Name: "host_conflicts", Help: "MultiClusterIngress hosts (wildcards included) claimed by more than one ingress; only the oldest claimant's addresses are served."}),
		HostsWithoutAddresses: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: metrics.Namespace, Subsystem: subsystem,
			Name: "hosts_without_addresses", Help: "MultiClusterIngress hosts (wildcards included) served with no address: their queries are answered with no records."}),
		Panics: prometheus.NewCounter(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: subsystem,
			Name: "handler_panics_total", Help: "DNS handler panics recovered (each is also answered SERVFAIL)."}),
		ViewStaleSeconds: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: metrics.Namespace, Subsystem: subsystem,
			Name: "view_stale_seconds", Help: "Seconds since the host apiserver last answered the DNS traffic manager's freshness check, while it fails; 0 while it answers."}),
		StaleAnswers: prometheus.NewCounter(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: subsystem,
			Name: "stale_answers_total", Help: "DNS replies sent from a stale view (host apiserver unanswered, within --dns-traffic-stale-horizon)."}),
	}
	reg.MustRegister(m.Queries, m.AnswerRecords, m.RequestDuration, m.Hosts, m.HostConflicts, m.HostsWithoutAddresses, m.Panics,
		m.ViewStaleSeconds, m.StaleAnswers)
	m.results = map[int]prometheus.Counter{}
	for _, rc := range []int{dns.RcodeSuccess, dns.RcodeNameError, dns.RcodeRefused, dns.RcodeFormatError,
		dns.RcodeServerFailure, dns.RcodeNotImplemented, dns.RcodeBadVers} {
		m.results[rc] = m.Queries.WithLabelValues(rcodeName(rc))
	}
	m.nodata = m.Queries.WithLabelValues(ResultNoData)
	m.dropped = m.Queries.WithLabelValues(ResultDropped)
	m.recA = m.AnswerRecords.WithLabelValues("A")
	m.recAAAA = m.AnswerRecords.WithLabelValues("AAAA")
	return m
}

// rcodeName is the result label of an rcode.
func rcodeName(rc int) string {
	if rc == dns.RcodeBadVers { // shares 16 with BADSIG in RcodeToString
		return "badvers"
	}
	if s, ok := dns.RcodeToString[rc]; ok {
		return strings.ToLower(s)
	}
	return "other"
}

// observe counts one reply.
func (m *Metrics) observe(resp *dns.Msg) {
	switch {
	case resp.Rcode == dns.RcodeSuccess && len(resp.Answer) == 0:
		m.nodata.Inc()
	default:
		c, ok := m.results[resp.Rcode]
		if !ok {
			c = m.Queries.WithLabelValues(rcodeName(resp.Rcode))
		}
		c.Inc()
	}
	var a, aaaa int
	for _, rr := range resp.Answer {
		switch rr.Header().Rrtype {
		case dns.TypeA:
			a++
		case dns.TypeAAAA:
			aaaa++
		}
	}
	if a > 0 {
		m.recA.Add(float64(a))
	}
	if aaaa > 0 {
		m.recAAAA.Add(float64(aaaa))
	}
}
