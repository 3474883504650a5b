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
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=op,categories=flotilla
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`

// OverridePolicy changes the selected workloads of its namespace per
// cluster before they are sent to the members.
type OverridePolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec holds the overrides.
	Spec OverrideSpec `json:"spec"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// OverridePolicyList is a list of OverridePolicies.
type OverridePolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the OverridePolicies.
	Items []OverridePolicy `json:"items"`
}

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=cop,categories=flotilla
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`

// ClusterOverridePolicy is the cluster-wide OverridePolicy: it applies to
// templates of every namespace and to ClusterResourceTemplates, before any
// OverridePolicy.
type ClusterOverridePolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec holds the overrides.
	Spec OverrideSpec `json:"spec"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// ClusterOverridePolicyList is a list of ClusterOverridePolicies.
type ClusterOverridePolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the ClusterOverridePolicies.
	Items []ClusterOverridePolicy `json:"items"`
}

// OverrideSpec is a set of per-cluster overrides for the selected workloads.
type OverrideSpec struct {
	// ResourceSelectors pick the templates the overrides apply to. Empty
	// selects every template the policy can see.
	// +kubebuilder:validation:MaxItems=128
	// +optional
	ResourceSelectors []ResourceSelector `json:"resourceSelectors,omitempty"`

	// OverrideRules are applied in order; each applies to the clusters its
	// TargetCluster selects.
	// +optional
	OverrideRules []RuleWithCluster `json:"overrideRules,omitempty"`
}

// RuleWithCluster is a set of overriders for some clusters.
type RuleWithCluster struct {
	// TargetCluster selects the clusters the overriders apply to. Nil
	// selects every cluster.
	// +optional
	TargetCluster *ClusterAffinity `json:"targetCluster,omitempty"`

	// Overriders are the changes to make. Within a rule they are applied in
	// this order: imageOverrider, commandOverrider, argsOverrider,
	// labelsOverrider, annotationsOverrider, fieldOverrider, plaintext.
	Overriders Overriders `json:"overriders"`
}

// Overriders are changes made to a workload for one cluster.
type Overriders struct {
	// Plaintext changes fields by JSON-patch style path.
	// +optional
	Plaintext []PlaintextOverrider `json:"plaintext,omitempty"`

	// ImageOverrider changes container images.
	// +optional
	ImageOverrider []ImageOverrider `json:"imageOverrider,omitempty"`

	// CommandOverrider changes container commands.
	// +optional
	CommandOverrider []CommandArgsOverrider `json:"commandOverrider,omitempty"`

	// ArgsOverrider changes container args.
	// +optional
	ArgsOverrider []CommandArgsOverrider `json:"argsOverrider,omitempty"`

	// LabelsOverrider changes metadata.labels.
	// +optional
	LabelsOverrider []LabelAnnotationOverrider `json:"labelsOverrider,omitempty"`

	// AnnotationsOverrider changes metadata.annotations.
	// +optional
	AnnotationsOverrider []LabelAnnotationOverrider `json:"annotationsOverrider,omitempty"`

	// FieldOverrider changes JSON or YAML documents held in string
	// fields, e.g. a ConfigMap's data["config.yaml"].
	// +kubebuilder:validation:MaxItems=64
	// +optional
	FieldOverrider []FieldOverrider `json:"fieldOverrider,omitempty"`
}

