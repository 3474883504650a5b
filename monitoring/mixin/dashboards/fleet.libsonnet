// The fleet at a glance: one dashboard, a row per concern of issue 19.
local g = import 'lib.libsonnet';

function(c)
  local hub = c.hubSelector;
  local cl = '%s=~"$cluster"' % c.clusterLabel;
  local agent = '%s, %s' % [c.agentSelector, cl];
  local hubCl = '%s, cluster=~"$cluster"' % hub;
  local red = [{ color: 'green', value: null }, { color: 'red', value: 1 }];
  local amber = [{ color: 'green', value: null }, { color: 'orange', value: 1 }];

  g.dashboard(
    'flotilla-fleet',
    'Flotilla / Fleet',
    'Member clusters, taints, evictions and failovers, the fleet guard, agents, Work apply and the DNS traffic manager. Generated from monitoring/mixin; do not edit by hand.',
    c,
    templating=[g.queryVariable('cluster', 'Cluster', 'label_values(flotilla_hub_cluster_ready{%s}, cluster)' % hub)],
    rows=[
      g.row('Fleet health', [
        g.stat('Clusters Ready', 'Clusters whose Ready condition is True.', [g.target('sum(max by (cluster) (flotilla_hub_cluster_ready{%s, status="True"}))' % hubCl, instant=true)]),
        g.stat('Clusters not Ready', 'Clusters whose Ready condition is False or Unknown.', [g.target('sum(max by (cluster) (flotilla_hub_cluster_ready{%s, status!="True"})) or vector(0)' % hubCl, instant=true)], thresholds=red),
        g.stat('Hub replicas up', 'Hub replicas Prometheus scrapes (every replica serves metrics; only the leader runs controllers).', [g.target('sum(up{%s})' % hub, instant=true)]),
        g.timeseries('Ready status by cluster', '1 while the cluster has that Ready status.', [g.target('max by (cluster, status) (flotilla_hub_cluster_ready{%s}) == 1' % hubCl, '{{cluster}} {{status}}')], w=12),
        g.timeseries('Lease age', "Time since the hub last saw each cluster's Lease advance (set at Lease updates and at expiry).", [g.target('max by (cluster) (flotilla_hub_cluster_lease_age_seconds{%s})' % hubCl, '{{cluster}}')], unit='s', w=12),
        g.timeseries('Lease expiry to Unknown (p99)', 'Time from a Lease expiring to Ready=Unknown being written.', [g.target('histogram_quantile(0.99, sum by (le) (rate(flotilla_hub_lease_expiry_to_unknown_seconds_bucket{%s}[$__rate_interval])))' % hub, 'p99')], unit='s', w=12),
      ]),
      g.row('Taints', [
        g.stat('Clusters NoExecute', 'Clusters carrying a NoExecute taint: their workloads are being moved away.', [g.target('count(flotilla_hub_cluster_noexecute_taint_since_timestamp_seconds{%s}) or vector(0)' % hubCl, instant=true)], thresholds=amber),
        g.table('NoExecute for', 'How long each tainted cluster has carried its oldest NoExecute taint.', [g.target('time() - max by (cluster) (flotilla_hub_cluster_noexecute_taint_since_timestamp_seconds{%s})' % hubCl, '{{cluster}}', instant=true)], w=8),
        g.timeseries('Taint changes', 'Taints added and removed, by key, effect and action.', [g.target('sum by (key, effect, action) (increase(flotilla_hub_cluster_taint_changes_total{%s}[$__rate_interval]))' % hub, '{{action}} {{key}}:{{effect}}')], w=12),
      ]),
      g.row('Evictions and failovers', [
        g.timeseries('Evictions', 'Evictions and attempts by reason and result (rate_limited: waiting for the region limiter; held: the fleet guard admits none).', [g.target('sum by (reason, result) (rate(flotilla_eviction_evictions_total{%s}[$__rate_interval]))' % hub, '{{reason}} {{result}}')], unit='ops'),
        g.timeseries('Graceful eviction tasks', 'Open graceful eviction tasks, and eviction queue depth.', [
          g.target('sum by (purge_mode) (flotilla_eviction_graceful_tasks{%s})' % hub, 'open {{purge_mode}}'),
          g.target('max(flotilla_eviction_queue_depth{%s})' % hub, 'taint manager queue'),
        ]),
        g.timeseries('Graceful task outcomes', 'Ended graceful eviction tasks by outcome (grace_expired: the replacement was not healthy in time).', [g.target('sum by (outcome) (increase(flotilla_eviction_graceful_task_duration_seconds_count{%s}[$__rate_interval]))' % hub, '{{outcome}}')]),
        g.timeseries('Failover duration (p50, p90)', 'From a failover history item opening to every wanted replica available again.', [
          g.target('histogram_quantile(0.5, sum by (le, reason) (rate(flotilla_hub_failover_duration_seconds_bucket{%s}[$__rate_interval])))' % hub, 'p50 {{reason}}'),
          g.target('histogram_quantile(0.9, sum by (le, reason) (rate(flotilla_hub_failover_duration_seconds_bucket{%s}[$__rate_interval])))' % hub, 'p90 {{reason}}'),
        ], unit='s'),
        g.timeseries('Failover degraded time (p90)', 'How long, per failover, fewer replicas were available than wanted.', [g.target('histogram_quantile(0.9, sum by (le, reason) (rate(flotilla_hub_failover_degraded_seconds_bucket{%s}[$__rate_interval])))' % hub, '{{reason}}')], unit='s'),
        g.timeseries('Taint to replacement Healthy (p50, p90)', 'From a NoExecute taint to the replacement placement Healthy.', [
          g.target('histogram_quantile(0.5, sum by (le) (rate(flotilla_eviction_taint_to_replacement_healthy_seconds_bucket{%s}[$__rate_interval])))' % hub, 'p50'),
          g.target('histogram_quantile(0.9, sum by (le) (rate(flotilla_eviction_taint_to_replacement_healthy_seconds_bucket{%s}[$__rate_interval])))' % hub, 'p90'),
        ], unit='s'),
        g.timeseries('Failback', 'Failbacks started and in progress fleet-wide.', [
          g.target('sum(increase(flotilla_failback_started_total{%s}[$__rate_interval]))' % hub, 'started'),
          g.target('max(flotilla_failback_in_progress{%s})' % hub, 'in progress'),
        ], w=12),
        g.timeseries('Scheduling attempts', 'Scheduling decisions by result and schedule type (a failover shows as ReplicasChanged).', [g.target('sum by (result, schedule_type) (rate(flotilla_scheduler_schedule_attempts_total{%s}[$__rate_interval]))' % hub, '{{result}} {{schedule_type}}')], unit='ops', w=12),
      ]),
      g.row('Fleet guard', [
        g.stat('Fleet guard', 'The guard state of the whole fleet (PartialDisruption slows evictions, FullDisruption stops them).', [g.target('max by (state) (flotilla_hub_fleet_guard_state{%s}) == 1' % hub, '{{state}}', instant=true)]) {
          options+: { textMode: 'name' },
        },
        g.timeseries('Region guard state', '1 for each region in that guard state (region "" holds the clusters without spec.region).', [g.target('max by (region, state) (flotilla_hub_fleet_guard_region_state{%s, state!="Normal"}) == 1' % hub, '{{region}} {{state}}')], w=10),
        g.timeseries('Unhealthy clusters by region', 'Clusters not Ready, per region (region "" is the whole fleet).', [g.target('max by (region) (flotilla_hub_unhealthy_clusters{%s})' % hub, '{{region}}')], w=10),
      ]),
      g.row('Agent leaders and hub writes', [
        g.timeseries('Agent leaders per cluster', 'Agent pods leading each member: exactly 1 is right.', [g.target('sum by (%s) (flotilla_agent_leader{%s})' % [c.clusterLabel, agent], '{{%s}}' % c.clusterLabel)]),
        g.timeseries('Agent hub request errors', 'Failed agent requests to the hub by operation and reason (Unauthorized: an expired or revoked token).', [g.target('sum by (%s, operation, reason) (rate(flotilla_agent_hub_request_errors_total{%s}[$__rate_interval]))' % [c.clusterLabel, agent], '{{%s}} {{operation}} {{reason}}' % c.clusterLabel)], unit='ops'),
        g.timeseries('Agent hub token time left', "Time until each agent process's hub token expires (renewed at 80% of its lifetime).", [g.target('(flotilla_agent_hub_token_expiration_timestamp_seconds{%s} > 0) - time()' % agent, '{{instance}}')], unit='s'),
        g.timeseries('Hub API requests by client and code', "Requests of each hub controller to the host apiserver (409: retried conflicts).", [g.target('sum by (client, code) (rate(flotilla_api_requests_total{%s}[$__rate_interval]))' % hub, '{{client}} {{code}}')], unit='reqps', w=12),
        g.timeseries('Hub write error ratio', 'Failed writes (not 404/409) over writes, per client; the FlotillaHubWritesFailing alert uses the fleet-wide ratio.', [g.target('client:flotilla_api_write_request_errors:rate5m / client:flotilla_api_write_requests:rate5m', '{{client}}')], unit='percentunit', w=12),
        g.timeseries('Hub object writes', 'Works written by the binding controller, and cluster-lifecycle writes (flat in a steady fleet).', [
          g.target('sum by (operation) (rate(flotilla_binding_work_operations_total{%s}[$__rate_interval]))' % hub, 'Work {{operation}}'),
          g.target('sum by (kind, operation) (rate(flotilla_hub_cluster_object_writes_total{%s}[$__rate_interval]))' % hub, '{{kind}} {{operation}}'),
        ], unit='ops', w=12),
        g.timeseries('Agent status and Lease writes', 'Lease renewals and Cluster status writes by result.', [
          g.target('sum by (%s, result) (rate(flotilla_agent_lease_renewals_total{%s}[$__rate_interval]))' % [c.clusterLabel, agent], '{{%s}} lease {{result}}' % c.clusterLabel),
          g.target('sum by (%s, result) (rate(flotilla_agent_status_writes_total{%s}[$__rate_interval]))' % [c.clusterLabel, agent], '{{%s}} status {{result}}' % c.clusterLabel),
        ], unit='ops', w=12),
      ]),
      g.row('Work apply', [
        g.timeseries('Work apply duration', 'Time to apply every manifest of one Work, per cluster (recorded quantiles).', [g.target('cluster_quantile:flotilla_agent_work_apply_duration_seconds:histogram_quantile{%s}' % cl, '{{%s}} p{{quantile}}' % c.clusterLabel)], unit='s'),
        g.timeseries('Works not applied', 'Works the agent has not applied at their current generation (failed: Applied=False; pending: no verdict yet).', [g.target('max by (cluster, state) (flotilla_hub_works_not_applied{%s}) > 0' % hubCl, '{{cluster}} {{state}}')]),
        g.timeseries('Manifest applies', 'What happened to each manifest (Conflict, Refused, ApplyFailed… deserve a look).', [g.target('sum by (%s, result) (rate(flotilla_agent_manifest_applies_total{%s}[$__rate_interval]))' % [c.clusterLabel, agent], '{{%s}} {{result}}' % c.clusterLabel)], unit='ops'),
      ]),
      g.row('DNS traffic manager', [
        g.stat('Hosts', 'Hosts (wildcards included) the DNS traffic manager answers for.', [g.target('max(flotilla_dns_traffic_hosts{%s})' % hub, instant=true)]),
        g.stat('Hosts without addresses', 'Hosts answered with no records (no backend, or every backend cluster blocked).', [g.target('max(flotilla_dns_traffic_hosts_without_addresses{%s})' % hub, instant=true)], thresholds=red),
        g.stat('Host conflicts', 'Hosts claimed by more than one MultiClusterIngress (only the oldest is served).', [g.target('max(flotilla_dns_traffic_host_conflicts{%s})' % hub, instant=true)], thresholds=amber),
        g.timeseries('Queries by result', 'DNS queries by reply (nodata: NOERROR with no records; dropped: over --dns-traffic-max-in-flight).', [g.target('sum by (result) (rate(flotilla_dns_traffic_queries_total{%s}[$__rate_interval]))' % hub, '{{result}}')], unit='reqps', w=12),
        g.timeseries('Answer records', 'Records answered, by type.', [g.target('sum by (type) (rate(flotilla_dns_traffic_answer_records_total{%s}[$__rate_interval]))' % hub, '{{type}}')], unit='ops', w=12),
        g.timeseries('Query latency (p50, p99)', 'From a query reaching the handler to its reply written.', [
          g.target('histogram_quantile(0.5, sum by (le) (rate(flotilla_dns_traffic_request_duration_seconds_bucket{%s}[$__rate_interval])))' % hub, 'p50'),
          g.target('histogram_quantile(0.99, sum by (le) (rate(flotilla_dns_traffic_request_duration_seconds_bucket{%s}[$__rate_interval])))' % hub, 'p99'),
        ], unit='s', w=12),
      ]),
    ],
  )
