// The Flotilla monitoring mixin: Prometheus alerts, recording rules and
// Grafana dashboards, in the kubernetes-mixin layout. Plain jsonnet, no
// grafonnet (see README.md).
(import 'config.libsonnet') +
(import 'alerts/alerts.libsonnet') +
(import 'rules/rules.libsonnet') +
(import 'dashboards/dashboards.libsonnet')
