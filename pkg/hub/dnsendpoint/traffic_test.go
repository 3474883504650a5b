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
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	networkingv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/networking/v1alpha1"
)

func ingress(ns, name string, created int, hosts ...string) *networkingv1alpha1.MultiClusterIngress {
	mci := &networkingv1alpha1.MultiClusterIngress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		CreationTimestamp: metav1.NewTime(time.Unix(int64(created), 0))}}
	for _, h := range hosts {
		mci.Spec.Rules = append(mci.Spec.Rules, networkingv1.IngressRule{Host: h})
	}
	return mci
}

func TestTrafficOfReadsTheRecordedDecision(t *testing.T) {
	mci := ingress("a", "web", 1, "web.example.com")
	mci.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{
		{IP: "10.0.0.2"}, {IP: "2001:db8::1"}, {IP: "10.0.0.1"}, {IP: "10.0.0.2"},
		{IP: "::ffff:10.0.0.3"},          // an IPv4 address written as IPv6: an A record
		{IP: "not-an-ip"},                // garbage in status: nothing
		{Hostname: "lb.elb.example.com"}, // hostnames are not answered (as in dnstraffic)
	}
	mci.Status.ServiceLocations = []networkingv1alpha1.ServiceLocation{{Name: "web", Clusters: []string{"m1"}}}
	mci.Status.TrafficBlockClusters = []networkingv1alpha1.ClusterObject{{Name: "m2"}}
	got := TrafficOf(mci)
	want := Traffic{IPv4: []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}, IPv6: []string{"2001:db8::1"}, Blocked: true, Placed: true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("TrafficOf (-want +got):\n%s", diff)
	}
	if got := TrafficOf(ingress("a", "empty", 1, "x.example.com")); got.Placed || got.Blocked || len(got.IPv4)+len(got.IPv6) != 0 {
		t.Fatalf("an ingress without status: %+v", got)
	}
}

func TestEndpointsOnePerHostAndFamily(t *testing.T) {
	got := Endpoints([]string{"b.example.com.", "*.a.example.com."}, Traffic{IPv4: []string{"10.0.0.1"}, IPv6: []string{"2001:db8::1"}}, 5)
	want := []Endpoint{
		{DNSName: "*.a.example.com", Targets: []string{"10.0.0.1"}, RecordType: "A", RecordTTL: 5},
		{DNSName: "*.a.example.com", Targets: []string{"2001:db8::1"}, RecordType: "AAAA", RecordTTL: 5},
		{DNSName: "b.example.com", Targets: []string{"10.0.0.1"}, RecordType: "A", RecordTTL: 5},
		{DNSName: "b.example.com", Targets: []string{"2001:db8::1"}, RecordType: "AAAA", RecordTTL: 5},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("Endpoints (-want +got):\n%s", diff)
	}
	if got := Endpoints([]string{"b.example.com."}, Traffic{IPv4: []string{"10.0.0.1"}}, 5); len(got) != 1 || got[0].RecordType != "A" {
		t.Fatalf("an IPv4-only decision must publish no AAAA set: %+v", got)
	}
	if got := Endpoints([]string{"b.example.com."}, Traffic{}, 5); len(got) != 0 {
		t.Fatalf("no address, no record set (never a set without targets): %+v", got)
	}
}

// A tenant's ingress never publishes a host an older ingress of another
// tenant claimed first, whatever case or trailing dot it writes it with.
func TestOwnedHostsOneOwnerPerHost(t *testing.T) {
	victim := ingress("team-a", "shop", 1, "shop.example.com")
	attacker := ingress("team-b", "evil", 2, "SHOP.example.com.", "evil.example.com")
	claimants := []*networkingv1alpha1.MultiClusterIngress{attacker, victim}
	if got := OwnedHosts(attacker, claimants); !slices.Equal(got, []string{"evil.example.com."}) {
		t.Fatalf("the newer ingress owns %v, want only evil.example.com.", got)
	}
	if got := OwnedHosts(victim, claimants); !slices.Equal(got, []string{"shop.example.com."}) {
		t.Fatalf("the older ingress owns %v, want shop.example.com.", got)
	}
	// The owner gone, the next claimant owns the host.
	if got := OwnedHosts(attacker, claimants[:1]); !slices.Equal(got, []string{"evil.example.com.", "shop.example.com."}) {
		t.Fatalf("with the owner deleted the claimant owns %v", got)
	}
}

