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
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	networkingv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/networking/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/dnstraffic"
)

func ingress(ns, name string, created int, hosts ...string) *networkingv1alpha1.MultiClusterIngress {
	mci := &networkingv1alpha1.MultiClusterIngress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		CreationTimestamp: metav1.NewTime(time.Unix(int64(created), 0))}}
	for _, h := range hosts {
		mci.Spec.Rules = append(mci.Spec.Rules, networkingv1.IngressRule{Host: h})
	}
	return mci
}

// serving records in mci's status that cluster serves with addrs (IPs or
// hostnames) and weight, as the ingress controller's Decide does.
func serving(mci *networkingv1alpha1.MultiClusterIngress, cluster string, weight int32, addrs ...string) *networkingv1alpha1.MultiClusterIngress {
	ct := networkingv1alpha1.ClusterTraffic{Name: cluster, Serving: true, Reason: networkingv1alpha1.TrafficReasonHealthy, Weight: weight}
	for _, a := range addrs {
		if _, err := netip.ParseAddr(a); err == nil {
			ct.Addresses = append(ct.Addresses, networkingv1.IngressLoadBalancerIngress{IP: a})
		} else {
			ct.Addresses = append(ct.Addresses, networkingv1.IngressLoadBalancerIngress{Hostname: a})
		}
	}
	mci.Status.Clusters = append(mci.Status.Clusters, ct)
	mci.Status.LoadBalancer.Ingress = append(mci.Status.LoadBalancer.Ingress, ct.Addresses...)
	mci.Status.ServiceLocations = []networkingv1alpha1.ServiceLocation{{Name: "web", Clusters: []string{cluster}}}
	return mci
}

// notServing records a cluster the decision leaves out (standby, unhealthy).
func notServing(mci *networkingv1alpha1.MultiClusterIngress, cluster, reason string) *networkingv1alpha1.MultiClusterIngress {
	mci.Status.Clusters = append(mci.Status.Clusters, networkingv1alpha1.ClusterTraffic{Name: cluster, Reason: reason})
	mci.Status.ServiceLocations = []networkingv1alpha1.ServiceLocation{{Name: "web", Clusters: []string{cluster}}}
	return mci
}

func withStrategy(mci *networkingv1alpha1.MultiClusterIngress, st *networkingv1alpha1.TrafficStrategy) *networkingv1alpha1.MultiClusterIngress {
	mci.Spec.Strategy = st
	return mci
}

func weights(w map[string]int32) *networkingv1alpha1.TrafficStrategy {
	return &networkingv1alpha1.TrafficStrategy{Type: networkingv1alpha1.StrategyRoundRobin, Weight: w}
}

func endpointsOfIngress(mci *networkingv1alpha1.MultiClusterIngress, r Records) []Endpoint {
	return Endpoints(TrafficOf(mci, []*networkingv1alpha1.MultiClusterIngress{mci}, dnstraffic.DomainRules{}).Hosts, r)
}

func weight(w int) []ProviderSpecificProperty {
	return []ProviderSpecificProperty{{Name: "aws/weight", Value: strconv.Itoa(w)}}
}

