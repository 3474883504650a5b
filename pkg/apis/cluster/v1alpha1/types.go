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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
)

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=cl,categories=flotilla
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="DNS",type=string,JSONPath=`.status.conditions[?(@.type=="ServiceDomainNameResolutionReady")].status`
// +kubebuilder:printcolumn:name="TAINTS",type=string,JSONPath=`.spec.taints[*].key`,description="Key of the first taint"
// +kubebuilder:printcolumn:name="MODE",type=string,JSONPath=`.spec.syncMode`
// +kubebuilder:printcolumn:name="VERSION",type=string,JSONPath=`.status.kubernetesVersion`,priority=1
// +kubebuilder:printcolumn:name="REMEDY",type=string,JSONPath=`.status.remedyActions`,priority=1
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`

// Cluster is a member cluster. Its agent keeps the status up to date; the
// hub adds and removes the taints.
type Cluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec describes the member.
	Spec ClusterSpec `json:"spec"`

	// Status is the member's last reported state.
	// +optional
	Status ClusterStatus `json:"status,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// ClusterList is a list of Clusters.
type ClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the Clusters.
	Items []Cluster `json:"items"`
}

// ClusterSpec describes a member cluster.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.id) || size(oldSelf.id) == 0 || (has(self.id) && self.id == oldSelf.id)",message="spec.id cannot be cleared or changed once set"
type ClusterSpec struct {
	// ID identifies the member: the UID of its kube-system namespace. The
	// agent sets it when empty and refuses to act for a Cluster whose ID
	// is another member's. It cannot be changed once set.
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="id is immutable once set"
	// +optional
	ID string `json:"id,omitempty"`

	// SyncMode is how the member is managed. Only Pull (its agent dials
	// out to the hub) is implemented; the hub never holds member
	// credentials, so Karmada's Push is refused.
	// +kubebuilder:default=Pull
	// +optional
	SyncMode ClusterSyncMode `json:"syncMode,omitempty"`

	// APIEndpoint is the member's apiserver URL, for information.
	// +optional
	APIEndpoint string `json:"apiEndpoint,omitempty"`

	// Provider is the member's cloud provider, used by field selectors and
	// spread constraints.
	// +optional
	Provider string `json:"provider,omitempty"`

	// Region is the member's region, used by field selectors and spread
	// constraints.
	// +optional
	Region string `json:"region,omitempty"`

	// Zone is the member's zone.
	//
	// Deprecated: use Zones.
	// +optional
	Zone string `json:"zone,omitempty"`

	// Zones are the zones the member spans, used by field selectors and
	// spread constraints.
	// +optional
	Zones []string `json:"zones,omitempty"`

	// Taints keep workloads that do not tolerate them away from the member
	// (NoSchedule) or evict them (NoExecute). Every taint carries
	// timeAdded: one written without it (kubectl) is stamped by the hub
	// with when it first saw it, and a taint rewritten without it keeps its
	// first time.
	// +listType=map
	// +listMapKey=key
	// +listMapKey=effect
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.all(t, size(t.key) > 0)",message="taints: every taint needs a key"
	// +kubebuilder:validation:XValidation:rule="self.all(t, t.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])",message="taints: effect must be NoSchedule, PreferNoSchedule or NoExecute"
	// +optional
	Taints []corev1.Taint `json:"taints,omitempty"`
}

// ClusterSyncMode is how a member is managed.
// +kubebuilder:validation:Enum=Pull
type ClusterSyncMode string

// Sync modes.
const (
	// Pull means the member's agent pulls its Works from the hub.
	Pull ClusterSyncMode = "Pull"
)

