package dnsendpoint

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	networkingv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/networking/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/dnstraffic"
)

// zone is a provider's zone holding exactly the records Endpoints
// publishes, answered as RFC 1034 4.3.2 and RFC 4592 say a zone answers
// (Route53, Cloud DNS, Azure DNS, BIND, ...): a name that exists, with
// records or as an empty non-terminal, is answered as itself, never by a
// wildcard; any other name by the wildcard at its closest encloser, if
// there is one, at any depth; else NXDOMAIN. It leaves out the TXT
// registry's own records, which only add names.
type zone struct {
	apex    string
	records map[string][]Endpoint // by owner name
	exists  map[string]bool       // owner names and their ancestors up to the apex
}

func newZone(apex string, eps []Endpoint) *zone {
	z := &zone{apex: apex, records: map[string][]Endpoint{}, exists: map[string]bool{apex: true}}
	for _, ep := range eps {
		z.records[ep.DNSName] = append(z.records[ep.DNSName], ep)
		for n := ep.DNSName; n != apex && strings.HasSuffix(n, "."+apex); n = n[strings.IndexByte(n, '.')+1:] {
			z.exists[n] = true
		}
	}
	return z
}

// answer is what a query for name (no trailing dot) gets: NXDOMAIN or not,
// and the addresses and CNAME targets at the name that answers it.
type answer struct {
	nxdomain bool
	addrs    []string // A and AAAA, sorted
	cnames   []string // sorted
}

func (a answer) String() string {
	if a.nxdomain {
		return "NXDOMAIN"
	}
	return fmt.Sprintf("addresses %q, cnames %q", a.addrs, a.cnames)
}

func (z *zone) answer(name string) answer {
	source := name
	if !z.exists[name] {
		source = ""
		for n := name; strings.Contains(n, "."); {
			n = n[strings.IndexByte(n, '.')+1:]
			if z.exists[n] { // the closest encloser
				if z.exists["*."+n] {
					source = "*." + n
				}
				break
			}
		}
		if source == "" {
			return answer{nxdomain: true}
		}
	}
	var a answer
	for _, ep := range z.records[source] {
		switch ep.RecordType {
		case RecordTypeA, RecordTypeAAAA:
			a.addrs = append(a.addrs, ep.Targets...)
		case RecordTypeCNAME:
			a.cnames = append(a.cnames, ep.Targets...)
		}
	}
	slices.Sort(a.addrs)
	slices.Sort(a.cnames)
	return answer{addrs: slices.Compact(a.addrs), cnames: slices.Compact(a.cnames)}
}

// embeddedAnswer is every answer the embedded server gives for name over
// queries numbered 0..255 (enough to meet each alternative of the small
// weights the generator writes), A and AAAA: NXDOMAIN or not, the union of
// the addresses and of the CNAME targets.
func embeddedAnswer(t *testing.T, s *dnstraffic.Snapshot, name string) answer {
	var a answer
	rcodes := map[int]bool{}
	for n := range uint64(256) {
		for _, qtype := range []uint16{dns.TypeA, dns.TypeAAAA} {
			req := new(dns.Msg)
			req.SetQuestion(name+".", qtype)
			resp := s.AnswerFor(req, n)
			rcodes[resp.Rcode] = true
			for _, rr := range resp.Answer {
				switch rr := rr.(type) {
				case *dns.A:
					a.addrs = append(a.addrs, rr.A.String())
				case *dns.AAAA:
					a.addrs = append(a.addrs, rr.AAAA.String())
				case *dns.CNAME:
					a.cnames = append(a.cnames, strings.TrimSuffix(rr.Target, "."))
				}
			}
		}
	}
	if len(rcodes) != 1 || !(rcodes[dns.RcodeSuccess] || rcodes[dns.RcodeNameError]) {
		t.Fatalf("%s: the embedded server answers rcodes %v", name, rcodes)
	}
	a.nxdomain = rcodes[dns.RcodeNameError]
	slices.Sort(a.addrs)
	slices.Sort(a.cnames)
	a.addrs, a.cnames = slices.Compact(a.addrs), slices.Compact(a.cnames)
	return a
}

// agree says whether the provider's answer (from the published records) is
// the embedded server's, up to what a record set cannot express: the same
// existence and the same addresses; CNAMEs only where there is no address
// (the embedded server alternates a hostname cluster's CNAME with the IP
// clusters' addresses query by query, a provider cannot), each one the
// embedded server gives, all of them when weights are published.
func agree(provider, embedded answer, weighted bool) bool {
	switch {
	case provider.nxdomain != embedded.nxdomain, !slices.Equal(provider.addrs, embedded.addrs):
		return false
	case len(provider.addrs) > 0:
		return len(provider.cnames) == 0
	case weighted:
		return slices.Equal(provider.cnames, embedded.cnames)
	case len(embedded.cnames) == 0:
		return len(provider.cnames) == 0
	}
	return len(provider.cnames) == 1 && slices.Contains(embedded.cnames, provider.cnames[0])
}

