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

package ingress

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	networkingv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/networking/v1alpha1"
	remedyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/remedy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/dnstraffic"
)

// BackendServices returns the sorted names of the Services the ingress's
// default backend and rules name.
func BackendServices(spec *networkingv1.IngressSpec) []string {
	var names []string
	add := func(b *networkingv1.IngressBackend) {
		if b != nil && b.Service != nil && b.Service.Name != "" {
			names = append(names, b.Service.Name)
		}
	}
	add(spec.DefaultBackend)
	for _, r := range spec.Rules {
		if r.HTTP == nil {
			continue
		}
		for i := range r.HTTP.Paths {
			add(&r.HTTP.Paths[i].Backend)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// Inputs are what one ingress's traffic decision reads.
type Inputs struct {
	// Services are the backend Services' bindings by Service name (a
	// Service may be bound by more than one template).
	Services map[string][]*workv1alpha1.ResourceBinding
	// Ingresses are the bindings of a member Ingress of the same name,
	// whose load balancer also fronts the backends.
	Ingresses []*workv1alpha1.ResourceBinding
	// Clusters by name.
	Clusters map[string]*clusterv1alpha1.Cluster
	// Previous is the ingress's current status (block times and condition
	// transition times are kept).
	Previous *networkingv1alpha1.MultiClusterIngressStatus
	Now      metav1.Time
	// Generation is the ingress's metadata.generation, for the
	// conditions' observedGeneration.
	Generation int64
	// HostConflicts are the ingress's hosts that an older ingress owns
	// (dnstraffic.Owners); InvalidHosts are the ones that are not DNS
	// names. The DNS traffic manager serves neither for this ingress.
	HostConflicts []dnstraffic.HostConflict
	InvalidHosts  []string
}

// Decision is an ingress's traffic: its new status and which clusters serve.
type Decision struct {
	Status networkingv1alpha1.MultiClusterIngressStatus
	// Serving are the clusters whose addresses are served.
	Serving []string
	// FailOpen is set when no backend cluster is Ready and unblocked, so
	// the unblocked ones the hub cannot confirm are served instead of none.
	FailOpen bool
}

// Decide computes an ingress's traffic. A cluster gets traffic when it runs
// a backend, is Ready and carries no TrafficControl remedy action. When
// that leaves no cluster, the clusters that run a backend and are not
// blocked are served anyway (fail open): a hub that cannot see its members
// must not take a working application off the air; an admin's or a
// Remedy's block always holds.
func Decide(spec *networkingv1.IngressSpec, in Inputs) Decision {
	var d Decision
	placed := map[string]bool{}
	for _, svc := range BackendServices(spec) {
		var clusters []string
		for _, rb := range in.Services[svc] {
			for _, tc := range rb.Spec.Clusters {
				clusters = append(clusters, tc.Name)
			}
		}
		slices.Sort(clusters)
		clusters = slices.Compact(clusters)
		for _, c := range clusters {
			placed[c] = true
		}
		d.Status.ServiceLocations = append(d.Status.ServiceLocations, networkingv1alpha1.ServiceLocation{Name: svc, Clusters: clusters})
	}
	candidates := make([]string, 0, len(placed))
	for c := range placed {
		candidates = append(candidates, c)
	}
	slices.Sort(candidates)

	blockedSince := map[string]metav1.Time{}
	if in.Previous != nil {
		for _, b := range in.Previous.TrafficBlockClusters {
			blockedSince[b.Name] = b.BlockingTimestamp
		}
	}
	var unblocked []string
	for _, name := range candidates {
		cl := in.Clusters[name]
		if cl != nil && slices.Contains(cl.Status.RemedyActions, string(remedyv1alpha1.TrafficControl)) {
			since, ok := blockedSince[name]
			if !ok {
				since = in.Now
			}
			d.Status.TrafficBlockClusters = append(d.Status.TrafficBlockClusters, networkingv1alpha1.ClusterObject{Name: name, BlockingTimestamp: since})
			continue
		}
		if cl != nil {
			unblocked = append(unblocked, name)
		}
		if cl != nil && meta.IsStatusConditionTrue(cl.Status.Conditions, clusterv1alpha1.ClusterConditionReady) {
			d.Serving = append(d.Serving, name)
		}
	}
	if len(d.Serving) == 0 && len(unblocked) > 0 {
		d.Serving, d.FailOpen = unblocked, true
	}

	var lbs []networkingv1.IngressLoadBalancerIngress
	for _, name := range d.Serving {
		for _, svc := range d.Status.ServiceLocations {
			for _, rb := range in.Services[svc.Name] {
				lbs = append(lbs, loadBalancer(rb, name)...)
			}
		}
		for _, rb := range in.Ingresses {
			lbs = append(lbs, loadBalancer(rb, name)...)
		}
	}
	d.Status.LoadBalancer.Ingress = sortAddresses(lbs)

	if in.Previous != nil {
		d.Status.Conditions = slices.Clone(in.Previous.Conditions) // never write into the cache's copy
	}
	cond := HostsAdmitted(in.HostConflicts, in.InvalidHosts)
	cond.ObservedGeneration, cond.LastTransitionTime = in.Generation, in.Now
	meta.SetStatusCondition(&d.Status.Conditions, cond)
	return d
}

// ReasonInvalidHost: a host of the ingress is not a DNS name (e.g. Unicode
// rather than punycode), so the DNS traffic manager never serves it.
const ReasonInvalidHost = "InvalidHost"

// maxListed bounds the hosts a condition message names, maxInvalidLen
// the bytes of an invalid host it quotes.
const (
	maxListed     = 10
	maxInvalidLen = 64
)

// HostsAdmitted is the ingress's HostsAdmitted condition (without times):
// False with reason HostConflict naming each lost host and its owner when
// an older ingress owns one of its hosts, False with reason InvalidHost
// when a host is not a DNS name, else True.
func HostsAdmitted(conflicts []dnstraffic.HostConflict, invalid []string) metav1.Condition {
	c := metav1.Condition{Type: networkingv1alpha1.ConditionHostsAdmitted}
	var parts []string
	for i, hc := range conflicts {
		if i == maxListed {
			parts = append(parts, fmt.Sprintf("and %d more", len(conflicts)-maxListed))
			break
		}
		parts = append(parts, fmt.Sprintf("%s (owner %s)", hc.Host, hc.Owner))
	}
	invalidMsg := ""
	if len(invalid) > 0 {
		quoted := make([]string, 0, min(len(invalid), maxListed))
		for _, h := range invalid[:min(len(invalid), maxListed)] {
			if len(h) > maxInvalidLen { // a host can be any string: keep the message under the API's limit
				h = h[:maxInvalidLen] + "..."
			}
			quoted = append(quoted, strconv.Quote(h))
		}
		invalidMsg = fmt.Sprintf("%s not a DNS name (use lowercase punycode), never served", strings.Join(quoted, ", "))
		if len(invalid) > maxListed {
			invalidMsg += fmt.Sprintf(" (and %d more)", len(invalid)-maxListed)
		}
	}
	switch {
	case len(conflicts) > 0:
		c.Status, c.Reason = metav1.ConditionFalse, networkingv1alpha1.ReasonHostConflict
		c.Message = "hosts owned by an older MultiClusterIngress, for which the DNS traffic manager serves the owner's addresses, not this ingress's: " +
			strings.Join(parts, ", ")
		if invalidMsg != "" {
			c.Message += "; " + invalidMsg
		}
	case invalidMsg != "":
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonInvalidHost, invalidMsg
	default:
		c.Status, c.Reason = metav1.ConditionTrue, networkingv1alpha1.ReasonHostsAdmitted
		c.Message = "this ingress owns every host it names: no older MultiClusterIngress claims one"
	}
	return c
}

// loadBalancer reads the load-balancer addresses the agent reported for the
// bound object on cluster (status.loadBalancer.ingress of a Service or an
// Ingress). Garbage in the reported status yields nothing.
func loadBalancer(rb *workv1alpha1.ResourceBinding, cluster string) []networkingv1.IngressLoadBalancerIngress {
	if !slices.ContainsFunc(rb.Spec.Clusters, func(tc workv1alpha1.TargetCluster) bool { return tc.Name == cluster }) {
		return nil
	}
	for _, item := range rb.Status.AggregatedStatus {
		if item.ClusterName != cluster || item.Status == nil {
			continue
		}
		var status struct {
			LoadBalancer struct {
				Ingress []struct {
					IP       string `json:"ip"`
					Hostname string `json:"hostname"`
				} `json:"ingress"`
			} `json:"loadBalancer"`
		}
		if json.Unmarshal(item.Status.Raw, &status) != nil {
			return nil
		}
		var out []networkingv1.IngressLoadBalancerIngress
		for _, in := range status.LoadBalancer.Ingress {
			if addr, err := netip.ParseAddr(in.IP); err == nil {
				out = append(out, networkingv1.IngressLoadBalancerIngress{IP: addr.String()})
			} else if in.Hostname != "" {
				out = append(out, networkingv1.IngressLoadBalancerIngress{Hostname: in.Hostname})
			}
		}
		return out
	}
	return nil
}

// sortAddresses dedupes lbs and sorts them: IPs (in address order) first,
// then hostnames.
func sortAddresses(lbs []networkingv1.IngressLoadBalancerIngress) []networkingv1.IngressLoadBalancerIngress {
	slices.SortFunc(lbs, func(a, b networkingv1.IngressLoadBalancerIngress) int {
		if (a.IP == "") != (b.IP == "") {
			if a.IP != "" {
				return -1
			}
			return 1
		}
		if a.IP != "" {
			return netip.MustParseAddr(a.IP).Compare(netip.MustParseAddr(b.IP))
		}
		return cmp.Compare(a.Hostname, b.Hostname)
	})
	return slices.CompactFunc(lbs, func(a, b networkingv1.IngressLoadBalancerIngress) bool {
		return a.IP == b.IP && a.Hostname == b.Hostname
	})
}