// Cluster condition types.
const (
	// ClusterConditionReady is True when the member's apiserver is healthy
	// and its agent reaches the hub, False when the apiserver is unhealthy
	// or unreachable, and Unknown when the agent has gone quiet.
	ClusterConditionReady = "Ready"
	// ClusterConditionServiceDomainNameResolutionReady is False when the
	// member's nodes agree that in-cluster DNS does not resolve Services.
	ClusterConditionServiceDomainNameResolutionReady = "ServiceDomainNameResolutionReady"
	// ClusterConditionResourceSummaryInRange is False, set by the hub,
	// while a value of status.resourceSummary is out of range (beyond 9P,
	// negative): the scheduler then gives the cluster no replicas divided
	// by available resources. It turns True when the summary is in range
	// again, and is absent on a cluster whose summary never was out of
	// range.
	ClusterConditionResourceSummaryInRange = "ResourceSummaryInRange"
)

// Reasons of the ResourceSummaryInRange condition.
const (
	// ClusterReasonInvalidQuantity: a value of the summary is out of
	// range; the message names it.
	ClusterReasonInvalidQuantity = "InvalidQuantity"
	// ClusterReasonQuantitiesInRange: every value is in range again.
	ClusterReasonQuantitiesInRange = "QuantitiesInRange"
)

// Reasons of the Ready condition.
const (
	// ClusterReasonReady: the apiserver answered healthy.
	ClusterReasonReady = "ClusterReady"
	// ClusterReasonNotReady: the apiserver answered unhealthy.
	ClusterReasonNotReady = "ClusterNotReady"
	// ClusterReasonNotReachable: the apiserver could not be reached.
	ClusterReasonNotReachable = "ClusterNotReachable"
	// ClusterReasonStatusUnknown: the hub has not heard from the agent
	// within the grace period.
	ClusterReasonStatusUnknown = "ClusterStatusUnknown"
)

// Taint keys the hub manages from the Ready condition.
const (
	// TaintClusterNotReady marks a member whose Ready condition is False.
	TaintClusterNotReady = "cluster.flotilla.io/not-ready"
	// TaintClusterUnreachable marks a member whose Ready condition is Unknown.
	TaintClusterUnreachable = "cluster.flotilla.io/unreachable"
)