// checkBothOutputsAgree publishes mcis as the DNSEndpoint controller does
// (TrafficOf, Endpoints; with and without a weight property) and compares,
// for every name in queries, the zone of those records with the embedded
// server's table of the same ingresses.
func checkBothOutputsAgree(t *testing.T, mcis []*networkingv1alpha1.MultiClusterIngress, rules dnstraffic.DomainRules, queries []string) {
	t.Helper()
	snap, _ := dnstraffic.NewSnapshot(mcis, []string{"example.com."}, 5*time.Second, rules)
	for _, rec := range []Records{{TTL: 5}, {TTL: 5, WeightProperty: "aws/weight"}} {
		var eps []Endpoint
		for _, m := range mcis {
			eps = append(eps, Endpoints(TrafficOf(m, mcis, rules).Hosts, rec)...)
		}
		z := newZone("example.com", eps)
		for _, q := range queries {
			provider, embedded := z.answer(q), embeddedAnswer(t, snap, q)
			if !agree(provider, embedded, rec.WeightProperty != "") {
				var spec []string
				for _, m := range mcis {
					spec = append(spec, fmt.Sprintf("%s/%s@%d hosts %v strategy %+v clusters %+v", m.Namespace, m.Name, m.CreationTimestamp.Unix(), hostsOf(m), m.Spec.Strategy, m.Status.Clusters))
				}
				t.Fatalf("%s (records %+v): the provider's zone answers %v, the embedded server %v\npublished: %+v\ningresses:\n%s",
					q, rec, provider, embedded, eps, strings.Join(spec, "\n"))
			}
		}
	}
}

func hostsOf(m *networkingv1alpha1.MultiClusterIngress) []string {
	var out []string
	for _, r := range m.Spec.Rules {
		out = append(out, r.Host)
	}
	return out
}

// TestBlockedHostIsNotAnsweredByAWildcard: an exact host whose clusters are
// all blocked is NODATA in both outputs, never another owner's wildcard:
// published without records, the name would not exist in the provider's
// zone and the wildcard would answer it (RFC 4592).
func TestBlockedHostIsNotAnsweredByAWildcard(t *testing.T) {
	wild := serving(ingress("team-c", "wild", 1, "*.example.com"), "m1", 1, "10.0.3.1")
	blocked := notServing(ingress("team-a", "web", 2, "web.example.com"), "m1", networkingv1alpha1.TrafficReasonBlocked)
	mcis := []*networkingv1alpha1.MultiClusterIngress{wild, blocked}
	var eps []Endpoint
	for _, m := range mcis {
		eps = append(eps, Endpoints(TrafficOf(m, mcis, dnstraffic.DomainRules{}).Hosts, Records{TTL: 5})...)
	}
	z := newZone("example.com", eps)
	if got := z.answer("web.example.com"); got.nxdomain || len(got.addrs)+len(got.cnames) > 0 {
		t.Fatalf("web.example.com, every cluster blocked: the provider's zone answers %v, want NODATA (published %+v)", got, eps)
	}
	if got := z.answer("other.example.com"); !slices.Equal(got.addrs, []string{"10.0.3.1"}) {
		t.Fatalf("other.example.com: %v, want the wildcard's address", got)
	}
	snap, _ := dnstraffic.NewSnapshot(mcis, []string{"example.com."}, 5*time.Second, dnstraffic.DomainRules{})
	if got := embeddedAnswer(t, snap, "web.example.com"); got.nxdomain || len(got.addrs)+len(got.cnames) > 0 {
		t.Fatalf("web.example.com, every cluster blocked: the embedded server answers %v, want NODATA", got)
	}
	checkBothOutputsAgree(t, mcis, dnstraffic.DomainRules{}, []string{"web.example.com", "other.example.com", "a.b.example.com", "x.web.example.com"})
}

// choices reads a fuzz input as a stream of small choices; past its end
// every choice is 0.
type choices []byte

func (c *choices) next(n int) int {
	if len(*c) == 0 {
		return 0
	}
	b := (*c)[0]
	*c = (*c)[1:]
	return int(b) % n
}

// fuzzLabels spell hosts in example.com; spellings vary case and trailing
// dots (the hub compares hosts canonically).
var fuzzLabels = []string{"a", "b", "web", "*"}

