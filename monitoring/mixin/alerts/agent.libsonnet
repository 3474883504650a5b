// Agents: their leader per member and their hub credential.
{
  name: 'flotilla-agent',
  rules(c):: [
    {
      alert: 'FlotillaAgentNoLeader',
      // Agents up but none leading, or no agent scraped at all (then
      // flotilla_agent_leader has no series to sum).
      expr: |||
        sum by (%(clusterLabel)s) (flotilla_agent_leader{%(agentSelector)s}) == 0
        or
        sum by (%(clusterLabel)s) (up{%(agentSelector)s}) == 0
      ||| % c,
      'for': c.agentNoLeaderFor,
      labels: { severity: 'critical' },
      annotations: {
        summary: 'No agent leads a member cluster.',
        description: 'No agent pod of cluster {{ $labels.%(clusterLabel)s }} has led (or been scraped) for %(agentNoLeaderFor)s: nobody renews its Lease on the hub (it will go Unknown and be failed over) and nobody applies its Works.' % c,
      },
    },
    {
      alert: 'FlotillaAgentHubTokenExpiring',
      // Time left first, so $value is it; 0 is a credential the agent
      // does not renew (a client certificate).
      expr: |||
        flotilla_agent_hub_token_expiration_timestamp_seconds{%(agentSelector)s} - time() < %(tokenExpiryWarningSeconds)s
        and
        flotilla_agent_hub_token_expiration_timestamp_seconds{%(agentSelector)s} > 0
      ||| % c,
      'for': '10m',
      labels: { severity: 'warning' },
      annotations: {
        summary: "An agent's hub token expires soon and has not been renewed.",
        description: 'The hub token of agent {{ $labels.instance }} (cluster {{ $labels.%(clusterLabel)s }}) expires in less than %(h)s hours: its renewal is overdue. When it expires the agent can no longer renew its Lease and the cluster is failed over.' % (c { h: c.tokenExpiryWarningSeconds / 3600 }),
      },
    },
    {
      alert: 'FlotillaAgentHubTokenExpiringCritical',
      // Time left first, so $value is it; 0 is a credential the agent
      // does not renew (a client certificate).
      expr: |||
        flotilla_agent_hub_token_expiration_timestamp_seconds{%(agentSelector)s} - time() < %(tokenExpiryCriticalSeconds)s
        and
        flotilla_agent_hub_token_expiration_timestamp_seconds{%(agentSelector)s} > 0
      ||| % c,
      labels: { severity: 'critical' },
      annotations: {
        summary: "An agent's hub token expires within the hour.",
        description: 'The hub token of agent {{ $labels.instance }} (cluster {{ $labels.%(clusterLabel)s }}) expires in {{ $value | humanizeDuration }}. Replace it now (hub agent-kubeconfig) or the cluster loses its Lease and is failed over.' % c,
      },
    },
  ],
}
