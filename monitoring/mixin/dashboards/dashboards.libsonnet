{
  grafanaDashboards+:: {
    'flotilla-fleet.json': (import 'fleet.libsonnet')($._config),
  },
}