// ingressesOf turns a fuzz input into tenants' ingresses under example.com:
// exact and wildcard hosts up to three labels deep, in several spellings,
// claimed from three namespaces at three ages, each ingress serving from
// up to three clusters (IPs, hostname load balancers, or nothing: all
// blocked), with small weights or a failover strategy; and maybe a rule
// that only team-0 may claim names within b.example.com; and maybe subtree
// ownership (--ingress-host-subtree-ownership).
func ingressesOf(data []byte) ([]*networkingv1alpha1.MultiClusterIngress, dnstraffic.DomainRules, []string) {
	c := choices(data)
	var rules dnstraffic.DomainRules
	if c.next(2) == 1 {
		rules, _ = dnstraffic.ParseDomainRules([]string{"b.example.com=team-0"})
	}
	rules.Subtrees = c.next(2) == 1
	host := func() string {
		var labels []string // leftmost first
		for i := range 1 + c.next(3) {
			l := fuzzLabels[c.next(len(fuzzLabels))]
			if l == "*" && i > 0 { // a wildcard is a whole first label only
				l = "a"
			}
			labels = append(labels, l)
		}
		h := strings.Join(labels, ".") + ".example.com"
		switch c.next(4) {
		case 1:
			h = strings.ToUpper(h)
		case 2:
			h += ".."
		}
		return h
	}
	var mcis []*networkingv1alpha1.MultiClusterIngress
	queries := map[string]bool{"x.example.com": true, "x.y.example.com": true, "a.x.y.example.com": true}
	for i := range 1 + c.next(5) {
		var hosts []string
		for range 1 + c.next(3) {
			h := host()
			hosts = append(hosts, h)
			canonical := strings.ToLower(strings.TrimRight(h, "."))
			queries[canonical] = true
			queries[strings.Replace(canonical, "*", "q", 1)] = true
			queries["z."+canonical] = true
			queries["z.q."+strings.TrimPrefix(canonical, "*.")] = true
		}
		m := ingress(fmt.Sprintf("team-%d", c.next(3)), fmt.Sprintf("mci-%d", i), c.next(3), hosts...)
		switch c.next(3) {
		case 1:
			m.Spec.Strategy = &networkingv1alpha1.TrafficStrategy{Type: networkingv1alpha1.StrategyRoundRobin, Weight: map[string]int32{"m0": 1, "m1": 2, "m2": 1}}
		case 2:
			m.Spec.Strategy = &networkingv1alpha1.TrafficStrategy{Type: networkingv1alpha1.StrategyFailover, DNSTtlSeconds: 30}
		}
		for cl := range 1 + c.next(3) {
			cluster := fmt.Sprintf("m%d", cl)
			switch c.next(4) {
			case 0:
				notServing(m, cluster, networkingv1alpha1.TrafficReasonBlocked)
			case 1:
				serving(m, cluster, int32(1+c.next(2)), fmt.Sprintf("lb-%d-%d.example.net", i, cl))
			case 2:
				serving(m, cluster, int32(1+c.next(2)), netip.AddrFrom4([4]byte{10, byte(i), byte(cl), 1}).String(), fmt.Sprintf("2001:db8::%d:%d", i, cl))
			default:
				serving(m, cluster, int32(1+c.next(2)), netip.AddrFrom4([4]byte{10, byte(i), byte(cl), 1}).String())
			}
		}
		mcis = append(mcis, m)
	}
	return mcis, rules, slices.Sorted(func(yield func(string) bool) {
		for q := range queries {
			if !yield(q) {
				return
			}
		}
	})
}

// FuzzBothOutputsAgree: for random ingress sets (hosts exact and wildcard,
// spelled in several ways, blocks, several claimants, namespace rules),
// every name answers the same from the embedded DNS server as from a
// provider's zone holding exactly the records Endpoints publishes, under
// RFC 4592: the same existence, the same addresses. In particular a host
// some ingress names exactly never gets another owner's addresses in
// either.
func FuzzBothOutputsAgree(f *testing.F) {
	for _, seed := range [][]byte{
		{},
		{0, 1, 3, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0},
		{1, 3, 2, 3, 1, 2, 0, 1, 2, 1, 2, 1, 0, 2, 1},
		{0, 4, 2, 2, 1, 0, 2, 3, 1, 0, 3, 2, 2, 1, 1, 2, 0, 1, 3, 3, 0, 2, 1, 0, 2, 2, 1, 3},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 256 {
			return // more choices than an input reads
		}
		mcis, rules, queries := ingressesOf(data)
		checkBothOutputsAgree(t, mcis, rules, queries)
	})
}