// The record sets of each kind of decision: the mapping from
// dnstraffic.HostAnswer to ExternalDNS endpoints.
func TestEndpointsMapping(t *testing.T) {
	noWeights := Records{TTL: 5}
	aws := Records{TTL: 5, WeightProperty: "aws/weight"}
	for _, tc := range []struct {
		name string
		mci  *networkingv1alpha1.MultiClusterIngress
		r    Records
		want []Endpoint
	}{{
		name: "IPv4 and IPv6 of every serving cluster: one A and one AAAA set; a standby cluster is not published",
		mci: notServing(serving(serving(ingress("a", "web", 1, "web.example.com"), "m1", 1, "10.0.0.1", "2001:db8::1"),
			"m2", 1, "10.0.0.2", "::ffff:10.0.0.3"), "m3", networkingv1alpha1.TrafficReasonStandby),
		r: noWeights,
		want: []Endpoint{
			{DNSName: "web.example.com", Targets: []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}, RecordType: "A", RecordTTL: 5},
			{DNSName: "web.example.com", Targets: []string{"2001:db8::1"}, RecordType: "AAAA", RecordTTL: 5},
		},
	}, {
		name: "IPv6 only: an AAAA set and no A set",
		mci:  serving(ingress("a", "web", 1, "web.example.com"), "m1", 1, "2001:db8::2", "2001:db8::1"),
		r:    noWeights,
		want: []Endpoint{{DNSName: "web.example.com", Targets: []string{"2001:db8::1", "2001:db8::2"}, RecordType: "AAAA", RecordTTL: 5}},
	}, {
		name: "a hostname load balancer: one CNAME, without the trailing dot",
		mci:  serving(ingress("a", "web", 1, "web.example.com", "*.apps.example.com"), "m1", 1, "LB-1.elb.amazonaws.com."),
		r:    noWeights,
		want: []Endpoint{
			{DNSName: "*.apps.example.com", Targets: []string{"lb-1.elb.amazonaws.com"}, RecordType: "CNAME", RecordTTL: 5},
			{DNSName: "web.example.com", Targets: []string{"lb-1.elb.amazonaws.com"}, RecordType: "CNAME", RecordTTL: 5},
		},
	}, {
		name: "mixed members: a name holds no CNAME beside addresses, so the hostname cluster is left out",
		mci:  serving(serving(ingress("a", "web", 1, "web.example.com"), "m1", 1, "lb.elb.amazonaws.com"), "m2", 1, "10.0.0.2"),
		r:    aws,
		want: []Endpoint{{DNSName: "web.example.com", Targets: []string{"10.0.0.2"}, RecordType: "A", RecordTTL: 5}},
	}, {
		name: "a cluster with IPs and a hostname is answered with its IPs",
		mci:  serving(ingress("a", "web", 1, "web.example.com"), "m1", 1, "lb.elb.amazonaws.com", "10.0.0.1"),
		r:    noWeights,
		want: []Endpoint{{DNSName: "web.example.com", Targets: []string{"10.0.0.1"}, RecordType: "A", RecordTTL: 5}},
	}, {
		name: "several hostname clusters, no weights in the provider: one CNAME, the first cluster's",
		mci:  serving(serving(ingress("a", "web", 1, "web.example.com"), "m2", 1, "lb-2.example.net"), "m1", 1, "lb-1.example.net"),
		r:    noWeights,
		want: []Endpoint{{DNSName: "web.example.com", Targets: []string{"lb-1.example.net"}, RecordType: "CNAME", RecordTTL: 5}},
	}, {
		name: "several hostname clusters, weights in the provider: a weighted CNAME per cluster",
		mci:  serving(serving(ingress("a", "web", 1, "web.example.com"), "m2", 1, "lb-2.example.net"), "m1", 1, "lb-1.example.net"),
		r:    aws,
		want: []Endpoint{
			{DNSName: "web.example.com", Targets: []string{"lb-1.example.net"}, RecordType: "CNAME", SetIdentifier: "m1", RecordTTL: 5, ProviderSpecific: weight(1)},
			{DNSName: "web.example.com", Targets: []string{"lb-2.example.net"}, RecordType: "CNAME", SetIdentifier: "m2", RecordTTL: 5, ProviderSpecific: weight(1)},
		},
	}, {
		name: "weights, provider with weights: one set per cluster and family, setIdentifier and weight",
		mci: withStrategy(serving(serving(ingress("a", "web", 1, "web.example.com"), "m1", 70, "10.0.0.1", "2001:db8::1"), "m2", 30, "10.0.0.2"),
			weights(map[string]int32{"m1": 70, "m2": 30})),
		r: aws,
		want: []Endpoint{
			{DNSName: "web.example.com", Targets: []string{"10.0.0.1"}, RecordType: "A", SetIdentifier: "m1", RecordTTL: 5, ProviderSpecific: weight(70)},
			{DNSName: "web.example.com", Targets: []string{"2001:db8::1"}, RecordType: "AAAA", SetIdentifier: "m1", RecordTTL: 5, ProviderSpecific: weight(70)},
			{DNSName: "web.example.com", Targets: []string{"10.0.0.2"}, RecordType: "A", SetIdentifier: "m2", RecordTTL: 5, ProviderSpecific: weight(30)},
		},
	}, {
		name: "weights, one cluster left: still a weighted set (no simple/weighted switch for the provider)",
		mci: withStrategy(notServing(serving(ingress("a", "web", 1, "web.example.com"), "m1", 70, "10.0.0.1"), "m2", networkingv1alpha1.TrafficReasonNoReadyEndpoints),
			weights(map[string]int32{"m1": 70, "m2": 30})),
		r: aws,
		want: []Endpoint{
			{DNSName: "web.example.com", Targets: []string{"10.0.0.1"}, RecordType: "A", SetIdentifier: "m1", RecordTTL: 5, ProviderSpecific: weight(70)},
		},
	}, {
		name: "weights, provider without weights: every serving cluster in one set",
		mci: withStrategy(serving(serving(ingress("a", "web", 1, "web.example.com"), "m1", 70, "10.0.0.1"), "m2", 30, "10.0.0.2"),
			weights(map[string]int32{"m1": 70, "m2": 30})),
		r:    noWeights,
		want: []Endpoint{{DNSName: "web.example.com", Targets: []string{"10.0.0.1", "10.0.0.2"}, RecordType: "A", RecordTTL: 5}},
	}, {
		name: "weighted hostname clusters, provider without weights: the heaviest's CNAME",
		mci: withStrategy(serving(serving(ingress("a", "web", 1, "web.example.com"), "m1", 1, "lb-1.example.net"), "m2", 9, "lb-2.example.net"),
			weights(map[string]int32{"m1": 1, "m2": 9})),
		r:    noWeights,
		want: []Endpoint{{DNSName: "web.example.com", Targets: []string{"lb-2.example.net"}, RecordType: "CNAME", RecordTTL: 5}},
	}, {
		name: "weighted mixed members: the IP clusters' weighted sets only",
		mci: withStrategy(serving(serving(ingress("a", "web", 1, "web.example.com"), "m1", 1, "10.0.0.1"), "m2", 9, "lb-2.example.net"),
			weights(map[string]int32{"m1": 1, "m2": 9})),
		r: aws,
		want: []Endpoint{
			{DNSName: "web.example.com", Targets: []string{"10.0.0.1"}, RecordType: "A", SetIdentifier: "m1", RecordTTL: 5, ProviderSpecific: weight(1)},
		},
	}, {
		name: "the ingress's TTL wins over the flag's",
		mci: withStrategy(serving(ingress("a", "web", 1, "web.example.com"), "m1", 1, "10.0.0.1"),
			&networkingv1alpha1.TrafficStrategy{Type: networkingv1alpha1.StrategyRoundRobin, DNSTtlSeconds: 30}),
		r:    noWeights,
		want: []Endpoint{{DNSName: "web.example.com", Targets: []string{"10.0.0.1"}, RecordType: "A", RecordTTL: 30}},
	}, {
		name: "failover: the targets of the group that serves now",
		mci: withStrategy(notServing(serving(ingress("a", "web", 1, "web.example.com"), "m2", 1, "10.0.0.2"), "m1", networkingv1alpha1.TrafficReasonNoReadyEndpoints),
			&networkingv1alpha1.TrafficStrategy{Type: networkingv1alpha1.StrategyFailover, DNSTtlSeconds: 10}),
		r:    aws,
		want: []Endpoint{{DNSName: "web.example.com", Targets: []string{"10.0.0.2"}, RecordType: "A", RecordTTL: 10}},
	}, {
		name: "a status from a hub before per-cluster traffic: the IPs of status.loadBalancer",
		mci: func() *networkingv1alpha1.MultiClusterIngress {
			m := ingress("a", "web", 1, "web.example.com")
			m.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "10.0.0.2"}, {IP: "10.0.0.1"}, {IP: "not-an-ip"}, {Hostname: "lb.example.net"}}
			return m
		}(),
		r:    aws,
		want: []Endpoint{{DNSName: "web.example.com", Targets: []string{"10.0.0.1", "10.0.0.2"}, RecordType: "A", RecordTTL: 5}},
	}, {
		name: "serving clusters without an address yet: the name, without addresses (never a set without targets)",
		mci:  serving(ingress("a", "web", 1, "web.example.com"), "m1", 1),
		r:    aws,
		want: []Endpoint{{DNSName: "web.example.com", Targets: []string{NoAddressText}, RecordType: "TXT", RecordTTL: 5}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, endpointsOfIngress(tc.mci, tc.r)); diff != "" {
				t.Fatalf("Endpoints (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTrafficOfReadsBlockAndPlacement(t *testing.T) {
	mci := serving(ingress("a", "web", 1, "web.example.com"), "m1", 1, "10.0.0.1")
	mci.Status.TrafficBlockClusters = []networkingv1alpha1.ClusterObject{{Name: "m2"}}
	got := TrafficOf(mci, []*networkingv1alpha1.MultiClusterIngress{mci}, dnstraffic.DomainRules{})
	if !got.Blocked || !got.Placed || !got.answered() || !slices.Equal(got.owned(), []string{"web.example.com"}) {
		t.Fatalf("TrafficOf: %+v", got)
	}
	empty := ingress("a", "empty", 1, "x.example.com")
	if got := TrafficOf(empty, []*networkingv1alpha1.MultiClusterIngress{empty}, dnstraffic.DomainRules{}); got.Placed || got.Blocked || got.answered() || len(got.Hosts) != 1 {
		t.Fatalf("an ingress without status: %+v", got)
	}
}

// A tenant's ingress never publishes a host an older ingress of another
// tenant claimed first, whatever case or trailing dot it writes it with,
// and none of its fields (weights, TTL, addresses) reaches that host.
func TestTrafficOfOneOwnerPerHost(t *testing.T) {
	victim := serving(ingress("team-a", "shop", 1, "shop.example.com"), "m1", 1, "10.0.0.1")
	attacker := withStrategy(serving(ingress("team-b", "evil", 2, "SHOP.example.com.", "evil.example.com"), "m1", 1000, "192.0.2.66", "evil.example.net"),
		&networkingv1alpha1.TrafficStrategy{Type: networkingv1alpha1.StrategyRoundRobin, Weight: map[string]int32{"m1": 1000}, DNSTtlSeconds: 3600})
	claimants := []*networkingv1alpha1.MultiClusterIngress{attacker, victim}
	r := Records{TTL: 5, WeightProperty: "aws/weight"}
	if got := TrafficOf(attacker, claimants, dnstraffic.DomainRules{}).owned(); !slices.Equal(got, []string{"evil.example.com"}) {
		t.Fatalf("the newer ingress owns %v, want only evil.example.com", got)
	}
	want := []Endpoint{{DNSName: "shop.example.com", Targets: []string{"10.0.0.1"}, RecordType: "A", RecordTTL: 5}}
	if diff := cmp.Diff(want, Endpoints(TrafficOf(victim, claimants, dnstraffic.DomainRules{}).Hosts, r)); diff != "" {
		t.Fatalf("the owner's records (-want +got):\n%s", diff)
	}
	for _, ep := range Endpoints(TrafficOf(attacker, claimants, dnstraffic.DomainRules{}).Hosts, r) {
		if ep.DNSName != "evil.example.com" {
			t.Fatalf("the newer ingress publishes %+v", ep)
		}
	}
	// The owner gone, the next claimant owns the host.
	if got := TrafficOf(attacker, claimants[:1], dnstraffic.DomainRules{}).owned(); !slices.Equal(got, []string{"evil.example.com", "shop.example.com"}) {
		t.Fatalf("with the owner deleted the claimant owns %v", got)
	}
}

func TestPublish(t *testing.T) {
	r := Records{TTL: 5}
	traffic := func(blocked, placed bool, ips ...string) Traffic {
		m := ingress("a", "web", 1, "web.example.com")
		for i, ip := range ips {
			serving(m, fmt.Sprintf("m%d", i), 1, ip)
		}
		tr := TrafficOf(m, []*networkingv1alpha1.MultiClusterIngress{m}, dnstraffic.DomainRules{})
		tr.Blocked, tr.Placed = blocked, placed
		return tr
	}
	seen := traffic(false, true, "10.0.0.2")
	published := Endpoints(traffic(false, true, "10.0.0.1").Hosts, r)
	foreign := append(slices.Clone(published), Endpoint{DNSName: "lost.example.com", Targets: []string{"10.0.0.1"}, RecordType: "A"})
	noAddress := []Endpoint{{DNSName: "web.example.com", Targets: []string{NoAddressText}, RecordType: RecordTypeTXT, RecordTTL: 5}}
	for _, tc := range []struct {
		name      string
		blind     string
		published []Endpoint
		traffic   Traffic
		want      []Endpoint
		hold      string
	}{
		{name: "a failover is published", published: published, traffic: seen, want: Endpoints(seen.Hosts, r)},
		{name: "first publication", traffic: seen, want: Endpoints(seen.Hosts, r)},
		{name: "fleet unseen keeps the published records", blind: HoldFleetUnseen, published: published, traffic: seen, want: published, hold: HoldFleetUnseen},
		{name: "fleet unseen publishes nothing new", blind: HoldFleetUnseen, traffic: seen, want: []Endpoint{}, hold: HoldFleetUnseen},
		{name: "fleet unseen still drops a host no longer owned", blind: HoldFleetUnseen, published: foreign, traffic: seen, want: published, hold: HoldFleetUnseen},
		{name: "placed, unblocked, no address: kept", published: published, traffic: traffic(false, true),
			want: published, hold: HoldAddressesUnseen},
		{name: "a stale fail-open decision keeps the published records", blind: HoldDecisionStale, published: published,
			traffic: traffic(false, true, "10.0.0.1", "10.0.0.2"), want: published, hold: HoldDecisionStale},
		{name: "every cluster blocked: the block holds, the name stays without addresses", published: published, traffic: traffic(true, true), want: noAddress},
		{name: "backends placed nowhere: the addresses go, the name stays", published: published, traffic: traffic(false, false), want: noAddress},
		{name: "placed, no address, nothing published: the name without addresses", traffic: traffic(false, true), want: noAddress},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, hold := Publish(tc.blind, tc.published, tc.traffic, r)
			if hold != tc.hold {
				t.Errorf("hold %q, want %q", hold, tc.hold)
			}
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b []Endpoint) bool { return len(a) == 0 && len(b) == 0 || cmp.Equal(a, b) })); diff != "" {
				t.Errorf("endpoints (-want +got):\n%s", diff)
			}
		})
	}
}

