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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,categories=flotilla
// +kubebuilder:printcolumn:name="ACTIONS",type=string,JSONPath=`.spec.actions`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`

// Remedy asks for actions on clusters whose conditions match. The hub
// writes the actions of all matching Remedies to each Cluster's
// status.remedyActions.
type Remedy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the remedy.
	Spec RemedySpec `json:"spec"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// RemedyList is a list of Remedies.
type RemedyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the Remedies.
	Items []Remedy `json:"items"`
}

// RemedySpec says on which clusters, and when, which actions are needed.
type RemedySpec struct {
	// ClusterAffinity selects the clusters the Remedy watches. Nil
	// selects every cluster.
	// +optional
	ClusterAffinity *ClusterAffinity `json:"clusterAffinity,omitempty"`

	// DecisionMatches trigger the actions when any one of them matches.
	// Empty triggers them at once (e.g. before a planned upgrade).
	// +kubebuilder:validation:MaxItems=32
	// +optional
	DecisionMatches []DecisionMatch `json:"decisionMatches,omitempty"`

	// Actions are what the selected, matching clusters need.
	// +listType=set
	// +optional
	Actions []RemedyAction `json:"actions,omitempty"`
}

// ClusterAffinity selects clusters by name.
type ClusterAffinity struct {
	// ClusterNames are the selected clusters.
	// +optional
	ClusterNames []string `json:"clusterNames,omitempty"`
}

// DecisionMatch is one trigger of a Remedy.
type DecisionMatch struct {
	// ClusterConditionMatch matches a cluster condition.
	// +optional
	ClusterConditionMatch *ClusterConditionRequirement `json:"clusterConditionMatch,omitempty"`
}

// ClusterConditionRequirement compares a cluster condition's status with a
// value.
type ClusterConditionRequirement struct {
	// ConditionType is the condition to look at, e.g.
	// ServiceDomainNameResolutionReady.
	// +kubebuilder:validation:MinLength=1
	ConditionType ConditionType `json:"conditionType"`

	// Operator is Equal or NotEqual.
	Operator ClusterConditionOperator `json:"operator"`

	// ConditionStatus is the status compared with, e.g. "False".
	ConditionStatus string `json:"conditionStatus"`
}

// ConditionType is a Cluster condition type. Any type may be used.
type ConditionType string

// ServiceDomainNameResolutionReady is the condition the agents' DNS probes
// maintain.
const ServiceDomainNameResolutionReady ConditionType = "ServiceDomainNameResolutionReady"

// ClusterConditionOperator compares a condition status with a value.
// +kubebuilder:validation:Enum=Equal;NotEqual
type ClusterConditionOperator string

// Cluster condition operators.
const (
	// ClusterConditionEqual matches when the status equals the value.
	ClusterConditionEqual ClusterConditionOperator = "Equal"
	// ClusterConditionNotEqual matches when the status differs from the
	// value. A condition the cluster does not report matches neither
	// operator (Karmada's rule).
	ClusterConditionNotEqual ClusterConditionOperator = "NotEqual"
)

// RemedyAction is an action a cluster needs.
// +kubebuilder:validation:Enum=TrafficControl
type RemedyAction string

// TrafficControl takes the cluster out of multi-cluster ingress traffic.
const TrafficControl RemedyAction = "TrafficControl"
