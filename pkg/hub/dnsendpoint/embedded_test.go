/*
Copyright The Flotilla Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package dnsendpoint

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"

	networkingv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/networking/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned/fake"
	flotillainformers "github.com/flotilla-io/flotilla/pkg/generated/informers"
	"github.com/flotilla-io/flotilla/pkg/hub/dnstraffic"
)

// embeddedTable is the embedded DNS server's table over a fixed list of
// ingresses (an informer that lists them and never changes).
func embeddedTable(t *testing.T, mcis []*networkingv1alpha1.MultiClusterIngress) *dnstraffic.Snapshot {
	t.Helper()
	objs := make([]runtime.Object, 0, len(mcis))
	for _, m := range mcis {
		objs = append(objs, m.DeepCopy())
	}
	inf := flotillainformers.NewSharedInformerFactory(fake.NewSimpleClientset(objs...), 0).Networking().V1alpha1().MultiClusterIngresses().Informer()
	table, err := dnstraffic.NewTable(inf, []string{"example.com."}, 5*time.Second, dnstraffic.DomainRules{}, dnstraffic.NewMetrics(prometheus.NewRegistry()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go inf.Run(ctx.Done())
	go table.Run(ctx)
	for deadline := time.Now().Add(10 * time.Second); !table.HasSynced(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the embedded table never synced")
		}
	}
	return table.Snapshot()
}

// embeddedAnswers are the distinct answers the embedded server gives for
// name over many numbered queries: address answers as "v4,...|v6,...",
// CNAME answers as their target (no trailing dot), and their TTL.
func embeddedAnswers(s *dnstraffic.Snapshot, name string) (addresses, cnames []string, ttl uint32) {
	const queries = 400
	for n := range uint64(queries) {
		var v4, v6 []string
		cname := ""
		for _, qtype := range []uint16{dns.TypeA, dns.TypeAAAA} {
			req := new(dns.Msg)
			req.SetQuestion(name, qtype)
			for _, rr := range s.AnswerFor(req, n).Answer {
				ttl = rr.Header().Ttl
				switch rr := rr.(type) {
				case *dns.A:
					v4 = append(v4, rr.A.String())
				case *dns.AAAA:
					v6 = append(v6, rr.AAAA.String())
				case *dns.CNAME:
					cname = strings.TrimSuffix(rr.Target, ".")
				}
			}
		}
		switch {
		case cname != "":
			cnames = append(cnames, cname)
		case len(v4)+len(v6) > 0:
			slices.Sort(v4)
			slices.Sort(v6)
			addresses = append(addresses, strings.Join(v4, ",")+"|"+strings.Join(v6, ","))
		}
	}
	slices.Sort(addresses)
	slices.Sort(cnames)
	return slices.Compact(addresses), slices.Compact(cnames), ttl
}

// published turns one host's endpoints into the same shape: address sets
// per setIdentifier, CNAME targets, and the TTLs.
func publishedAnswers(eps []Endpoint) (addresses, cnames []string, ttls []int64) {
	v4, v6 := map[string][]string{}, map[string][]string{}
	var sets []string
	for _, ep := range eps {
		ttls = append(ttls, ep.RecordTTL)
		switch ep.RecordType {
		case RecordTypeCNAME:
			cnames = append(cnames, ep.Targets...)
			continue
		case RecordTypeTXT: // a name without addresses
			continue
		case RecordTypeA:
			v4[ep.SetIdentifier] = append(v4[ep.SetIdentifier], ep.Targets...)
		case RecordTypeAAAA:
			v6[ep.SetIdentifier] = append(v6[ep.SetIdentifier], ep.Targets...)
		}
		sets = append(sets, ep.SetIdentifier)
	}
	for _, set := range slices.Compact(slices.Sorted(slices.Values(sets))) {
		addresses = append(addresses, strings.Join(v4[set], ",")+"|"+strings.Join(v6[set], ","))
	}
	slices.Sort(addresses)
	slices.Sort(cnames)
	slices.Sort(ttls)
	return slices.Compact(addresses), cnames, slices.Compact(ttls)
}

// union is every address of the address answers, as one answer.
func union(addresses []string) []string {
	var v4, v6 []string
	for _, a := range addresses {
		four, six, _ := strings.Cut(a, "|")
		v4 = append(v4, strings.Split(four, ",")...)
		v6 = append(v6, strings.Split(six, ",")...)
	}
	clean := func(s []string) string {
		s = slices.DeleteFunc(s, func(x string) bool { return x == "" })
		slices.Sort(s)
		return strings.Join(slices.Compact(s), ",")
	}
	if len(addresses) == 0 {
		return nil
	}
	return []string{clean(v4) + "|" + clean(v6)}
}

// randomIngresses are tenants' ingresses over a few shared hosts, with
// statuses as the ingress controller writes them (or as an older hub did)
// and random strategies.
// Case n's hosts are under n.example.com, so cases share no host.
func randomIngresses(r *rand.Rand, n int) []*networkingv1alpha1.MultiClusterIngress {
	var hosts []string
	for _, h := range []string{"a.%d.example.com", "B.%d.example.com.", "*.c.%d.example.com", "d.%d.example.com"} {
		hosts = append(hosts, fmt.Sprintf(h, n))
	}
	var out []*networkingv1alpha1.MultiClusterIngress
	for i := range 1 + r.IntN(4) {
		var hs []string
		for _, h := range hosts {
			if r.IntN(3) == 0 {
				hs = append(hs, h)
			}
		}
		m := ingress([]string{"team-a", "team-b"}[r.IntN(2)], fmt.Sprintf("web-%d-%d", n, i), r.IntN(3), hs...)
		switch r.IntN(4) {
		case 0:
		case 1:
			m.Spec.Strategy = &networkingv1alpha1.TrafficStrategy{Type: networkingv1alpha1.StrategyRoundRobin, Weight: map[string]int32{"m0": 1, "m1": 3, "m2": 5, "m3": 0}}
		case 2:
			m.Spec.Strategy = &networkingv1alpha1.TrafficStrategy{Type: networkingv1alpha1.StrategyFailover, DNSTtlSeconds: int32(1 + r.IntN(60))}
		case 3:
			m.Spec.Strategy = &networkingv1alpha1.TrafficStrategy{Type: networkingv1alpha1.StrategyRoundRobin, DNSTtlSeconds: int32(1 + r.IntN(60))}
		}
		if r.IntN(8) == 0 { // a status from a hub before per-cluster traffic
			for c := range 3 {
				if r.IntN(2) == 0 {
					m.Status.LoadBalancer.Ingress = append(m.Status.LoadBalancer.Ingress, networkingv1.IngressLoadBalancerIngress{IP: fmt.Sprintf("10.9.%d.1", c)})
				}
			}
			out = append(out, m)
			continue
		}
		for c := range 4 {
			cluster := fmt.Sprintf("m%d", c)
			if r.IntN(4) == 0 {
				notServing(m, cluster, networkingv1alpha1.TrafficReasonNoReadyEndpoints)
				continue
			}
			var addrs []string
			for _, a := range []string{fmt.Sprintf("10.%d.%d.1", i, c), fmt.Sprintf("10.%d.%d.2", i, c), fmt.Sprintf("2001:db8::%d:%d", i, c), fmt.Sprintf("lb-%d-%d.example.net", i, c)} {
				if r.IntN(3) == 0 {
					addrs = append(addrs, a)
				}
			}
			serving(m, cluster, int32(1+r.IntN(5)), addrs...)
		}
		out = append(out, m)
	}
	return out
}

// TestEndpointsAnswerAsTheEmbeddedServer: over random tenants' ingresses,
// each host's DNSEndpoint records hold what the embedded DNS server
// answers for it, queried through its own table: the same owner, TTL,
// addresses and hostnames. With a weight property, each weighted set is
// one of the server's alternative answers; without, the one set is the
// union of them. A CNAME is published only where the server answers no
// address (a name cannot hold both), and is one the server answers.
// FLOTILLA_DNSENDPOINT_SEED=<n> replays a run.
func TestEndpointsAnswerAsTheEmbeddedServer(t *testing.T) {
	seed := seed()
	r := rand.New(rand.NewPCG(uint64(seed), 1))
	cases := make([][]*networkingv1alpha1.MultiClusterIngress, 300)
	var all []*networkingv1alpha1.MultiClusterIngress
	for i := range cases {
		cases[i] = randomIngresses(r, i)
		all = append(all, cases[i]...)
	}
	snap := embeddedTable(t, all)
	for i, mcis := range cases {
		for _, rec := range []Records{{TTL: 5}, {TTL: 5, WeightProperty: "aws/weight"}} {
			byHost := map[string][]Endpoint{}
			weighted := map[string]bool{}
			for _, m := range mcis {
				tr := TrafficOf(m, mcis, dnstraffic.DomainRules{})
				for _, a := range tr.Hosts {
					weighted[a.Host] = a.Weighted
				}
				for _, ep := range Endpoints(tr.Hosts, rec) {
					if _, dup := weighted[ep.DNSName]; !dup {
						t.Fatalf("seed %d case %d: %s/%s publishes %s, which it does not own", seed, i, m.Namespace, m.Name, ep.DNSName)
					}
					byHost[ep.DNSName] = append(byHost[ep.DNSName], ep)
				}
			}
			for host := range weighted {
				qname := strings.Replace(host, "*", "x", 1) + "."
				addrs, cnames, ttl := embeddedAnswers(snap, qname)
				got := byHost[host]
				pubAddrs, pubCNAMEs, pubTTLs := publishedAnswers(got)
				fail := func(msg string) {
					t.Fatalf("seed %d (replay: FLOTILLA_DNSENDPOINT_SEED=%d go test ./pkg/hub/dnsendpoint -run TestEndpointsAnswerAsTheEmbeddedServer), case %d, records %+v, host %s: %s\n"+
						"embedded: addresses %q, cnames %q, ttl %d\npublished: %+v", seed, seed, i, rec, host, msg, addrs, cnames, ttl, got)
				}
				if len(addrs)+len(cnames) > 0 && !slices.Equal(pubTTLs, []int64{int64(ttl)}) {
					fail(fmt.Sprintf("TTLs %v", pubTTLs))
				}
				perCluster := rec.WeightProperty != "" && (weighted[host] || len(addrs) == 0 && len(cnames) > 1)
				switch {
				case len(addrs) > 0 && perCluster:
					if !slices.Equal(pubAddrs, addrs) || len(pubCNAMEs) > 0 {
						fail("the weighted sets are not the server's answers")
					}
				case len(addrs) > 0:
					if !slices.Equal(pubAddrs, union(addrs)) || len(pubCNAMEs) > 0 {
						fail("the set is not the union of the server's answers")
					}
				case len(cnames) > 0 && perCluster:
					if !slices.Equal(pubCNAMEs, cnames) || len(pubAddrs) > 0 {
						fail("the weighted CNAMEs are not the server's")
					}
				case len(cnames) > 0:
					if len(pubCNAMEs) != 1 || !slices.Contains(cnames, pubCNAMEs[0]) || len(pubAddrs) > 0 {
						fail("not one CNAME of the server's")
					}
				default: // the name exists without addresses, as in the server (NODATA)
					if len(got) != 1 || got[0].RecordType != RecordTypeTXT || len(pubAddrs)+len(pubCNAMEs) > 0 {
						fail("a host the server answers with no address is not published as a name without addresses")
					}
				}
			}
		}
	}
}
