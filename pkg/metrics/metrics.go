// Package metrics holds the Prometheus registry every Flotilla binary serves
// on /metrics. Controllers register their collectors here, never on the global
// default registry, so tests can build fresh registries.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/flotilla-io/flotilla/pkg/version"
)

// Namespace prefixes every Flotilla metric name.
const Namespace = "flotilla"

// NewRegistry returns a registry with the Go runtime and process collectors
// and a flotilla_build_info gauge for the given component ("hub", "agent").
func NewRegistry(component string) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	buildInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace,
		Name:      "build_info",
		Help:      "Build of the running Flotilla binary; always 1.",
	}, []string{"component", "version", "git_commit"})
	buildInfo.WithLabelValues(component, version.Version, version.GitCommit).Set(1)
	reg.MustRegister(buildInfo)
	return reg
}

// SetOneHot sets vec to 1 for the series whose last label is current and to
// 0 for the other states, the usual way to export an enum-like state. labels
// are the series' other label values, in order.
func SetOneHot(vec *prometheus.GaugeVec, current string, states []string, labels ...string) {
	for _, s := range states {
		v := 0.0
		if s == current {
			v = 1
		}
		vec.WithLabelValues(append(append([]string(nil), labels...), s)...).Set(v)
	}
}
