package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// The workqueue metrics keep Kubernetes' names (workqueue_depth{name}, …;
// component-base's, BETA there, and controller-runtime's), not a flotilla_
// prefix: they are client-go's own instrumentation, like
// rest_client_requests_total, and the dashboards and alerts written for
// kube-controller-manager's queues then work for the hub's unchanged.
// component-base's provider itself cannot be used: it registers on the
// global legacy registry, and nothing here goes to a global registry.
var (
	queueDepth = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: "workqueue", Name: "depth",
		Help: "Current depth of workqueue: keys waiting for a worker (not those being processed, nor those waiting out a delay).",
	}, []string{"name"})
	queueAdds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: "workqueue", Name: "adds_total",
		Help: "Total number of adds handled by workqueue.",
	}, []string{"name"})
	queueLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: "workqueue", Name: "queue_duration_seconds",
		Help:    "How long in seconds an item stays in workqueue before being requested.",
		Buckets: prometheus.ExponentialBuckets(10e-9, 10, 10),
	}, []string{"name"})
	queueWorkDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: "workqueue", Name: "work_duration_seconds",
		Help:    "How long in seconds processing an item from workqueue takes.",
		Buckets: prometheus.ExponentialBuckets(10e-9, 10, 10),
	}, []string{"name"})
	queueUnfinished = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: "workqueue", Name: "unfinished_work_seconds",
		Help: "How many seconds of work has been done that is in progress and hasn't been observed by work_duration. " +
			"Large values indicate stuck threads; 0 means no item is being processed.",
	}, []string{"name"})
	queueLongestRunning = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: "workqueue", Name: "longest_running_processor_seconds",
		Help: "How many seconds has the longest running processor for workqueue been running.",
	}, []string{"name"})
	queueRetries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: "workqueue", Name: "retries_total",
		Help: "Total number of retries (rate-limited re-adds) handled by workqueue.",
	}, []string{"name"})
)

// client-go takes the first provider set and ignores the rest, so it is set
// at init, as component-base does: before any queue exists, and before the
// init of a library that sets its own (controller-runtime's, linked into
// every envtest binary, comes later in Go's init order: sigs.k8s.io sorts
// after github.com; hub/app's TestHubRestartWritesNothing, which waits on
// the hub's queue series, fails if another provider wins).
func init() {
	workqueue.SetProvider(workqueueProvider{})
}

// RegisterWorkqueueMetrics exports, on reg, the metrics of every named
// client-go workqueue of the process. The series are the process's: two
// hubs in one process (tests) share them, as they share a queue name.
func RegisterWorkqueueMetrics(reg prometheus.Registerer) {
	reg.MustRegister(queueDepth, queueAdds, queueLatency, queueWorkDuration, queueUnfinished, queueLongestRunning, queueRetries)
}

// workqueueProvider hands each named queue its series.
type workqueueProvider struct{}

func (workqueueProvider) NewDepthMetric(name string) workqueue.GaugeMetric {
	return queueDepth.WithLabelValues(name)
}

func (workqueueProvider) NewAddsMetric(name string) workqueue.CounterMetric {
	return queueAdds.WithLabelValues(name)
}

func (workqueueProvider) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return queueLatency.WithLabelValues(name)
}

func (workqueueProvider) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return queueWorkDuration.WithLabelValues(name)
}

func (workqueueProvider) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return queueUnfinished.WithLabelValues(name)
}

func (workqueueProvider) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return queueLongestRunning.WithLabelValues(name)
}

func (workqueueProvider) NewRetriesMetric(name string) workqueue.CounterMetric {
	return queueRetries.WithLabelValues(name)
}