// seed is FLOTILLA_DNSENDPOINT_SEED, else the clock; the failure messages
// print it.
func seed() int64 {
	if v, err := strconv.ParseInt(os.Getenv("FLOTILLA_DNSENDPOINT_SEED"), 10, 64); err == nil {
		return v
	}
	return time.Now().UnixNano()
}

// TestPublishInvariants: over random inputs, (1) nothing is published for
// a host the ingress does not own, (2) while the hub is blind (fleet
// unseen, stale decision) the output is a subset of what was published, (3) published records are
// replaced with none only by a block, a placement without backends or the
// loss of the hosts. FLOTILLA_DNSENDPOINT_SEED=<n> replays a run.
func TestPublishInvariants(t *testing.T) {
	seed := seed()
	r := rand.New(rand.NewPCG(uint64(seed), 0))
	hosts := []string{"a.example.com", "b.example.com", "*.c.example.com"}
	addrs := []string{"10.0.0.1", "10.0.0.2", "2001:db8::1", "lb.example.net"}
	pick := func(from []string) []string {
		var out []string
		for _, s := range from {
			if r.IntN(2) == 0 {
				out = append(out, s)
			}
		}
		return out
	}
	traffic := func(hosts []string) Traffic {
		m := ingress("a", "web", 1, hosts...)
		for i, a := range pick(addrs) {
			serving(m, fmt.Sprintf("m%d", i), int32(1+r.IntN(3)), a)
		}
		if r.IntN(2) == 0 {
			m.Spec.Strategy = weights(map[string]int32{"m0": 1, "m1": 2})
		}
		tr := TrafficOf(m, []*networkingv1alpha1.MultiClusterIngress{m}, dnstraffic.DomainRules{})
		tr.Blocked, tr.Placed = r.IntN(2) == 0, r.IntN(2) == 0
		return tr
	}
	records := []Records{{TTL: 5}, {TTL: 5, WeightProperty: "aws/weight"}}
	for i := 0; i < 5000; i++ {
		rec := records[r.IntN(2)]
		published := Endpoints(traffic(pick(hosts)).Hosts, rec)
		tr := traffic(pick(hosts))
		owned := tr.owned()
		blind := []string{"", HoldFleetUnseen, HoldDecisionStale}[r.IntN(3)]
		got, hold := Publish(blind, published, tr, rec)
		fail := func(msg string) {
			t.Fatalf("seed %d (replay: FLOTILLA_DNSENDPOINT_SEED=%d go test ./pkg/hub/dnsendpoint -run TestPublishInvariants), case %d: %s\n"+
				"blind=%q owned=%v traffic=%+v published=%+v -> %+v (hold %q)", seed, seed, i, msg, blind, owned, tr, published, got, hold)
		}
		for _, ep := range got {
			if !slices.Contains(owned, ep.DNSName) {
				fail(fmt.Sprintf("published %s, which the ingress does not own", ep.DNSName))
			}
			if blind != "" && !slices.ContainsFunc(published, func(p Endpoint) bool { return cmp.Equal(p, ep) }) {
				fail(fmt.Sprintf("blind (%s) but %s %s is new", blind, ep.DNSName, ep.RecordType))
			}
			if len(ep.Targets) == 0 || ep.RecordType == RecordTypeCNAME && len(ep.Targets) != 1 {
				fail(fmt.Sprintf("%s %s has %d targets", ep.DNSName, ep.RecordType, len(ep.Targets)))
			}
		}
		ownedPublished := slices.ContainsFunc(published, func(p Endpoint) bool { return slices.Contains(owned, p.DNSName) })
		if ownedPublished && len(got) == 0 && !tr.Blocked && tr.Placed {
			fail("published records blanked though nothing blocks the backends and they are placed")
		}
	}
}

