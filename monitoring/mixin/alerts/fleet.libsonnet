// Member clusters as the hub sees them: health, taints, fleet guard, Works.
{
  name: 'flotilla-fleet',
  rules(c):: [
    {
      alert: 'FlotillaClusterNotReady',
      // max over hub replicas: only the leader sets the series.
      expr: 'max by (cluster) (flotilla_hub_cluster_ready{%(hubSelector)s, status!="True"}) == 1' % c,
      'for': c.clusterNotReadyFor,
      labels: { severity: 'warning' },
      annotations: {
        summary: 'A member cluster is not Ready.',
        description: 'Cluster {{ $labels.cluster }} has not been Ready for more than %(clusterNotReadyFor)s: its agent is not renewing its Lease (Ready=Unknown) or reports the member apiserver unhealthy (Ready=False). New workloads are not scheduled there; after the failover eviction timeout it is tainted NoExecute and its workloads move.' % c,
      },
    },
    {
      alert: 'FlotillaClusterNoExecuteTooLong',
      // No `for`: the series is the taint's own timestamp, so its age is
      // right from the first evaluation, across hub restarts.
      expr: 'time() - max by (cluster) (flotilla_hub_cluster_noexecute_taint_since_timestamp_seconds{%(hubSelector)s}) > %(noExecuteThresholdSeconds)s' % c,
      labels: { severity: 'warning' },
      annotations: {
        summary: 'A member cluster has been tainted NoExecute for long.',
        description: 'Cluster {{ $labels.cluster }} has carried a NoExecute taint for {{ $value | humanizeDuration }}: workloads that do not tolerate it have been moved away and it runs at reduced capacity for the fleet. Repair it or remove it from the fleet.',
      },
    },
    {
      alert: 'FlotillaFleetGuardEngaged',
      expr: 'max by (state) (flotilla_hub_fleet_guard_state{%(hubSelector)s, state!="Normal"}) == 1' % c,
      'for': c.fleetGuardFor,
      labels: { severity: 'critical' },
      annotations: {
        summary: 'The fleet guard is holding back evictions.',
        description: 'The fleet guard has been {{ $labels.state }} for more than %(fleetGuardFor)s: so many clusters are not Ready that the hub slows evictions (PartialDisruption) or stops them and assumes it is itself cut off (FullDisruption). Failover is limited until the fleet recovers.' % c,
      },
    },
    {
      alert: 'FlotillaWorksNotApplied',
      expr: 'max by (cluster, state) (flotilla_hub_works_not_applied{%(hubSelector)s}) > 0' % c,
      'for': c.worksNotAppliedFor,
      labels: { severity: 'warning' },
      annotations: {
        summary: "Works are not applied on a member cluster.",
        description: '{{ $value }} Works for cluster {{ $labels.cluster }} have been {{ $labels.state }} (failed: the agent reports Applied=False; pending: no verdict on their current generation) for more than %(worksNotAppliedFor)s: what is scheduled there is not what runs there.' % c,
      },
    },
  ],
}
