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
	"cmp"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	networkingv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/networking/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/dnstraffic"
)

// Traffic is what the hub's traffic decision says to answer for one
// MultiClusterIngress: the only thing this package reads of it.
type Traffic struct {
	// Hosts are the answers of the hosts the ingress owns, as
	// dnstraffic.HostAnswers decides them for the embedded DNS server,
	// sorted by host.
	Hosts []dnstraffic.HostAnswer
	// Blocked: a TrafficControl block (an admin's or a Remedy's) takes at
	// least one backend cluster out of traffic.
	Blocked bool
	// Placed: at least one backend Service is placed on a cluster.
	Placed bool
}

// TrafficOf reads the ingress controller's decision (ingress.Decide, which
// its status records) through dnstraffic.HostAnswers, the function the
// embedded DNS server answers from: the same owner per host, the same
// serving clusters, weights, addresses, hostnames and TTL, so the two
// outputs answer the same. claimants are the ingresses sharing a host with
// mci, mci included; an owner depends only on its host's claimants (and
// rules, the namespaces allowed per domain), so this decides mci's hosts
// as HostAnswers over every ingress does.
func TrafficOf(mci *networkingv1alpha1.MultiClusterIngress, claimants []*networkingv1alpha1.MultiClusterIngress, rules dnstraffic.DomainRules) Traffic {
	var t Traffic
	answers, _ := dnstraffic.HostAnswers(claimants, rules)
	ref := dnstraffic.RefOf(mci)
	for _, a := range answers {
		if a.Owner == ref {
			t.Hosts = append(t.Hosts, a)
		}
	}
	t.Blocked = len(mci.Status.TrafficBlockClusters) > 0
	for _, loc := range mci.Status.ServiceLocations {
		if len(loc.Clusters) > 0 {
			t.Placed = true
		}
	}
	return t
}

// owned are the hosts of t as ownership keys (canonical, as published).
func (t Traffic) owned() []string {
	keys := make([]string, 0, len(t.Hosts))
	for _, a := range t.Hosts {
		keys = append(keys, a.Host)
	}
	return keys
}

// answered says whether some host has a target: a cluster that serves and
// has an address or a hostname. An ingress's hosts share its targets, so
// this is all or none.
func (t Traffic) answered() bool {
	return slices.ContainsFunc(t.Hosts, func(a dnstraffic.HostAnswer) bool { return len(a.Targets) > 0 })
}

// Endpoint is one record set of a DNSEndpoint (externaldns.k8s.io/v1alpha1
// spec.endpoints[]; the same JSON field names).
type Endpoint struct {
	DNSName    string   `json:"dnsName"`
	Targets    []string `json:"targets"`
	RecordType string   `json:"recordType"`
	// SetIdentifier tells apart the record sets of one name and type that
	// a provider's routing policy (weights) chooses between; set only
	// when Records.WeightProperty is.
	SetIdentifier    string                     `json:"setIdentifier,omitempty"`
	RecordTTL        int64                      `json:"recordTTL,omitempty"`
	ProviderSpecific []ProviderSpecificProperty `json:"providerSpecific,omitempty"`
}

// ProviderSpecificProperty is a setting for the DNS provider only
// (ExternalDNS's providerSpecific[]), e.g. {aws/weight, 3}.
type ProviderSpecificProperty struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Record types the hub publishes.
const (
	RecordTypeA     = "A"
	RecordTypeAAAA  = "AAAA"
	RecordTypeCNAME = "CNAME"
	RecordTypeTXT   = "TXT"
)

// NoAddressText is the text of the TXT record a host without addresses is
// published with: it makes the name exist in the provider's zone, so no
// wildcard answers it (RFC 4592 4.1: a wildcard answers only names that
// do not exist), as the embedded server answers it NODATA.
const NoAddressText = "flotilla: no cluster serves this name"

