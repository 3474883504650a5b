// Recording rules the alerts and dashboards share.
{
  prometheusRules+:: {
    groups+: [
      {
        name: 'flotilla.rules',
        rules: [
          {
            // Writes (create, update, patch, delete) each hub controller makes.
            record: 'client:flotilla_api_write_requests:rate5m',
            expr: 'sum by (client) (rate(flotilla_api_requests_total{%(hubSelector)s, method=~"POST|PUT|PATCH|DELETE"}[5m]))' % $._config,
          },
          {
            // Failed writes: 409 (optimistic concurrency, retried) and 404
            // (deleting what is gone) are part of normal work.
            record: 'client:flotilla_api_write_request_errors:rate5m',
            expr: 'sum by (client) (rate(flotilla_api_requests_total{%(hubSelector)s, method=~"POST|PUT|PATCH|DELETE", code!~"2..|404|409"}[5m]))' % $._config,
          },
        ] + [
          {
            record: 'cluster_quantile:flotilla_agent_work_apply_duration_seconds:histogram_quantile',
            expr: 'histogram_quantile(%(q)s, sum by (%(clusterLabel)s, le) (rate(flotilla_agent_work_apply_duration_seconds_bucket{%(agentSelector)s}[5m])))' % ($._config { q: q }),
            labels: { quantile: q },
          }
          for q in ['0.5', '0.9', '0.99']
        ],
      },
    ],
  },
}
