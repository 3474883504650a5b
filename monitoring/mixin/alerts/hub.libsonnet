// The hub process and its writes.
{
  name: 'flotilla-hub',
  rules(c):: [
    {
      alert: 'FlotillaHubDown',
      expr: 'absent(up{%(hubSelector)s} == 1)' % c,
      'for': c.hubDownFor,
      labels: { severity: 'critical' },
      annotations: {
        summary: 'No Flotilla hub replica is up.',
        description: 'Prometheus has scraped no hub replica ({%(hubSelector)s}) for %(hubDownFor)s: nothing watches cluster health, taints clusters or moves workloads.' % c,
      },
    },
    {
      alert: 'FlotillaHubWritesFailing',
      expr: |||
        sum(client:flotilla_api_write_request_errors:rate5m)
          /
        sum(client:flotilla_api_write_requests:rate5m)
          > %(hubWriteErrorRatio)g
      ||| % c,
      'for': c.hubWriteErrorFor,
      labels: { severity: 'warning' },
      annotations: {
        summary: "The hub's writes to its apiserver are failing.",
        description: '{{ $value | humanizePercentage }} of the hub controllers\' writes (create, update, patch, delete; not counting 404 and 409) have failed for %(hubWriteErrorFor)s: bindings, Works, taints or status are not being written.' % c,
      },
    },
  ],
}