func TestPublish(t *testing.T) {
	owned := []string{"web.example.com."}
	seen := Traffic{IPv4: []string{"10.0.0.2"}, Placed: true}
	published := Endpoints(owned, Traffic{IPv4: []string{"10.0.0.1"}}, 5)
	foreign := append(slices.Clone(published), Endpoint{DNSName: "lost.example.com", Targets: []string{"10.0.0.1"}, RecordType: "A"})
	for _, tc := range []struct {
		name      string
		fleetSeen bool
		published []Endpoint
		traffic   Traffic
		want      []Endpoint
		hold      string
	}{
		{name: "a failover is published", fleetSeen: true, published: published, traffic: seen, want: Endpoints(owned, seen, 5)},
		{name: "first publication", fleetSeen: true, traffic: seen, want: Endpoints(owned, seen, 5)},
		{name: "fleet unseen keeps the published records", published: published, traffic: seen, want: published, hold: HoldFleetUnseen},
		{name: "fleet unseen publishes nothing new", traffic: seen, want: []Endpoint{}, hold: HoldFleetUnseen},
		{name: "fleet unseen still drops a host no longer owned", published: foreign, traffic: seen, want: published, hold: HoldFleetUnseen},
		{name: "placed, unblocked, no address: kept", fleetSeen: true, published: published, traffic: Traffic{Placed: true},
			want: published, hold: HoldAddressesUnseen},
		{name: "every cluster blocked: the block holds", fleetSeen: true, published: published, traffic: Traffic{Placed: true, Blocked: true}},
		{name: "backends placed nowhere: the records go", fleetSeen: true, published: published, traffic: Traffic{}},
		{name: "placed, no address, nothing published: nothing", fleetSeen: true, traffic: Traffic{Placed: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, hold := Publish(tc.fleetSeen, tc.published, owned, tc.traffic, 5)
			if hold != tc.hold {
				t.Errorf("hold %q, want %q", hold, tc.hold)
			}
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b []Endpoint) bool { return len(a) == 0 && len(b) == 0 || cmp.Equal(a, b) })); diff != "" {
				t.Errorf("endpoints (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPublishInvariants: over random inputs, (1) nothing is published for
// a host the ingress does not own, (2) while the fleet is unseen the
// output is a subset of what was published, (3) published addresses are
// replaced with none only by a block, a placement without backends or the
// loss of the hosts. FLOTILLA_DNSENDPOINT_SEED=<n> replays a run.
func TestPublishInvariants(t *testing.T) {
	seed := time.Now().UnixNano()
	if v, err := strconv.ParseInt(os.Getenv("FLOTILLA_DNSENDPOINT_SEED"), 10, 64); err == nil {
		seed = v
	}
	r := rand.New(rand.NewPCG(uint64(seed), 0))
	hosts := []string{"a.example.com.", "b.example.com.", "*.c.example.com."}
	addrs := []string{"10.0.0.1", "10.0.0.2", "2001:db8::1"}
	pick := func(from []string) []string {
		var out []string
		for _, s := range from {
			if r.IntN(2) == 0 {
				out = append(out, s)
			}
		}
		return out
	}
	traffic := func() Traffic {
		var t Traffic
		for _, a := range pick(addrs) {
			if a[0] == '2' {
				t.IPv6 = append(t.IPv6, a)
			} else {
				t.IPv4 = append(t.IPv4, a)
			}
		}
		t.Blocked, t.Placed = r.IntN(2) == 0, r.IntN(2) == 0
		return t
	}
	for i := 0; i < 5000; i++ {
		owned := pick(hosts)
		published := Endpoints(pick(hosts), traffic(), 5)
		tr := traffic()
		fleetSeen := r.IntN(2) == 0
		got, hold := Publish(fleetSeen, published, owned, tr, 5)
		fail := func(msg string) {
			t.Fatalf("seed %d (replay: FLOTILLA_DNSENDPOINT_SEED=%d go test ./pkg/hub/dnsendpoint -run TestPublishInvariants), case %d: %s\n"+
				"fleetSeen=%v owned=%v traffic=%+v published=%+v -> %+v (hold %q)", seed, seed, i, msg, fleetSeen, owned, tr, published, got, hold)
		}
		for _, ep := range got {
			if !slices.Contains(owned, ep.DNSName+".") {
				fail(fmt.Sprintf("published %s, which the ingress does not own", ep.DNSName))
			}
			if !fleetSeen && !slices.ContainsFunc(published, func(p Endpoint) bool { return cmp.Equal(p, ep) }) {
				fail(fmt.Sprintf("fleet unseen but %s %s is new", ep.DNSName, ep.RecordType))
			}
		}
		ownedPublished := slices.ContainsFunc(published, func(p Endpoint) bool { return slices.Contains(owned, p.DNSName+".") })
		if ownedPublished && len(got) == 0 && !tr.Blocked && tr.Placed {
			fail("published addresses blanked though nothing blocks the backends and they are placed")
		}
	}
}
