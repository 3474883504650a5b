// Everything a deployment may need to change: selectors and thresholds.
// Override with `(import 'mixin.libsonnet') + { _config+:: { ... } }`.
{
  _config+:: {
    // Series of the hub replicas and of the agents (every agent pod, in
    // every member cluster).
    hubSelector: 'job="flotilla-hub"',
    agentSelector: 'job="flotilla-agent"',
    // The label naming the member cluster on agent series. The agent does
    // not export it: add it at scrape time (relabeling, or the external
    // label of a per-member Prometheus). Hub series carry `cluster`
    // themselves.
    clusterLabel: 'cluster',

    // A cluster's Ready condition not True for this long.
    clusterNotReadyFor: '5m',
    // A cluster tainted NoExecute (evicting its workloads) for this long.
    noExecuteThresholdSeconds: 3600,
    // The fleet guard out of Normal for this long.
    fleetGuardFor: '5m',
    // An agent's hub token expires within these. Tokens are renewed at 80%
    // of their lifetime (the default lifetime is 24h: renewed with 4.8h
    // left), so less than the warning threshold means renewal is overdue.
    tokenExpiryWarningSeconds: 4 * 3600,
    tokenExpiryCriticalSeconds: 3600,
    // Share of the hub's writes to its apiserver that fail.
    hubWriteErrorRatio: 0.05,
    hubWriteErrorFor: '15m',
    // Works not applied by a cluster's agent for this long.
    worksNotAppliedFor: '15m',
    // DNS traffic manager hosts with no address for this long.
    dnsAnswersEmptyFor: '10m',
    // Targets down / members without an agent leader for this long.
    hubDownFor: '5m',
    agentNoLeaderFor: '5m',

    // Runbooks: sections of docs/troubleshooting.md; %s is the alert name
    // in lower case (the heading's anchor).
    runbookURLPattern: 'https://github.com/flotilla-io/flotilla/blob/main/docs/troubleshooting.md#%s',

    // Grafana.
    dashboardTags: ['flotilla'],
    dashboardRefresh: '30s',
    dashboardTimezone: 'utc',
  },
}
