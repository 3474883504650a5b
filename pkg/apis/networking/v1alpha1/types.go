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

	// Spec is an Ingress spec; its backends name Services propagated to
	// the members.
	// +optional
	Spec networkingv1.IngressSpec `json:"spec,omitempty"`

	// Status says where the backends run and which clusters get traffic.
	// +optional
	Status MultiClusterIngressStatus `json:"status,omitempty"`
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

	// Conditions are HostsAdmitted: True when the DNS traffic manager
	// answers for every host of the ingress, False (reason HostConflict)
	// naming the older MultiClusterIngress that owns a host it also claims.
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