// PlaintextOverrider is one JSON-patch operation. It may not touch the
// object's identity (apiVersion, kind, metadata.name, metadata.namespace,
// metadata.generateName, or metadata as a whole): an override that moved a
// workload into another namespace or turned it into another kind would let
// a tenant reach what its own RBAC does not.
// (Prefix and equality tests, not regular expressions: a regex over an
// unbounded string in unbounded lists exceeds the CRD rule cost budget.)
// +kubebuilder:validation:XValidation:rule="!(self.path == '/apiVersion' || self.path.startsWith('/apiVersion/') || self.path == '/kind' || self.path.startsWith('/kind/') || self.path == '/metadata' || self.path == '/metadata/' || self.path == '/metadata/name' || self.path.startsWith('/metadata/name/') || self.path == '/metadata/namespace' || self.path.startsWith('/metadata/namespace/') || self.path == '/metadata/generateName' || self.path.startsWith('/metadata/generateName/'))",message="path may not change the object's identity (/apiVersion, /kind, /metadata, /metadata/name, /metadata/namespace, /metadata/generateName)"
type PlaintextOverrider struct {
	// Path is a JSON pointer into the object, e.g. /spec/replicas.
	// +kubebuilder:validation:Pattern=`^/`
	Path string `json:"path"`

	// Operator is add, remove or replace.
	// +kubebuilder:validation:Enum=add;remove;replace
	Operator OverriderOperator `json:"operator"`

	// Value is the JSON value to add or replace with; unused by remove.
	// +optional
	Value apiextensionsv1.JSON `json:"value,omitempty"`
}

// OverriderOperator is the operation an overrider performs.
type OverriderOperator string

// Overrider operators.
const (
	// OverriderOpAdd adds a value.
	OverriderOpAdd OverriderOperator = "add"
	// OverriderOpRemove removes a value.
	OverriderOpRemove OverriderOperator = "remove"
	// OverriderOpReplace replaces a value.
	OverriderOpReplace OverriderOperator = "replace"
)

// ImageOverrider changes one component of container images.
type ImageOverrider struct {
	// Predicate selects the image to change by its path in the object.
	// Nil changes the images of every container of the workload's pod
	// template (or of the Pod itself).
	// +optional
	Predicate *ImagePredicate `json:"predicate,omitempty"`

	// Component is the part of the image to change: Registry, Repository
	// or Tag.
	Component ImageComponent `json:"component"`

	// Operator is add, remove or replace.
	// +kubebuilder:validation:Enum=add;remove;replace
	Operator OverriderOperator `json:"operator"`

	// Value is the new component (or the text to add).
	// +optional
	Value string `json:"value,omitempty"`
}

// ImagePredicate locates one image in the object. Like a plaintext path it
// may not point at the object's identity.
// +kubebuilder:validation:XValidation:rule="!(self.path == '/apiVersion' || self.path.startsWith('/apiVersion/') || self.path == '/kind' || self.path.startsWith('/kind/') || self.path == '/metadata' || self.path.startsWith('/metadata/'))",message="path may not point into /apiVersion, /kind or /metadata: an image overrider changes images only"
type ImagePredicate struct {
	// Path is a JSON pointer to an image field, e.g.
	// /spec/template/spec/containers/0/image.
	// +kubebuilder:validation:Pattern=`^/`
	Path string `json:"path"`
}

// ImageComponent is a part of a container image reference.
// +kubebuilder:validation:Enum=Registry;Repository;Tag
type ImageComponent string

// Image components.
const (
	// Registry is the registry host, e.g. docker.io.
	Registry ImageComponent = "Registry"
	// Repository is the image path, e.g. library/nginx.
	Repository ImageComponent = "Repository"
	// Tag is the tag or digest, e.g. 1.27.
	Tag ImageComponent = "Tag"
)

// CommandArgsOverrider changes the command or args of one container.
type CommandArgsOverrider struct {
	// ContainerName is the container to change.
	// +kubebuilder:validation:MinLength=1
	ContainerName string `json:"containerName"`

	// Operator is add (append Value) or remove (drop the items in Value).
	// +kubebuilder:validation:Enum=add;remove
	Operator OverriderOperator `json:"operator"`

	// Value are the items to add or remove.
	// +optional
	Value []string `json:"value,omitempty"`
}

// LabelAnnotationOverrider changes labels or annotations.
type LabelAnnotationOverrider struct {
	// Operator is add, remove or replace.
	// +kubebuilder:validation:Enum=add;remove;replace
	Operator OverriderOperator `json:"operator"`

	// Value are the keys (and values) to add, remove or replace.
	// +optional
	Value map[string]string `json:"value,omitempty"`
}
