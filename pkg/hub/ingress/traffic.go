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

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	networkingv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/networking/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	remedyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/remedy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/clusteraffinity"
	"github.com/flotilla-io/flotilla/pkg/hub/dnstraffic"
	"github.com/flotilla-io/flotilla/pkg/statuslimits"
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
	// Workloads are, by backend Service name, the bindings of the
	// workloads whose pods the Service selects: a cluster where one of
	// them is Unhealthy does not serve the Service.
	Workloads map[string][]*workv1alpha1.ResourceBinding
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
	// HostConflicts are the ingress's hosts that an older ingress owns and
	// HostsNotAllowed the ones its namespace may not claim
	// (dnstraffic.Owners); InvalidHosts are the ones that are not host
	// names. The DNS traffic manager serves none of them for this ingress.
	HostConflicts   []dnstraffic.HostConflict
	HostsNotAllowed []dnstraffic.HostNotAllowed
	InvalidHosts    []string
}

// Decision is an ingress's traffic: its new status and which clusters serve.
type Decision struct {
	Status networkingv1alpha1.MultiClusterIngressStatus
	// Serving are the clusters whose addresses are served, sorted.
	Serving []string
	// FailOpen is set when no backend cluster is confirmed or unconfirmed
	// healthy (below), so the unblocked ones are served instead of none.
	FailOpen bool
}

// health is what the hub knows of one backend cluster, best first.
type health int

const (
	// healthy: Ready, every backend Service placed there has ready
	// endpoints and no workload behind them is Unhealthy.
	healthy health = iota
	// unconfirmed: as healthy, except that some backend Service has not
	// reported endpoint counts there (a new copy, or an agent that does
	// not count them).
	unconfirmed
	// unhealthy: not Ready, or no ready endpoints, or a workload is
	// Unhealthy.
	unhealthy
	// blocked: a TrafficControl remedy action, or no such cluster.
	blocked
)

