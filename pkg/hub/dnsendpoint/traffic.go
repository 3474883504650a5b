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
	"net/netip"
	"slices"
	"strings"

	networkingv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/networking/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/dnstraffic"
)

// Traffic is what the hub's traffic decision says to answer for one
// MultiClusterIngress: the only thing this package reads of it.
type Traffic struct {
	// IPv4 and IPv6 are the addresses of the clusters that get traffic,
	// sorted and deduplicated.
	IPv4, IPv6 []string
	// Blocked: a TrafficControl block (an admin's or a Remedy's) takes at
	// least one backend cluster out of traffic.
	Blocked bool
	// Placed: at least one backend Service is placed on a cluster.
	Placed bool
}

// TrafficOf reads the ingress controller's decision (ingress.Decide) from
// the ingress's status, where it is recorded, exactly as the embedded DNS
// traffic manager (dnstraffic) does: the two outputs answer the same.
// Load balancers published as hostnames are not answered (as in dnstraffic).
func TrafficOf(mci *networkingv1alpha1.MultiClusterIngress) Traffic {
	var t Traffic
	for _, lb := range mci.Status.LoadBalancer.Ingress {
		addr, err := netip.ParseAddr(lb.IP)
		switch {
		case err != nil:
		case addr.Unmap().Is4():
			t.IPv4 = append(t.IPv4, addr.Unmap().String())
		default:
			t.IPv6 = append(t.IPv6, addr.String())
		}
	}
	for _, ips := range []*[]string{&t.IPv4, &t.IPv6} {
		slices.SortFunc(*ips, func(a, b string) int { return netip.MustParseAddr(a).Compare(netip.MustParseAddr(b)) })
		*ips = slices.Compact(*ips)
	}
	t.Blocked = len(mci.Status.TrafficBlockClusters) > 0
	for _, loc := range mci.Status.ServiceLocations {
		if len(loc.Clusters) > 0 {
			t.Placed = true
		}
	}
	return t
}

// Endpoint is one record set of a DNSEndpoint (externaldns.k8s.io/v1alpha1
// spec.endpoints[]; the same JSON field names).
type Endpoint struct {
	DNSName    string   `json:"dnsName"`
	Targets    []string `json:"targets"`
	RecordType string   `json:"recordType"`
	RecordTTL  int64    `json:"recordTTL,omitempty"`
}

// Record types the hub publishes.
const (
	RecordTypeA    = "A"
	RecordTypeAAAA = "AAAA"
)

// Endpoints are the record sets to publish for an ingress: one A and one
// AAAA set per host it owns (owned: a host as dnstraffic.HostKeys returns
// it), sorted by name then type. A host without an address of a family
// gets no set of that family.
func Endpoints(owned []string, t Traffic, ttlSeconds int64) []Endpoint {
	var out []Endpoint
	for _, key := range owned {
		name := strings.TrimSuffix(key, ".")
		if len(t.IPv4) > 0 {
			out = append(out, Endpoint{DNSName: name, Targets: slices.Clone(t.IPv4), RecordType: RecordTypeA, RecordTTL: ttlSeconds})
		}
		if len(t.IPv6) > 0 {
			out = append(out, Endpoint{DNSName: name, Targets: slices.Clone(t.IPv6), RecordType: RecordTypeAAAA, RecordTTL: ttlSeconds})
		}
	}
	slices.SortFunc(out, func(a, b Endpoint) int {
		if c := strings.Compare(a.DNSName, b.DNSName); c != 0 {
			return c
		}
		return strings.Compare(a.RecordType, b.RecordType)
	})
	return out
}

// OwnedHosts are the hosts of mci that it owns among claimants (every
// ingress sharing a host with it, itself included), as dnstraffic decides
// for the embedded DNS: a tenant never publishes a host an older ingress
// of another namespace claimed first.
func OwnedHosts(mci *networkingv1alpha1.MultiClusterIngress, claimants []*networkingv1alpha1.MultiClusterIngress) []string {
	owners := dnstraffic.Owners(claimants)
	ref := dnstraffic.RefOf(mci)
	keys, _ := dnstraffic.HostKeys(&mci.Spec.IngressSpec)
	owned := keys[:0:0]
	for _, k := range keys {
		if owners.Owns(ref, k) {
			owned = append(owned, k)
		}
	}
	return owned
}

// Hold reasons: why the last published records stay.
const (
	// HoldFleetUnseen: no cluster has reported, or none is Ready (the
	// fleet guard's FullDisruption): the hub assumes it is the one cut
	// off, and what it would publish (the decision's fail-open) is a guess.
	HoldFleetUnseen = "FleetUnseen"
	// HoldAddressesUnseen: the backends are placed and nothing blocks
	// them, yet no address is known: the hub cannot see the load balancers
	// (agents not reporting), not a reason to take the host off the air.
	HoldAddressesUnseen = "AddressesUnseen"
)

// Publish decides the endpoints of an ingress's DNSEndpoint: desired
// (Endpoints of its owned hosts), or, when the hub cannot see enough to
// decide, the published ones kept (fail static) with the hold reason.
// fleetSeen: some cluster has reported and one is Ready. published is what the DNSEndpoint holds now (nil: none).
// The hub never replaces published addresses with none because it cannot
// see: only a block or a placement without backends empties a host. Even
// a hold drops hosts the ingress no longer owns: ownership comes from the
// ingresses' specs, which the hub always sees, and a tenant's records
// must never outlive its claim.
func Publish(fleetSeen bool, published []Endpoint, owned []string, t Traffic, ttlSeconds int64) ([]Endpoint, string) {
	desired := Endpoints(owned, t, ttlSeconds)
	hold := ""
	switch {
	case !fleetSeen:
		hold = HoldFleetUnseen
	case len(t.IPv4)+len(t.IPv6) == 0 && t.Placed && !t.Blocked && len(published) > 0:
		hold = HoldAddressesUnseen
	}
	if hold == "" {
		return desired, ""
	}
	kept := make([]Endpoint, 0, len(published))
	for _, ep := range published {
		if slices.Contains(owned, ep.DNSName+".") {
			kept = append(kept, ep)
		}
	}
	return kept, hold
}
