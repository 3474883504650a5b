package dnstraffic

import (
	"fmt"
	"maps"
	"math"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	networkingv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/networking/v1alpha1"
)

// servingMCI is an MCI whose status lists serving clusters, each with its
// weight and addresses (IPs or hostnames).
func servingMCI(name, host string, clusters map[string][]string, weights map[string]int32) *networkingv1alpha1.MultiClusterIngress {
	m := newMCI(name, []string{host})
	for _, c := range sortedKeys(clusters) {
		ct := networkingv1alpha1.ClusterTraffic{Name: c, Serving: true, Weight: max(weights[c], 1)}
		for _, a := range clusters[c] {
			if _, err := parseIP(a); err == nil {
				ct.Addresses = append(ct.Addresses, networkingv1.IngressLoadBalancerIngress{IP: a})
			} else {
				ct.Addresses = append(ct.Addresses, networkingv1.IngressLoadBalancerIngress{Hostname: a})
			}
		}
		m.Status.Clusters = append(m.Status.Clusters, ct)
	}
	if len(weights) > 0 {
		m.Spec.Strategy = &networkingv1alpha1.TrafficStrategy{Type: networkingv1alpha1.StrategyRoundRobin, Weight: weights}
	}
	return m
}

// share counts, over n numbered queries, how often each answer (its first
// record's data) comes back.
func share(t *testing.T, s *Snapshot, qname string, qtype uint16, n int) map[string]int {
	t.Helper()
	counts := map[string]int{}
	for i := range n {
		resp := s.AnswerFor(query(qname, qtype), uint64(i))
		if resp.Rcode != dns.RcodeSuccess {
			t.Fatalf("rcode %s", dns.RcodeToString[resp.Rcode])
		}
		key := "NODATA"
		if len(resp.Answer) > 0 {
			switch rr := resp.Answer[0].(type) {
			case *dns.A:
				key = rr.A.String()
			case *dns.AAAA:
				key = rr.AAAA.String()
			case *dns.CNAME:
				key = "CNAME " + rr.Target
			}
		}
		counts[key]++
	}
	return counts
}

// TestWeightedShares: over 10,000 queries each cluster is answered within
// ±5% of its weight's share, and each answer holds one cluster.
func TestWeightedShares(t *testing.T) {
	for _, weights := range []map[string]int32{
		{"member1": 70, "member2": 30},
		{"member1": 1, "member2": 1, "member3": 1},
		{"member1": 5, "member2": 900, "member3": 95},
	} {
		clusters := map[string][]string{"member1": {"10.0.0.1"}, "member2": {"10.0.0.2"}, "member3": {"10.0.0.3"}}
		for c := range clusters {
			if _, ok := weights[c]; !ok {
				delete(clusters, c)
			}
		}
		snap, _ := NewSnapshot([]*networkingv1alpha1.MultiClusterIngress{servingMCI("web", "web.example.com", clusters, weights)}, []string{"example.com."}, 5*time.Second, DomainRules{})
		const n = 10000
		counts := share(t, snap, "web.example.com.", dns.TypeA, n)
		var total int32
		for _, w := range weights {
			total += w
		}
		for c, w := range weights {
			want := float64(w) / float64(total)
			got := float64(counts[clusters[c][0]]) / n
			if math.Abs(got-want) > 0.05*want+0.001 {
				t.Errorf("weights %v: %s answered %.4f of queries, want %.4f ±5%%", weights, c, got, want)
			}
		}
		resp := snap.AnswerFor(query("web.example.com.", dns.TypeA), 7)
		if len(resp.Answer) != 1 {
			t.Errorf("a weighted answer holds one cluster: %v", resp.Answer)
		}
	}
}

// TestUnweightedAnswersEveryAddress: without weights every IP cluster is in
// every answer, as before.
func TestUnweightedAnswersEveryAddress(t *testing.T) {
	snap, _ := NewSnapshot([]*networkingv1alpha1.MultiClusterIngress{servingMCI("web", "web.example.com",
		map[string][]string{"m1": {"10.0.0.1"}, "m2": {"10.0.0.2", "2001:db8::2"}}, nil)}, []string{"example.com."}, 5*time.Second, DomainRules{})
	for i := range 10 {
		if resp := snap.AnswerFor(query("web.example.com.", dns.TypeA), uint64(i)); len(resp.Answer) != 2 {
			t.Fatalf("query %d: %v", i, resp.Answer)
		}
	}
	resp := snap.Answer(query("web.example.com.", dns.TypeAAAA))
	if len(resp.Answer) != 1 || resp.Answer[0].(*dns.AAAA).AAAA.String() != "2001:db8::2" {
		t.Fatalf("AAAA: %v", resp.Answer)
	}
}