// Decide computes an ingress's traffic. Every cluster a backend Service is
// placed on gets a verdict:
//
//   - healthy: Ready, not blocked by a Remedy's TrafficControl, every
//     backend Service placed there reports ready endpoints, and no workload
//     behind them is Unhealthy there;
//   - unconfirmed: as healthy, but some Service there has never reported
//     its endpoints;
//   - unhealthy or blocked otherwise.
//
// The healthy clusters serve; when there are none, the unconfirmed ones;
// when there are none either, every unblocked one (fail open): a hub that
// cannot confirm any backend must not take a working application off the
// air, while an admin's or a Remedy's block always holds. The strategy
// (spec.strategy) then picks among them: failover keeps the first group
// that has one, roundRobin weighs them.
func Decide(spec *networkingv1alpha1.MultiClusterIngressSpec, in Inputs) Decision {
	var d Decision
	placed := map[string]bool{}
	backends := BackendServices(&spec.IngressSpec)
	placedOn := map[string][]string{} // cluster -> backend Services placed there
	for _, svc := range backends {
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
			placedOn[c] = append(placedOn[c], svc)
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
	verdict := make(map[string]health, len(candidates))
	traffic := make([]networkingv1alpha1.ClusterTraffic, 0, len(candidates))
	best := blocked
	for _, name := range candidates {
		ct := networkingv1alpha1.ClusterTraffic{Name: name}
		h := healthy
		cl := in.Clusters[name]
		switch {
		case cl == nil:
			h, ct.Reason = blocked, networkingv1alpha1.TrafficReasonClusterNotFound
		case slices.Contains(cl.Status.RemedyActions, string(remedyv1alpha1.TrafficControl)):
			since, ok := blockedSince[name]
			if !ok {
				since = in.Now
			}
			d.Status.TrafficBlockClusters = append(d.Status.TrafficBlockClusters, networkingv1alpha1.ClusterObject{Name: name, BlockingTimestamp: since})
			h, ct.Reason = blocked, networkingv1alpha1.TrafficReasonBlocked
		}
		if h != blocked {
			var reason string
			h, reason, ct.ReadyEndpoints = backendHealth(in, name, placedOn[name])
			if !meta.IsStatusConditionTrue(cl.Status.Conditions, clusterv1alpha1.ClusterConditionReady) {
				h, reason = unhealthy, networkingv1alpha1.TrafficReasonClusterNotReady
			}
			ct.Reason = reason
		}
		verdict[name] = h
		best = min(best, h)
		traffic = append(traffic, ct)
	}
	eligible := func(h health) bool { return h == best || best == unhealthy && h != blocked }
	d.FailOpen = best == unhealthy
	var pool []string
	for _, name := range candidates {
		if best != blocked && eligible(verdict[name]) {
			pool = append(pool, name)
		}
	}
	weights, standby := applyStrategy(spec.Strategy, pool, in.Clusters)

	addrs := make(map[string][]networkingv1.IngressLoadBalancerIngress, len(pool))
	var lbs []networkingv1.IngressLoadBalancerIngress
	for i := range traffic {
		ct := &traffic[i]
		w, serving := weights[ct.Name]
		switch {
		case serving:
			d.Serving = append(d.Serving, ct.Name)
			ct.Serving, ct.Weight = true, w
			if d.FailOpen {
				ct.Reason = networkingv1alpha1.TrafficReasonFailOpen
			} else if verdict[ct.Name] == unconfirmed {
				ct.Reason = networkingv1alpha1.TrafficReasonUnconfirmed
			}
			for _, svc := range placedOn[ct.Name] {
				for _, rb := range in.Services[svc] {
					addrs[ct.Name] = append(addrs[ct.Name], loadBalancer(rb, ct.Name)...)
				}
			}
			for _, rb := range in.Ingresses {
				addrs[ct.Name] = append(addrs[ct.Name], loadBalancer(rb, ct.Name)...)
			}
			ct.Addresses = sortAddresses(addrs[ct.Name])
			if len(ct.Addresses) > maxClusterAddresses {
				ct.Addresses = ct.Addresses[:maxClusterAddresses]
			}
			lbs = append(lbs, ct.Addresses...)
		case standby[ct.Name] != "":
			ct.Reason = standby[ct.Name]
		}
	}
	d.Status.Clusters = traffic
	d.Status.LoadBalancer.Ingress = sortAddresses(lbs)

	if in.Previous != nil {
		d.Status.Conditions = slices.Clone(in.Previous.Conditions) // never write into the cache's copy
	}
	cond := HostsAdmitted(in.HostsNotAllowed, in.HostConflicts, in.InvalidHosts)
	cond.ObservedGeneration, cond.LastTransitionTime = in.Generation, in.Now
	meta.SetStatusCondition(&d.Status.Conditions, cond)
	return d
}

// maxClusterAddresses bounds the addresses one cluster contributes (the
// CRD's maxItems of status.clusters[].addresses).
const maxClusterAddresses = 64

// backendHealth judges the backend Services placed on cluster from what
// its agent reported: the smallest ready-endpoint count over them (nil
// when one has not reported), and whether a workload behind one is
// Unhealthy there. A Service bound by several templates counts once per
// binding that places it there.
func backendHealth(in Inputs, cluster string, services []string) (health, string, *int32) {
	h, reason := healthy, networkingv1alpha1.TrafficReasonHealthy
	var least *int32
	unknown := false
	for _, svc := range services {
		for _, rb := range in.Services[svc] {
			if !placedOnCluster(rb, cluster) {
				continue
			}
			item := statusOn(rb, cluster)
			if item == nil || item.ReadyEndpoints == nil {
				unknown = true
				continue
			}
			if n := *item.ReadyEndpoints; least == nil || n < *least {
				least = ptr.To(n)
			}
		}
		for _, rb := range in.Workloads[svc] {
			if item := statusOn(rb, cluster); item != nil && placedOnCluster(rb, cluster) && item.Health == workv1alpha1.ResourceUnhealthy {
				h, reason = unhealthy, networkingv1alpha1.TrafficReasonWorkloadUnhealthy
			}
		}
	}
	switch {
	case least != nil && *least <= 0:
		h, reason = unhealthy, networkingv1alpha1.TrafficReasonNoReadyEndpoints
	case h == unhealthy:
	case unknown:
		h, reason = unconfirmed, networkingv1alpha1.TrafficReasonEndpointsNotReported
	}
	if unknown {
		least = nil
	}
	return h, reason, least
}

func placedOnCluster(rb *workv1alpha1.ResourceBinding, cluster string) bool {
	return slices.ContainsFunc(rb.Spec.Clusters, func(tc workv1alpha1.TargetCluster) bool { return tc.Name == cluster })
}

func statusOn(rb *workv1alpha1.ResourceBinding, cluster string) *workv1alpha1.AggregatedStatusItem {
	for i := range rb.Status.AggregatedStatus {
		if rb.Status.AggregatedStatus[i].ClusterName == cluster {
			return &rb.Status.AggregatedStatus[i]
		}
	}
	return nil
}

// applyStrategy picks, from the clusters that may serve (pool, sorted),
// those that do and their weights, and says why each other one does not.
//
//   - No strategy, or roundRobin without weights: every cluster, weight 1.
//   - roundRobin with weights: the clusters with a weight above 0; when
//     none has one, every cluster with weight 1 (ZeroWeight is a standby).
//   - failover: the clusters of the first group (failoverOrder, or the
//     primaryGeoTag region then the rest) that has one, weight 1; the
//     clusters in no group form the last group.
func applyStrategy(st *networkingv1alpha1.TrafficStrategy, pool []string, clusters map[string]*clusterv1alpha1.Cluster) (map[string]int32, map[string]string) {
	weights := make(map[string]int32, len(pool))
	standby := map[string]string{}
	all := func() {
		for _, c := range pool {
			weights[c] = 1
		}
	}
	switch {
	case st == nil || st.Type == networkingv1alpha1.StrategyRoundRobin && len(st.Weight) == 0:
		all()
	case st.Type == networkingv1alpha1.StrategyRoundRobin:
		for _, c := range pool {
			if w := st.Weight[c]; w > 0 {
				weights[c] = w
			} else {
				standby[c] = networkingv1alpha1.TrafficReasonZeroWeight
			}
		}
		if len(weights) == 0 {
			all()
			clear(standby)
		}
	case st.Type == networkingv1alpha1.StrategyFailover:
		groups := failoverGroups(st)
		first := len(groups) // the implicit last group
		group := make(map[string]int, len(pool))
		for _, c := range pool {
			group[c] = len(groups)
			for i := range groups {
				if cl := clusters[c]; cl != nil && groups[i].matches(cl) {
					group[c] = i
					break
				}
			}
			first = min(first, group[c])
		}
		for _, c := range pool {
			if group[c] == first {
				weights[c] = 1
			} else {
				standby[c] = networkingv1alpha1.TrafficReasonStandby
			}
		}
	default: // a type the CRD does not admit: serve rather than guess
		all()
	}
	return weights, standby
}

// failoverGroup is a FailoverGroup ready to match clusters: its label
// selector parsed once, not once per cluster.
type failoverGroup struct {
	affinity policyv1alpha1.ClusterAffinity // without its label selector
	labels   labels.Selector                // nil: any labels
	invalid  bool                           // a selector that does not parse matches nothing
}

func (g *failoverGroup) matches(cl *clusterv1alpha1.Cluster) bool {
	return !g.invalid && (g.labels == nil || g.labels.Matches(labels.Set(cl.Labels))) && clusteraffinity.Matches(&g.affinity, cl)
}

// failoverGroups are the groups of a failover strategy, in order:
// failoverOrder's, or one selecting the primaryGeoTag region.
func failoverGroups(st *networkingv1alpha1.TrafficStrategy) []failoverGroup {
	if st.PrimaryGeoTag != "" {
		return []failoverGroup{{affinity: policyv1alpha1.ClusterAffinity{FieldSelector: &policyv1alpha1.FieldSelector{
			MatchExpressions: []policyv1alpha1.FieldSelectorRequirement{{Key: policyv1alpha1.RegionField, Operator: corev1.NodeSelectorOpIn, Values: []string{st.PrimaryGeoTag}}}}}}}
	}
	out := make([]failoverGroup, 0, len(st.FailoverOrder))
	for _, fg := range st.FailoverOrder {
		g := failoverGroup{affinity: policyv1alpha1.ClusterAffinity{ClusterNames: fg.ClusterNames, ExcludeClusters: fg.ExcludeClusters}}
		if fs := fg.FieldSelector; fs != nil {
			g.affinity.FieldSelector = &policyv1alpha1.FieldSelector{}
			for _, r := range fs.MatchExpressions {
				g.affinity.FieldSelector.MatchExpressions = append(g.affinity.FieldSelector.MatchExpressions,
					policyv1alpha1.FieldSelectorRequirement{Key: r.Key, Operator: r.Operator, Values: r.Values})
			}
		}
		if ls := fg.LabelSelector; ls != nil {
			sel := &metav1.LabelSelector{MatchLabels: ls.MatchLabels}
			for _, r := range ls.MatchExpressions {
				sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{Key: r.Key, Operator: r.Operator, Values: r.Values})
			}
			parsed, err := metav1.LabelSelectorAsSelector(sel)
			g.labels, g.invalid = parsed, err != nil
		}
		out = append(out, g)
	}
	return out
}