// ClusterStatus is the state a member's agent reports.
type ClusterStatus struct {
	// KubernetesVersion is the member's apiserver version (at most 128
	// characters).
	// +kubebuilder:validation:MaxLength=128
	// +optional
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`

	// APIEnablements are the resources the member serves (at most 1024
	// group versions; the agent keeps to it, first by group version).
	// +kubebuilder:validation:MaxItems=1024
	// +optional
	APIEnablements []APIEnablement `json:"apiEnablements,omitempty"`

	// Conditions are the member's conditions (Ready,
	// ServiceDomainNameResolutionReady, and others): at most 16, messages
	// of at most 4096 characters.
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(c, size(c.message) <= 4096)",message="a condition message has at most 4096 characters"
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// NodeSummary counts the member's nodes.
	// +optional
	NodeSummary *NodeSummary `json:"nodeSummary,omitempty"`

	// ResourceSummary sums the member's node capacity and pod requests.
	// +optional
	ResourceSummary *ResourceSummary `json:"resourceSummary,omitempty"`

	// RemedyActions are the actions matching Remedies ask for on this
	// member (e.g. TrafficControl), sorted.
	// +listType=set
	// +optional
	RemedyActions []string `json:"remedyActions,omitempty"`
}

// APIEnablement lists the resources a member serves for one group version.
type APIEnablement struct {
	// GroupVersion is e.g. apps/v1.
	// +kubebuilder:validation:MaxLength=317
	GroupVersion string `json:"groupVersion"`

	// Resources served in the group version (at most 1024).
	// +kubebuilder:validation:MaxItems=1024
	// +optional
	Resources []APIResource `json:"resources,omitempty"`
}

// APIResource is a resource a member serves.
type APIResource struct {
	// Name is the plural resource name, e.g. deployments.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// Kind is the resource's kind, e.g. Deployment.
	// +kubebuilder:validation:MaxLength=253
	Kind string `json:"kind"`
}

// NodeSummary counts a member's nodes.
type NodeSummary struct {
	// TotalNum is the number of nodes.
	// +kubebuilder:validation:Minimum=0
	// +optional
	TotalNum int32 `json:"totalNum,omitempty"`

	// ReadyNum is the number of Ready nodes.
	// +kubebuilder:validation:Minimum=0
	// +optional
	ReadyNum int32 `json:"readyNum,omitempty"`
}

// ResourceSummary sums a member's resources.
type ResourceSummary struct {
	// Allocatable is the sum of the nodes' allocatable resources.
	// +optional
	Allocatable corev1.ResourceList `json:"allocatable,omitempty"`

	// Allocating is the sum of the requests of pods not yet scheduled.
	// +optional
	Allocating corev1.ResourceList `json:"allocating,omitempty"`

	// Allocated is the sum of the requests of scheduled pods.
	// +optional
	Allocated corev1.ResourceList `json:"allocated,omitempty"`
}

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=ctp,categories=flotilla
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`

// ClusterTaintPolicy adds taints to clusters whose conditions match and
// removes them when other conditions match.
type ClusterTaintPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the policy.
	Spec ClusterTaintPolicySpec `json:"spec"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// ClusterTaintPolicyList is a list of ClusterTaintPolicies.
type ClusterTaintPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the ClusterTaintPolicies.
	Items []ClusterTaintPolicy `json:"items"`
}

// ClusterTaintPolicySpec says which taints to add and remove on which
// conditions.
// +kubebuilder:validation:XValidation:rule="has(self.addOnConditions) || has(self.removeOnConditions)",message="at least one of addOnConditions and removeOnConditions must be set"
type ClusterTaintPolicySpec struct {
	// TargetClusters selects the clusters the policy applies to. Nil
	// selects every cluster.
	// +optional
	TargetClusters *policyv1alpha1.ClusterAffinity `json:"targetClusters,omitempty"`

	// AddOnConditions add Taints to a cluster when all of them match.
	// +kubebuilder:validation:MaxItems=16
	// +optional
	AddOnConditions []MatchCondition `json:"addOnConditions,omitempty"`

	// RemoveOnConditions remove Taints from a cluster when all of them
	// match.
	// +kubebuilder:validation:MaxItems=16
	// +optional
	RemoveOnConditions []MatchCondition `json:"removeOnConditions,omitempty"`

	// Taints are added and removed together.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Taints []Taint `json:"taints"`
}

// MatchCondition matches a cluster condition's status.
type MatchCondition struct {
	// ConditionType is the condition to look at, e.g. Ready.
	// +kubebuilder:validation:MinLength=1
	ConditionType string `json:"conditionType"`

	// Operator is In (the status is one of StatusValues) or NotIn. A
	// missing condition matches neither.
	Operator MatchConditionOperator `json:"operator"`

	// StatusValues are the statuses compared with.
	// +kubebuilder:validation:MinItems=1
	StatusValues []metav1.ConditionStatus `json:"statusValues"`
}

// MatchConditionOperator compares a condition status with a set of values.
// +kubebuilder:validation:Enum=In;NotIn
type MatchConditionOperator string

// Match condition operators.
const (
	// MatchConditionOpIn matches a status in the set.
	MatchConditionOpIn MatchConditionOperator = "In"
	// MatchConditionOpNotIn matches a status not in the set.
	MatchConditionOpNotIn MatchConditionOperator = "NotIn"
)

// Taint is a taint a ClusterTaintPolicy manages.
type Taint struct {
	// Key of the taint.
	// +kubebuilder:validation:MinLength=1
	Key string `json:"key"`

	// Value of the taint.
	// +optional
	Value string `json:"value,omitempty"`

	// Effect is NoSchedule or NoExecute.
	// +kubebuilder:validation:Enum=NoSchedule;NoExecute
	Effect corev1.TaintEffect `json:"effect"`
}