// Records says how host answers become record sets.
type Records struct {
	// TTL in seconds of the hosts whose ingress sets no
	// spec.strategy.dnsTtlSeconds.
	TTL int64
	// WeightProperty is the provider-specific property that carries a
	// record set's weight, e.g. aws/weight (Route53); "" when the provider
	// has no weighted records. Only then are record sets published per
	// cluster, with a setIdentifier: providers without weighted records
	// rewrite such records on every run (CoreDNS) or drop the identifier.
	WeightProperty string
}

// Endpoints are the record sets of hosts (dnstraffic.HostAnswer), sorted by
// name, set identifier, then type. Per host, as the embedded DNS answers:
//
//   - IPv4 addresses are an A set, IPv6 an AAAA set, a hostname load
//     balancer a CNAME; a family without an address gets no set.
//   - A name holds a CNAME or addresses, never both (RFC 1034 3.6.2): the
//     embedded server alternates between such answers query by query, but
//     a record set cannot, so while some cluster has IPs the hostname
//     clusters are left out.
//   - With r.WeightProperty, a weighted host (spec.strategy.weight), and a
//     host answered by several hostname clusters, get the records of each
//     cluster apart, with setIdentifier = the cluster and the weight
//     property = its weight, for the provider to answer them in the
//     weights' shares as the embedded server does.
//   - Without it, a weighted host's IP clusters are one A / AAAA set
//     (every serving cluster answered, weights not honoured), and of
//     several hostname clusters only the heaviest (then the first by name)
//     is published: a name holds one CNAME.
//   - The TTL is the ingress's (HostAnswer.TTL), else r.TTL.
//   - A host without targets (every cluster blocked, or placed nowhere)
//     gets one TXT record (NoAddressText) and no address: the name exists,
//     without addresses, so no other owner's wildcard answers it in the
//     provider's zone (RFC 4592), as none does in the embedded server's.
//
// DNSName is the host exactly as ownership was decided on it (canonical).
func Endpoints(hosts []dnstraffic.HostAnswer, r Records) []Endpoint {
	var out []Endpoint
	for i := range hosts {
		out = append(out, hostEndpoints(&hosts[i], r)...)
	}
	slices.SortFunc(out, func(a, b Endpoint) int {
		return cmp.Or(strings.Compare(a.DNSName, b.DNSName), strings.Compare(a.SetIdentifier, b.SetIdentifier),
			strings.Compare(a.RecordType, b.RecordType))
	})
	return out
}

func hostEndpoints(a *dnstraffic.HostAnswer, r Records) []Endpoint {
	name := a.Host
	ttl := r.TTL
	if a.TTL > 0 {
		ttl = int64(a.TTL / time.Second)
	}
	var addressed, named []dnstraffic.Target
	for _, t := range a.Targets {
		switch {
		case len(t.IPs) > 0:
			addressed = append(addressed, t)
		case t.Hostname != "":
			named = append(named, t)
		}
	}
	var out []Endpoint
	add := func(typ string, targets []string, t *dnstraffic.Target) {
		if len(targets) == 0 {
			return
		}
		ep := Endpoint{DNSName: name, Targets: targets, RecordType: typ, RecordTTL: ttl}
		if t != nil {
			ep.SetIdentifier = t.Cluster
			ep.ProviderSpecific = []ProviderSpecificProperty{{Name: r.WeightProperty, Value: strconv.Itoa(int(t.Weight))}}
		}
		out = append(out, ep)
	}
	addresses := func(ts []dnstraffic.Target, set *dnstraffic.Target) {
		var v4, v6 []netip.Addr
		for _, t := range ts {
			for _, ip := range t.IPs {
				if ip.Is4() {
					v4 = append(v4, ip)
				} else {
					v6 = append(v6, ip)
				}
			}
		}
		add(RecordTypeA, ipStrings(v4), set)
		add(RecordTypeAAAA, ipStrings(v6), set)
	}
	weighted := r.WeightProperty != "" && (a.Weighted || len(addressed) == 0 && len(named) > 1)
	switch {
	case weighted && len(addressed) > 0:
		for i := range addressed {
			addresses(addressed[i:i+1], &addressed[i])
		}
	case weighted:
		for i := range named {
			add(RecordTypeCNAME, []string{strings.TrimSuffix(named[i].Hostname, ".")}, &named[i])
		}
	case len(addressed) > 0:
		addresses(addressed, nil)
	case len(named) > 0:
		// The heaviest; MaxFunc returns the first of equals, and Targets
		// are sorted by cluster.
		heaviest := slices.MaxFunc(named, func(x, y dnstraffic.Target) int { return cmp.Compare(x.Weight, y.Weight) })
		add(RecordTypeCNAME, []string{strings.TrimSuffix(heaviest.Hostname, ".")}, nil)
	}
	if len(out) == 0 {
		add(RecordTypeTXT, []string{NoAddressText}, nil)
	}
	return out
}

