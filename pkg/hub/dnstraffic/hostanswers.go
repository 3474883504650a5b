package dnstraffic

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"time"

	networkingv1 "k8s.io/api/networking/v1"

	networkingv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/networking/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hostnames"
)

// Target is one cluster's part of a host's answers.
type Target struct {
	// Cluster is the cluster's name; "" when the ingress's status predates
	// per-cluster traffic (status.clusters) and only lists addresses.
	Cluster string
	// Weight is the target's relative share of the answers, at least 1.
	Weight int32
	// IPs are its load balancers' addresses, sorted: IPv4 are answered as
	// A records, IPv6 as AAAA.
	IPs []netip.Addr
	// Hostname is its load balancer's DNS name (lowercase FQDN), answered
	// as a CNAME; set only when the target has no IP. RFC 1034 lets no
	// other data share a name with a CNAME, so one answer carries either
	// addresses or exactly one CNAME (see HostAnswer.Weighted).
	Hostname string
}

// HostAnswer is what the DNS answers for one host, decided from the
// host's owner only. The embedded DNS server and any other publisher
// (e.g. ExternalDNS DNSEndpoint objects) answer from it.
type HostAnswer struct {
	// Host is the host as an ownership key (HostKeys): canonical, a
	// wildcard keeps its "*." label. Every output publishes exactly it.
	Host string
	// Owner is the ingress whose status the answers come from.
	Owner IngressRef
	// TTL of the answers; 0 means the server's default.
	TTL time.Duration
	// Weighted says each answer holds one target, picked in the shares of
	// the weights (spec.strategy.weight). Otherwise every IP target is in
	// one answer together (clients spread over them), and a hostname
	// target gets its own answers, as many as one IP target would.
	Weighted bool
	// Targets are the clusters that serve, sorted by cluster; empty when
	// none does (the host exists but has no records).
	Targets []Target
}

// IgnoredHost is a host claimed by an ingress that gets no answers from
// it, and why.
type IgnoredHost struct {
	Host, Reason string
}

// HostAnswers decides the answers of every host the ingresses claim: each
// host gets the targets of its owner (Owners, under rules) only, so no
// ingress can add or change anything in a host another ingress owns,
// through any field. It also returns the hosts it left out. It is pure and
// deterministic: the same ingresses give the same answers, in host order.
func HostAnswers(mcis []*networkingv1alpha1.MultiClusterIngress, rules DomainRules) ([]HostAnswer, []IgnoredHost) {
	var ignored []IgnoredHost
	var out []HostAnswer
	owners := Owners(mcis, rules)
	for _, mci := range mcis {
		ref := RefOf(mci)
		for _, c := range owners.Conflicts(ref) {
			if c.Above != "" {
				ignored = append(ignored, IgnoredHost{c.Host, fmt.Sprintf("claimed by %s but beneath %s, owned by %s of another namespace (--ingress-host-subtree-ownership)", ref, c.Above, c.Owner)})
				continue
			}
			ignored = append(ignored, IgnoredHost{c.Host, fmt.Sprintf("claimed by %s but owned by %s, an older MultiClusterIngress", ref, c.Owner)})
		}
		for _, na := range owners.NotAllowed(ref) {
			ignored = append(ignored, IgnoredHost{na.Host, fmt.Sprintf("claimed by %s, whose namespace may not claim names within %s (--ingress-host-namespaces)", ref, na.Domain)})
		}
		keys, invalid := HostKeys(&mci.Spec.IngressSpec)
		for _, h := range invalid {
			ignored = append(ignored, IgnoredHost{h, "not a valid DNS name"})
		}
		var targets []Target
		var ttl time.Duration
		weighted := false
		for _, k := range keys {
			if !owners.Owns(ref, k) {
				continue // reported above
			}
			if targets == nil { // once per ingress, shared read-only by its hosts
				targets = Targets(&mci.Status)
				if st := mci.Spec.Strategy; st != nil {
					ttl = time.Duration(st.DNSTtlSeconds) * time.Second
					weighted = st.Type == networkingv1alpha1.StrategyRoundRobin && len(st.Weight) > 0 && len(mci.Status.Clusters) > 0
				}
				if targets == nil {
					targets = []Target{}
				}
			}
			out = append(out, HostAnswer{Host: k, Owner: ref, TTL: ttl, Weighted: weighted, Targets: targets})
		}
	}
	slices.SortFunc(out, func(a, b HostAnswer) int { return cmp.Compare(a.Host, b.Host) })
	return out, ignored
}

// Targets reads the serving clusters of an ingress's status: each cluster
// of status.clusters that serves, with its weight and addresses. A status
// without clusters (written before the hub decided per cluster) yields
// one target holding status.loadBalancer's IPs.
func Targets(status *networkingv1alpha1.MultiClusterIngressStatus) []Target {
	var out []Target
	if len(status.Clusters) == 0 {
		// Written by a hub that did not decide per cluster: its
		// addresses, answered as that hub did (IPs only).
		if ips, _ := addresses(status.LoadBalancer.Ingress); len(ips) > 0 {
			out = append(out, Target{Weight: 1, IPs: ips})
		}
		return out
	}
	for _, c := range status.Clusters {
		if !c.Serving {
			continue
		}
		t := Target{Cluster: c.Name, Weight: max(c.Weight, 1)}
		ips, names := addresses(c.Addresses)
		switch {
		case len(ips) > 0:
			t.IPs = ips
		case len(names) > 0:
			t.Hostname = names[0]
		default:
			continue // serves, but has no address yet
		}
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b Target) int { return cmp.Compare(a.Cluster, b.Cluster) })
	return out
}

// addresses splits load-balancer entries into valid IPs and valid
// hostnames (canonical, as an FQDN), each sorted and deduplicated. Garbage
// is dropped: a status is written from what members report.
func addresses(lbs []networkingv1.IngressLoadBalancerIngress) ([]netip.Addr, []string) {
	var ips []netip.Addr
	var names []string
	for _, lb := range lbs {
		if a, err := netip.ParseAddr(lb.IP); err == nil && lb.IP != "" {
			a = a.Unmap()
			if a.Zone() == "" {
				ips = append(ips, a)
			}
			continue
		}
		if h, err := hostnames.Canonical(lb.Hostname); err == nil && !hostnames.IsWildcard(h) {
			names = append(names, h+".")
		}
	}
	slices.SortFunc(ips, netip.Addr.Compare)
	slices.Sort(names)
	return slices.Compact(ips), slices.Compact(names)
}