// A fail-open decision recorded while the hub saw no cluster Ready is
// stale once a backend cluster is Ready again and not known to have no
// ready endpoints; the same decision with the clusters still not Ready,
// or Ready without ready endpoints, is what a fresh decision would say.
func TestStaleFailOpen(t *testing.T) {
	ct := func(name, reason string, serving bool, ready *int32) networkingv1alpha1.ClusterTraffic {
		return networkingv1alpha1.ClusterTraffic{Name: name, Reason: reason, Serving: serving, ReadyEndpoints: ready}
	}
	five, zero := ptrTo[int32](5), ptrTo[int32](0)
	failOpen := []networkingv1alpha1.ClusterTraffic{
		ct("m1", networkingv1alpha1.TrafficReasonFailOpen, true, five),
		ct("m2", networkingv1alpha1.TrafficReasonFailOpen, true, zero),
		ct("m3", networkingv1alpha1.TrafficReasonBlocked, false, five),
	}
	for _, tc := range []struct {
		name     string
		clusters []networkingv1alpha1.ClusterTraffic
		ready    []string
		want     bool
	}{
		{name: "fail-open, nothing Ready: what a fresh decision says", clusters: failOpen},
		{name: "fail-open, a cluster with ready endpoints Ready again: stale", clusters: failOpen, ready: []string{"m1"}, want: true},
		{name: "fail-open, the Ready cluster has no ready endpoints: a fresh decision fails open too", clusters: failOpen, ready: []string{"m2"}},
		{name: "fail-open, only a blocked cluster Ready: blocked stays out", clusters: failOpen, ready: []string{"m3"}},
		{name: "fail-open with endpoints never counted, Ready again: stale (it would be unconfirmed)",
			clusters: []networkingv1alpha1.ClusterTraffic{ct("m1", networkingv1alpha1.TrafficReasonFailOpen, true, nil)}, ready: []string{"m1"}, want: true},
		{name: "failover standby behind a fail-open primary, Ready again: stale",
			clusters: []networkingv1alpha1.ClusterTraffic{ct("m1", networkingv1alpha1.TrafficReasonFailOpen, true, five), ct("m2", networkingv1alpha1.TrafficReasonStandby, false, five)},
			ready:    []string{"m2"}, want: true},
		{name: "not fail-open: never stale", ready: []string{"m1", "m2"},
			clusters: []networkingv1alpha1.ClusterTraffic{ct("m1", networkingv1alpha1.TrafficReasonHealthy, true, five), ct("m2", networkingv1alpha1.TrafficReasonClusterNotReady, false, five)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status := &networkingv1alpha1.MultiClusterIngressStatus{Clusters: tc.clusters}
			if got := StaleFailOpen(status, func(c string) bool { return slices.Contains(tc.ready, c) }); got != tc.want {
				t.Fatalf("StaleFailOpen = %v, want %v", got, tc.want)
			}
		})
	}
}
