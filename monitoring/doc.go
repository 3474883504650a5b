// Package monitoring holds the monitoring mixin's rendered outputs (alert
// rules, PrometheusRule, Grafana dashboards) and the tests that check them
// with a real promtool. The sources are in mixin/, rendered by hack/mixin.
package monitoring
