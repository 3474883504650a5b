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

package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=mci,categories=flotilla
// +kubebuilder:printcolumn:name="HOSTS",type=string,JSONPath=`.spec.rules[*].host`,description="Host of the first rule"
// +kubebuilder:printcolumn:name="BLOCKED",type=string,JSONPath=`.status.trafficBlockClusters[*].name`,description="First cluster whose traffic is blocked"
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`

// MultiClusterIngress routes traffic to a Service that runs on several
// member clusters, leaving out clusters that are not Ready or whose traffic
// a Remedy blocks.
type MultiClusterIngress struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is an Ingress spec, whose backends name Services propagated to
	// the members, and the traffic strategy.
	// +optional
	Spec MultiClusterIngressSpec `json:"spec,omitempty"`

	// Status says where the backends run and which clusters get traffic.
	// +optional
	Status MultiClusterIngressStatus `json:"status,omitempty"`
}

// MultiClusterIngressSpec is an Ingress spec plus how DNS spreads traffic
// over the clusters that serve it.
type MultiClusterIngressSpec struct {
	networkingv1.IngressSpec `json:",inline"`

	// Strategy says how the DNS answers for the ingress's hosts spread
	// traffic over the clusters whose backends are healthy (k8gb's Gslb
	// spec.strategy). Unset: roundRobin over every healthy cluster with
	// the DNS traffic manager's TTL.
	// +optional
	Strategy *TrafficStrategy `json:"strategy,omitempty"`
}

// StrategyType is a traffic strategy.
// +kubebuilder:validation:Enum=roundRobin;failover
type StrategyType string

// Strategy types (k8gb's spelling).
const (
	// StrategyRoundRobin answers every healthy cluster, in the shares of
	// spec.strategy.weight when it is set.
	StrategyRoundRobin StrategyType = "roundRobin"
	// StrategyFailover answers only the first group of
	// spec.strategy.failoverOrder (or of primaryGeoTag) that has a
	// healthy cluster.
	StrategyFailover StrategyType = "failover"
)

// TrafficStrategy is how traffic is spread over healthy clusters. Its
// field names follow k8gb's Gslb spec.strategy; weights and groups name
// Flotilla clusters rather than geo tags.
// +kubebuilder:validation:XValidation:rule="!has(self.weight) || self.type == 'roundRobin'",message="weight applies to type roundRobin only",fieldPath=".weight"
// +kubebuilder:validation:XValidation:rule="!has(self.primaryGeoTag) || self.type == 'failover'",message="primaryGeoTag applies to type failover only",fieldPath=".primaryGeoTag"
// +kubebuilder:validation:XValidation:rule="!has(self.failoverOrder) || self.type == 'failover'",message="failoverOrder applies to type failover only",fieldPath=".failoverOrder"
// +kubebuilder:validation:XValidation:rule="!(has(self.primaryGeoTag) && has(self.failoverOrder))",message="set primaryGeoTag or failoverOrder, not both",fieldPath=".failoverOrder"
// +kubebuilder:validation:XValidation:rule="self.type != 'failover' || has(self.primaryGeoTag) || has(self.failoverOrder)",message="type failover needs primaryGeoTag or failoverOrder",fieldPath=".type"
type TrafficStrategy struct {
	// Type is roundRobin or failover.
	Type StrategyType `json:"type"`

	// Weight is each cluster's relative share of the answers (roundRobin
	// only), by cluster name: 0 to 1000. A healthy cluster that is not
	// listed, or has weight 0, is answered only while no listed cluster
	// with a weight above 0 is healthy. Names of clusters that do not
	// exist (yet) are allowed and count once such a cluster serves.
	// +kubebuilder:validation:MaxProperties=256
	// +kubebuilder:validation:XValidation:rule="self.all(k, self[k] >= 0 && self[k] <= 1000)",message="each weight is between 0 and 1000"
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 253)",message="a cluster name has at most 253 characters"
	// +optional
	Weight map[string]int32 `json:"weight,omitempty"`

	// PrimaryGeoTag (failover only) is the region (Cluster
	// spec.region) whose clusters get the traffic while one of them is
	// healthy; the other clusters get it otherwise. Shorthand for a
	// failoverOrder of one group selecting that region.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +optional
	PrimaryGeoTag string `json:"primaryGeoTag,omitempty"`

	// FailoverOrder (failover only) is an ordered list of cluster groups:
	// the answers hold the healthy clusters of the first group that has
	// one, the next group's when it has none. A cluster in several groups
	// belongs to the first; clusters in none form an implicit last group.
	// A group is written as a policy's ClusterAffinityTerm.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +optional
	FailoverOrder []FailoverGroup `json:"failoverOrder,omitempty"`

	// DNSTtlSeconds is the TTL of the answers for the ingress's hosts
	// (default: the DNS traffic manager's --dns-traffic-ttl).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	// +optional
	DNSTtlSeconds int32 `json:"dnsTtlSeconds,omitempty"`
}

// FailoverGroup is one group of a failover order. It has the fields and
// meaning of a policy's ClusterAffinityTerm (affinityName, clusterNames,
// exclude, labelSelector, fieldSelector), with every list and string
// bounded: a tenant writes it, and the hub matches it against every
// backend cluster each time it decides the ingress's traffic.
type FailoverGroup struct {
	// AffinityName names the group.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	AffinityName string `json:"affinityName"`

	// LabelSelector matches the Cluster objects' labels.
	// +optional
	LabelSelector *ClusterLabelSelector `json:"labelSelector,omitempty"`

	// FieldSelector matches the clusters' provider, region and zones.
	// +optional
	FieldSelector *ClusterFieldSelector `json:"fieldSelector,omitempty"`

	// ClusterNames lists the clusters of the group.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	// +listType=atomic
	// +optional
	ClusterNames []string `json:"clusterNames,omitempty"`

	// ExcludeClusters lists clusters that are never in the group.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	// +listType=atomic
	// +optional
	ExcludeClusters []string `json:"exclude,omitempty"`
}

// ClusterLabelSelector is a metav1.LabelSelector over Cluster labels, with
// bounded lists and strings.
// +kubebuilder:validation:XValidation:rule="!has(self.matchLabels) || self.matchLabels.all(k, size(k) <= 317 && size(self.matchLabels[k]) <= 63)",message="a label key has at most 317 characters and a value at most 63",fieldPath=".matchLabels"
type ClusterLabelSelector struct {
	// MatchLabels must all be on the cluster.
	// +kubebuilder:validation:MaxProperties=16
	// +optional
	MatchLabels map[string]string `json:"matchLabels,omitempty"`

	// MatchExpressions must all hold.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	MatchExpressions []ClusterLabelSelectorRequirement `json:"matchExpressions,omitempty"`
}

// ClusterLabelSelectorRequirement is a metav1.LabelSelectorRequirement.
// +kubebuilder:validation:XValidation:rule="self.operator in ['In', 'NotIn'] ? has(self.values) && size(self.values) > 0 : !has(self.values) || size(self.values) == 0",message="In and NotIn need values, Exists and DoesNotExist take none",fieldPath=".values"
type ClusterLabelSelectorRequirement struct {
	// Key is the label key.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	Key string `json:"key"`

	// Operator is In, NotIn, Exists or DoesNotExist.
	// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist
	Operator metav1.LabelSelectorOperator `json:"operator"`

	// Values are the label values In and NotIn compare with.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +listType=atomic
	// +optional
	Values []string `json:"values,omitempty"`
}

// ClusterFieldSelector is a policy FieldSelector with bounded lists.
type ClusterFieldSelector struct {
	// MatchExpressions must all hold.
	// +kubebuilder:validation:MaxItems=8
	// +listType=atomic
	// +optional
	MatchExpressions []ClusterFieldSelectorRequirement `json:"matchExpressions,omitempty"`
}

// ClusterFieldSelectorRequirement compares one cluster field (provider,
// region or zone) with a set of values.
type ClusterFieldSelectorRequirement struct {
	// Key is provider, region or zone (which matches any of the cluster's
	// zones).
	// +kubebuilder:validation:Enum=provider;region;zone
	Key string `json:"key"`

	// Operator is In or NotIn.
	// +kubebuilder:validation:Enum=In;NotIn
	Operator corev1.NodeSelectorOperator `json:"operator"`

	// Values the field is compared with.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	// +listType=atomic
	// +optional
	Values []string `json:"values,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// MultiClusterIngressList is a list of MultiClusterIngresses.
