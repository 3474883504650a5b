// Alerts, each with a runbook section in docs/troubleshooting.md.
local groups = [
  import 'fleet.libsonnet',
  import 'hub.libsonnet',
  import 'agent.libsonnet',
  import 'dns.libsonnet',
];

{
  prometheusAlerts+:: {
    groups+: [
      {
        name: g.name,
        rules: [
          r {
            annotations+: {
              runbook_url: $._config.runbookURLPattern % std.asciiLower(r.alert),
            },
          }
          for r in g.rules($._config)
        ],
      }
      for g in groups
    ],
  },
}