// ipStrings are ips sorted, deduplicated, in their text form.
func ipStrings(ips []netip.Addr) []string {
	slices.SortFunc(ips, netip.Addr.Compare)
	ips = slices.Compact(ips)
	out := make([]string, 0, len(ips))
	for _, ip := range ips {
		out = append(out, ip.String())
	}
	return out
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
	// HoldDecisionStale: the recorded decision failed open, yet the
	// cluster cache shows a backend cluster that would now be served on
	// its own (StaleFailOpen): the decision was made while the hub could
	// not see it (the fleet just came back) and the ingress controller has
	// not decided again yet. Publishing it would publish the blind
	// period's guess.
	HoldDecisionStale = "DecisionStale"
)

// StaleFailOpen says whether status records a fail-open decision (no
// backend cluster was healthy, so every unblocked one was served) that the
// clusters' Ready now contradicts: some unblocked backend cluster is Ready
// (ready says so, from the cluster cache) and not known to have no ready
// endpoints, so a fresh decision would serve it as healthy or unconfirmed
// rather than fail open. A cluster Ready with 0 ready endpoints does not
// contradict it: the fresh decision would fail open the same way. (A
// cluster Ready whose workloads are Unhealthy looks the same as a stale
// one in the status; the controller bounds the hold for that case.)
func StaleFailOpen(status *networkingv1alpha1.MultiClusterIngressStatus, ready func(cluster string) bool) bool {
	if !slices.ContainsFunc(status.Clusters, func(c networkingv1alpha1.ClusterTraffic) bool {
		return c.Reason == networkingv1alpha1.TrafficReasonFailOpen
	}) {
		return false
	}
	for _, c := range status.Clusters {
		switch {
		case c.Reason == networkingv1alpha1.TrafficReasonBlocked, c.Reason == networkingv1alpha1.TrafficReasonClusterNotFound:
		case c.ReadyEndpoints != nil && *c.ReadyEndpoints <= 0:
		case ready(c.Name):
			return true
		}
	}
	return false
}

// Publish decides the endpoints of an ingress's DNSEndpoint: desired
// (Endpoints of the hosts it owns), or, when the hub cannot see enough to
// decide, the published ones kept (fail static) with the hold reason.
// blind is the controller's reason not to trust the decision
// (HoldFleetUnseen: no cluster has reported or none is Ready;
// HoldDecisionStale), "" when it can. published is what the DNSEndpoint
// holds now (nil: none). The hub never replaces published
// records with none because it cannot see: only a block or a placement
// without backends empties a host. Even a hold drops hosts the ingress no
// longer owns: ownership comes from the ingresses' specs, which the hub
// always sees, and a tenant's records must never outlive its claim.
func Publish(blind string, published []Endpoint, t Traffic, r Records) ([]Endpoint, string) {
	hold := blind
	switch {
	case hold != "":
	case !t.answered() && t.Placed && !t.Blocked && len(published) > 0:
		hold = HoldAddressesUnseen
	}
	if hold == "" {
		return Endpoints(t.Hosts, r), ""
	}
	owned := t.owned()
	kept := make([]Endpoint, 0, len(published))
	for _, ep := range published {
		if slices.Contains(owned, ep.DNSName) {
			kept = append(kept, ep)
		}
	}
	return kept, hold
}
