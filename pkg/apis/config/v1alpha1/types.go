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
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=ric,categories=flotilla
// +kubebuilder:printcolumn:name="TARGET-API-VERSION",type=string,JSONPath=`.spec.target.apiVersion`
// +kubebuilder:printcolumn:name="TARGET-KIND",type=string,JSONPath=`.spec.target.kind`
// +kubebuilder:printcolumn:name="COMPILED",type=string,JSONPath=`.status.conditions[?(@.type=="Compiled")].status`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`

// ResourceInterpreterCustomization tells Flotilla how to read and write one
// kind it has no built-in knowledge of (or overrides what it knows of a
// built-in kind): its health, replicas, status and dependencies, and which
// of its fields the member owns. Karmada's kind of the same name, with CEL
// expressions (Kubernetes' own CEL environment) where Karmada runs Lua.
//
// Admin-only: a customization changes how every tenant's workloads of its
// kind are judged and divided.
type ResourceInterpreterCustomization struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ResourceInterpreterCustomizationSpec `json:"spec"`
	// +optional
	Status ResourceInterpreterCustomizationStatus `json:"status,omitempty"`
}

// ResourceInterpreterCustomizationSpec is the target kind and its rules.
type ResourceInterpreterCustomizationSpec struct {
	// Target is the kind the rules apply to.
	Target CustomizationTarget `json:"target"`

	// Customizations holds one rule per operation; an operation without a
	// rule uses the built-in interpreter (or, for a kind without one, the
	// generic judgement from status conventions).
	Customizations CustomizationRules `json:"customizations"`
}

// CustomizationTarget names a kind by apiVersion and kind.
type CustomizationTarget struct {
	// APIVersion is the target's group/version, e.g. argoproj.io/v1alpha1.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	APIVersion string `json:"apiVersion"`

	// Kind is the target's kind, e.g. Rollout.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
}

// CustomizationRules are the operations Flotilla interprets, as in
// Karmada's ResourceInterpreterCustomization. Each expression is CEL over
// the variables its operation documents, compiled once when the object is
// written and refused then if it does not compile or may cost more than
// the budget (see docs/interpreter.md).
type CustomizationRules struct {
	// Retention names the fields a member-side controller owns (an HPA's
	// spec.replicas, a defaulting webhook's field): the agent keeps their
	// live values on the member and never counts them as drift.
	// +optional
	Retention *LocalValueRetention `json:"retention,omitempty"`

	// ReplicaResource reads the object's replicas and what one replica
	// needs, so the scheduler can divide it.
	// +optional
	ReplicaResource *ReplicaResourceRequirement `json:"replicaResource,omitempty"`

	// ReplicaRevision writes a cluster's share of the replicas into the
	// copy sent to that cluster.
	// +optional
	ReplicaRevision *ReplicaRevision `json:"replicaRevision,omitempty"`

	// StatusReflection chooses what of a member's copy is reported to the
	// hub as its status.
	// +optional
	StatusReflection *StatusReflection `json:"statusReflection,omitempty"`

	// StatusAggregation sums the clusters' reported statuses into the
	// template's status.
	// +optional
	StatusAggregation *StatusAggregation `json:"statusAggregation,omitempty"`

	// HealthInterpretation judges a member's copy Healthy, Unhealthy or
	// Unknown; application failover, graceful eviction and failback act on
	// it.
	// +optional
	HealthInterpretation *HealthInterpretation `json:"healthInterpretation,omitempty"`

	// DependencyInterpretation lists the objects the workload needs on the
	// same clusters (propagateDeps).
	// +optional
	DependencyInterpretation *DependencyInterpretation `json:"dependencyInterpretation,omitempty"`
}

// LocalValueRetention is the member-owned fields.
type LocalValueRetention struct {
	// FieldPaths are JSON pointers into the object, e.g. /spec/replicas.
	// A path the member's copy does not have is left as the template says.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:Pattern=`^/`
	// +kubebuilder:validation:items:MaxLength=256
	// +listType=set
	FieldPaths []string `json:"fieldPaths"`
}

// ReplicaResourceRequirement reads replicas and per-replica requirements.
type ReplicaResourceRequirement struct {
	// Replicas is a CEL expression over `object` (the template's object)
	// that evaluates to the desired replica count (an int), e.g.
	// `has(object.spec.replicas) ? object.spec.replicas : 1`.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Replicas string `json:"replicas"`

	// PodTemplate is a CEL expression over `object` that evaluates to the
	// pod template one replica runs (a PodTemplateSpec), e.g.
	// `object.spec.template`. Its containers' requests (init containers
	// and overhead counted as the scheduler does) become the replica
	// requirements, as for a Deployment. Empty: no requirements.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	PodTemplate string `json:"podTemplate,omitempty"`
}

// ReplicaRevision writes the replicas of one cluster.
type ReplicaRevision struct {
	// ReplicasPath is a JSON pointer to the integer field that holds the
	// replicas, e.g. /spec/replicas; the hub writes the cluster's share
	// there.
	// +kubebuilder:validation:Pattern=`^/`
	// +kubebuilder:validation:MaxLength=256
	ReplicasPath string `json:"replicasPath"`
}

// StatusReflection chooses the reported status.
type StatusReflection struct {
	// Expression is CEL over `object` (the member's live copy) that
	// evaluates to a map, reported as the manifest's status, e.g.
	// `{"replicas": object.status.replicas, "phase": object.status.phase}`.
	// Reported statuses are bounded in size as any other.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Expression string `json:"expression"`
}

// StatusAggregation sums reported statuses.
type StatusAggregation struct {
	// Expression is CEL over `statuses`, a list of
	// {"clusterName": string, "status": map}, that evaluates to a map: the
	// template's workload status, e.g.
	// `{"replicas": statuses.map(s, s.status.replicas).sum()}`.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Expression string `json:"expression"`
}

// HealthInterpretation judges health.
type HealthInterpretation struct {
	// Expression is CEL over `object` (the member's live copy) that
	// evaluates to a bool (true: Healthy, false: Unhealthy) or to one of
	// the strings "Healthy", "Unhealthy", "Unknown". An expression that
	// fails on the object (a missing field, the cost limit) means Unknown.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Expression string `json:"expression"`
}

// DependencyInterpretation lists dependencies.
type DependencyInterpretation struct {
	// Expression is CEL over `object` (the template's object) that
	// evaluates to a list of {"apiVersion", "kind", "name"} maps (an
	// optional "namespace" must be the object's own), e.g.
	// `[{"apiVersion": "v1", "kind": "ConfigMap", "name": object.spec.configName}]`.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Expression string `json:"expression"`
}

// ResourceInterpreterCustomizationStatus says whether the rules are in use.
type ResourceInterpreterCustomizationStatus struct {
	// Conditions: Compiled (False names the field whose expression did not
	// compile or exceeds the cost budget; the kind then falls back to the
	// built-in or generic interpretation).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

const (
	// ConditionCompiled is the status condition on a customization.
	ConditionCompiled = "Compiled"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// ResourceInterpreterCustomizationList is a list of customizations.
type ResourceInterpreterCustomizationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ResourceInterpreterCustomization `json:"items"`
}
