// The DNS traffic manager (hub, --dns-traffic-*).
{
  name: 'flotilla-dns-traffic',
  rules(c):: [
    {
      alert: 'FlotillaDNSAnswersEmpty',
      // max over replicas: each serves DNS from its own table (they agree
      // once their caches have synced). Hosts without an address are
      // answered, but with no records: worse than NXDOMAIN for a client.
      expr: 'max(flotilla_dns_traffic_hosts_without_addresses{%(hubSelector)s}) > 0' % c,
      'for': c.dnsAnswersEmptyFor,
      labels: { severity: 'warning' },
      annotations: {
        summary: 'The DNS traffic manager answers some hosts with no records.',
        description: '{{ $value }} MultiClusterIngress hosts have had no address for %(dnsAnswersEmptyFor)s: queries for them get NOERROR with no records, so clients reach nothing. Every backend cluster may be blocked by a Remedy or none serves the ingress.' % c,
      },
    },
  ],
}
