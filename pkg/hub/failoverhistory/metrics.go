/*
Copyright The Flotilla Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package failoverhistory

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flotilla-io/flotilla/pkg/metrics"
)

// Metrics are the failover history's metrics.
type Metrics struct {
	// Duration is startTime → endTime of closed history items, by reason.
	Duration *prometheus.HistogramVec
	// Degraded is the degradedSeconds of closed history items, by reason.
	Degraded *prometheus.HistogramVec
}

// NewMetrics creates the metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	// 1 s to ~4.5 h: a failover takes from seconds (a healthy survivor)
	// to the graceful-eviction timeout and beyond (nothing to go to).
	buckets := prometheus.ExponentialBuckets(1, 2, 15)
	m := &Metrics{
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: metrics.Namespace, Subsystem: "hub",
			Name: "failover_duration_seconds", Help: "Time from a workload starting to leave a cluster (its graceful-eviction task) to every wanted replica available again, by reason; observed once per failover history item when it closes.",
			Buckets: buckets}, []string{"reason"}),
		Degraded: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: metrics.Namespace, Subsystem: "hub",
			Name: "failover_degraded_seconds", Help: "How long a workload had fewer available replicas than wanted during one failover (the item's degradedSeconds), by reason; observed when the item closes.",
			Buckets: append([]float64{0}, buckets...)}, []string{"reason"}),
	}
	reg.MustRegister(m.Duration, m.Degraded)
	return m
}