// TestHostnameTargetsAreCNAME: a hostname load balancer is a CNAME; with IP
// clusters beside it, an answer holds either the IPs or the one CNAME, in
// the clusters' shares, never both (RFC 1034 3.6.2).
func TestHostnameTargetsAreCNAME(t *testing.T) {
	only := servingMCI("aws", "aws.example.com", map[string][]string{"eks": {"abc.elb.amazonaws.com"}}, nil)
	mixed := servingMCI("mixed", "mixed.example.com", map[string][]string{"eks": {"ABC.elb.amazonaws.com."}, "m1": {"10.0.0.1"}, "m2": {"10.0.0.2"}}, nil)
	snap, _ := NewSnapshot([]*networkingv1alpha1.MultiClusterIngress{only, mixed}, []string{"example.com."}, 5*time.Second, DomainRules{})
	for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeANY, dns.TypeTXT} {
		resp := snap.Answer(query("aws.example.com.", qt))
		if len(resp.Answer) != 1 || resp.Answer[0].(*dns.CNAME).Target != "abc.elb.amazonaws.com." {
			t.Fatalf("%s: %v", dns.TypeToString[qt], resp.Answer)
		}
	}
	const n = 9000
	counts := share(t, snap, "mixed.example.com.", dns.TypeA, n)
	if c := float64(counts["CNAME abc.elb.amazonaws.com."]) / n; math.Abs(c-1.0/3) > 0.05/3 {
		t.Fatalf("the hostname cluster gets a third of the answers: %v", counts)
	}
	for i := range 50 {
		resp := snap.AnswerFor(query("mixed.example.com.", dns.TypeA), uint64(i))
		_, isCNAME := resp.Answer[0].(*dns.CNAME)
		if isCNAME && len(resp.Answer) != 1 || !isCNAME && len(resp.Answer) != 2 {
			t.Fatalf("query %d mixes records: %v", i, resp.Answer)
		}
	}

	// A host that is its own zone apex has an SOA, so no CNAME: only the IP clusters answer.
	apex, _ := NewSnapshot([]*networkingv1alpha1.MultiClusterIngress{mixed}, nil, 5*time.Second, DomainRules{})
	for i := range 20 {
		if resp := apex.AnswerFor(query("mixed.example.com.", dns.TypeA), uint64(i)); len(resp.Answer) != 2 {
			t.Fatalf("apex answer %d: %v", i, resp.Answer)
		}
	}
}

func TestTTLPerIngress(t *testing.T) {
	m := servingMCI("web", "web.example.com", map[string][]string{"m1": {"10.0.0.1"}}, nil)
	m.Spec.Strategy = &networkingv1alpha1.TrafficStrategy{Type: networkingv1alpha1.StrategyRoundRobin, DNSTtlSeconds: 60}
	other := servingMCI("api", "api.example.com", map[string][]string{"m1": {"10.0.0.1"}}, nil)
	snap, _ := NewSnapshot([]*networkingv1alpha1.MultiClusterIngress{m, other}, []string{"example.com."}, 5*time.Second, DomainRules{})
	if ttl := snap.Answer(query("web.example.com.", dns.TypeA)).Answer[0].Header().Ttl; ttl != 60 {
		t.Fatalf("web TTL %d, want 60", ttl)
	}
	if ttl := snap.Answer(query("api.example.com.", dns.TypeA)).Answer[0].Header().Ttl; ttl != 5 {
		t.Fatalf("api TTL %d, want the server's 5", ttl)
	}
}

// TestNewFieldsNeverReachAnotherOwnersHost: a younger ingress of another
// tenant naming the same host changes nothing of its answers through any
// field: weights, TTL, addresses, hostnames.
func TestNewFieldsNeverReachAnotherOwnersHost(t *testing.T) {
	owner := servingMCI("web", "web.example.com", map[string][]string{"m1": {"10.0.0.1"}}, nil)
	owner.Namespace = "team-a"
	intruder := servingMCI("web", "web.example.com", map[string][]string{"m1": {"192.0.2.66"}, "m2": {"evil.example.net"}, "m3": {"2001:db8::66"}},
		map[string]int32{"m1": 1000, "m2": 1000, "m3": 1000})
	intruder.Namespace = "team-b"
	intruder.CreationTimestamp = metav1.NewTime(time.Unix(100, 0))
	intruder.Spec.Strategy.DNSTtlSeconds = 3600
	intruder.Spec.Rules = append(intruder.Spec.Rules, networkingv1.IngressRule{Host: "*.example.com"}, networkingv1.IngressRule{Host: "WEB.example.com."})
	want, _ := NewSnapshot([]*networkingv1alpha1.MultiClusterIngress{owner}, []string{"example.com."}, 5*time.Second, DomainRules{})
	got, _ := NewSnapshot([]*networkingv1alpha1.MultiClusterIngress{owner, intruder}, []string{"example.com."}, 5*time.Second, DomainRules{})
	for i := range 200 {
		for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeANY, dns.TypeCNAME} {
			a := want.AnswerFor(query("web.example.com.", qt), uint64(i))
			b := got.AnswerFor(query("web.example.com.", qt), uint64(i))
			if a.Rcode != b.Rcode || fmt.Sprint(a.Answer) != fmt.Sprint(b.Answer) {
				t.Fatalf("query %d %s changed by another tenant:\n%v\nvs\n%v", i, dns.TypeToString[qt], a, b)
			}
		}
	}
	answers, _ := HostAnswers([]*networkingv1alpha1.MultiClusterIngress{intruder, owner}, DomainRules{})
	for _, a := range answers {
		if a.Host == "web.example.com." && (a.Owner.Namespace != "team-a" || a.TTL != 0 || a.Weighted || len(a.Targets) != 1) {
			t.Fatalf("HostAnswers gave the intruder a say: %+v", a)
		}
	}
}

func sortedKeys(m map[string][]string) []string {
	return slices.Sorted(maps.Keys(m))
}

func parseIP(s string) (netip.Addr, error) { return netip.ParseAddr(s) }