type MultiClusterIngressList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the MultiClusterIngresses.
	Items []MultiClusterIngress `json:"items"`
}

// MultiClusterIngressStatus says where an ingress's backends run and which
// clusters get traffic.
type MultiClusterIngressStatus struct {
	// IngressStatus holds loadBalancer: the addresses of the clusters that
	// get traffic (Ready and not blocked).
	networkingv1.IngressStatus `json:",inline"`

	// TrafficBlockClusters are the clusters, among those running a
	// backend, whose traffic is blocked (their remedyActions contain
	// TrafficControl), sorted by name.
	// +listType=map
	// +listMapKey=name
	// +optional
	TrafficBlockClusters []ClusterObject `json:"trafficBlockClusters,omitempty"`

	// ServiceLocations are, for each backend Service, the clusters it is
	// placed on.
	// +listType=map
	// +listMapKey=name
	// +optional
	ServiceLocations []ServiceLocation `json:"serviceLocations,omitempty"`

	// Clusters are, for each cluster a backend is placed on, whether the
	// DNS answers send it traffic and why, its weight and its addresses
	// while it does, sorted by name. The DNS traffic manager answers from
	// this list.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=1024
	// +optional
	Clusters []ClusterTraffic `json:"clusters,omitempty"`

	// Conditions are HostsAdmitted: True when the DNS traffic manager
	// answers for every host of the ingress; False with reason
	// HostNotAllowed naming a host the ingress's namespace may not claim
	// (the hub's --ingress-host-namespaces), HostConflict naming the older
	// MultiClusterIngress that owns a host it also claims, or InvalidHost.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// MultiClusterIngress condition types and reasons.
const (
	// ConditionHostsAdmitted says whether every host of the ingress is
	// served for it by the DNS traffic manager.
	ConditionHostsAdmitted = "HostsAdmitted"
	// ReasonHostsAdmitted: every host is owned by this ingress.
	ReasonHostsAdmitted = "HostsAdmitted"
	// ReasonHostConflict: an older MultiClusterIngress owns a host (or a
	// wildcard of) this one claims; the message names it.
	ReasonHostConflict = "HostConflict"
	// ReasonHostNotAllowed: the ingress's namespace may not claim a host it
	// names (the hub's --ingress-host-namespaces); the message names the
	// host and the domain of the rule.
	ReasonHostNotAllowed = "HostNotAllowed"
)

// ClusterTraffic is one backend cluster's part in an ingress's traffic.
type ClusterTraffic struct {
	// Name of the cluster.
	Name string `json:"name"`

	// Serving is true while the DNS answers send the cluster traffic.
	Serving bool `json:"serving"`

	// Reason says why it serves or not: Healthy, FailOpen, Unconfirmed,
	// NoReadyEndpoints, EndpointsNotReported, WorkloadUnhealthy,
	// ClusterNotReady, ClusterNotFound, TrafficBlocked, Standby (a
	// failover group ahead of it serves) or ZeroWeight.
	Reason string `json:"reason"`

	// ReadyEndpoints is the smallest count of ready endpoints its agent
	// reports over the backend Services placed on it; unset when one of
	// them has not reported any.
	// +optional
	ReadyEndpoints *int32 `json:"readyEndpoints,omitempty"`

	// Weight is its relative share of the answers while it serves.
	// +optional
	Weight int32 `json:"weight,omitempty"`

	// Addresses are its load balancers' addresses while it serves: IPs
	// are answered as A or AAAA records, hostnames as CNAME.
	// +kubebuilder:validation:MaxItems=64
	// +optional
	Addresses []networkingv1.IngressLoadBalancerIngress `json:"addresses,omitempty"`
}

// Reasons of ClusterTraffic.
const (
	TrafficReasonHealthy              = "Healthy"
	TrafficReasonFailOpen             = "FailOpen"
	TrafficReasonUnconfirmed          = "Unconfirmed"
	TrafficReasonNoReadyEndpoints     = "NoReadyEndpoints"
	TrafficReasonEndpointsNotReported = "EndpointsNotReported"
	TrafficReasonWorkloadUnhealthy    = "WorkloadUnhealthy"
	TrafficReasonClusterNotReady      = "ClusterNotReady"
	TrafficReasonClusterNotFound      = "ClusterNotFound"
	TrafficReasonBlocked              = "TrafficBlocked"
	TrafficReasonStandby              = "Standby"
	TrafficReasonZeroWeight           = "ZeroWeight"
)

// ClusterObject is a cluster whose traffic is blocked.
type ClusterObject struct {
	// Name of the cluster.
	Name string `json:"name"`

	// BlockingTimestamp is when its traffic was blocked.
	// +optional
	BlockingTimestamp metav1.Time `json:"blockingTimestamp,omitempty"`
}

// ServiceLocation is where a backend Service is placed.
type ServiceLocation struct {
	// Name of the Service, in the ingress's namespace.
	Name string `json:"name"`

	// Clusters the Service is placed on.
	// +optional
	Clusters []string `json:"clusters,omitempty"`
}