// ReasonInvalidHost: a host of the ingress is not a host name in any
// spelling (hostnames.Canonical), so the DNS traffic manager never serves
// it.
const ReasonInvalidHost = "InvalidHost"

// maxListed bounds the hosts a condition message names, maxInvalidLen
// the bytes of an invalid host it quotes.
const (
	maxListed     = 10
	maxInvalidLen = 64
)

// HostsAdmitted is the ingress's HostsAdmitted condition (without times):
// False with reason HostNotAllowed naming each host its namespace may not
// claim and the rule's domain, else False with reason HostConflict naming
// each lost host and its owner when an older ingress owns one of its hosts,
// else False with reason InvalidHost when a host is not a host name, else
// True. The message names every kind of lost host, the first reason being
// the one an admin's rule makes permanent.
func HostsAdmitted(notAllowed []dnstraffic.HostNotAllowed, conflicts []dnstraffic.HostConflict, invalid []string) metav1.Condition {
	c := metav1.Condition{Type: networkingv1alpha1.ConditionHostsAdmitted}
	var msgs []string
	if len(notAllowed) > 0 {
		var parts []string
		for i, na := range notAllowed {
			if i == maxListed {
				parts = append(parts, fmt.Sprintf("and %d more", len(notAllowed)-maxListed))
				break
			}
			parts = append(parts, fmt.Sprintf("%s (within %s)", na.Host, na.Domain))
		}
		msgs = append(msgs, "hosts this namespace may not claim (the hub's --ingress-host-namespaces), never served for this ingress: "+strings.Join(parts, ", "))
	}
	if len(conflicts) > 0 {
		var parts []string
		for i, hc := range conflicts {
			if i == maxListed {
				parts = append(parts, fmt.Sprintf("and %d more", len(conflicts)-maxListed))
				break
			}
			if hc.Above != "" {
				parts = append(parts, fmt.Sprintf("%s (owner %s, of %s in another namespace, --ingress-host-subtree-ownership)", hc.Host, hc.Owner, hc.Above))
				continue
			}
			parts = append(parts, fmt.Sprintf("%s (owner %s)", hc.Host, hc.Owner))
		}
		msgs = append(msgs, "hosts owned by an older MultiClusterIngress, for which the DNS traffic manager serves the owner's addresses, not this ingress's: "+
			strings.Join(parts, ", "))
	}
	if len(invalid) > 0 {
		quoted := make([]string, 0, min(len(invalid), maxListed))
		for _, h := range invalid[:min(len(invalid), maxListed)] {
			h = statuslimits.Truncate(h, maxInvalidLen) // a host can be any string: keep the message under the API's limit
			quoted = append(quoted, strconv.Quote(h))
		}
		msg := fmt.Sprintf("%s not a host name (use lowercase letters, digits, '-' and punycode, no trailing dot), never served", strings.Join(quoted, ", "))
		if len(invalid) > maxListed {
			msg += fmt.Sprintf(" (and %d more)", len(invalid)-maxListed)
		}
		msgs = append(msgs, msg)
	}
	switch {
	case len(notAllowed) > 0:
		c.Status, c.Reason = metav1.ConditionFalse, networkingv1alpha1.ReasonHostNotAllowed
	case len(conflicts) > 0:
		c.Status, c.Reason = metav1.ConditionFalse, networkingv1alpha1.ReasonHostConflict
	case len(invalid) > 0:
		c.Status, c.Reason = metav1.ConditionFalse, ReasonInvalidHost
	default:
		c.Status, c.Reason = metav1.ConditionTrue, networkingv1alpha1.ReasonHostsAdmitted
		msgs = []string{"this ingress owns every host it names: no older MultiClusterIngress claims one"}
	}
	c.Message = strings.Join(msgs, "; ")
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
