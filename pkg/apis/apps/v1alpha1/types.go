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
// +kubebuilder:resource:scope=Cluster,categories=flotilla
// +kubebuilder:printcolumn:name="FINISHED",type=date,JSONPath=`.status.finishTime`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`

// WorkloadRebalancer asks the hub, once, to schedule the named workloads
// again from scratch, as if they were new, ignoring where they run now and
// where they were evicted from. Removed copies go through graceful
// eviction, so each workload keeps running while it moves.
type WorkloadRebalancer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec names the workloads.
	Spec WorkloadRebalancerSpec `json:"spec"`

	// Status says what happened to each workload.
	// +optional
	Status WorkloadRebalancerStatus `json:"status,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// WorkloadRebalancerList is a list of WorkloadRebalancers.
type WorkloadRebalancerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the WorkloadRebalancers.
	Items []WorkloadRebalancer `json:"items"`
}

// WorkloadRebalancerSpec names the workloads to reschedule.
type WorkloadRebalancerSpec struct {
	// Workloads are the objects to reschedule, named as in their
	// templates' manifests. Adding one later reschedules it too; removing
	// one does not undo anything.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1000
	// +listType=map
	// +listMapKey=apiVersion
	// +listMapKey=kind
	// +listMapKey=namespace
	// +listMapKey=name
	Workloads []ObjectReference `json:"workloads"`

	// TTLSecondsAfterFinished deletes the WorkloadRebalancer this long
	// after every workload has a result. Nil keeps it.
	// +kubebuilder:validation:Minimum=0
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
}

// ObjectReference names a workload by its template's embedded object.
type ObjectReference struct {
	// APIVersion of the object, e.g. apps/v1.
	// +kubebuilder:validation:MinLength=1
	APIVersion string `json:"apiVersion"`

	// Kind of the object, e.g. Deployment.
	// +kubebuilder:validation:MinLength=1
	Kind string `json:"kind"`

	// Namespace of the object; empty for a cluster-scoped object.
	// +kubebuilder:default=""
	// +optional
	Namespace string `json:"namespace"`

	// Name of the object.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// WorkloadRebalancerStatus says what happened to each workload.
type WorkloadRebalancerStatus struct {
	// ObservedWorkloads has one entry per workload of the spec, with its
	// result once it has one.
	// +optional
	ObservedWorkloads []ObservedWorkload `json:"observedWorkloads,omitempty"`

	// ObservedGeneration is the generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// FinishTime is when every workload had a result.
	// +optional
	FinishTime *metav1.Time `json:"finishTime,omitempty"`
}

// ObservedWorkload is one workload's outcome.
type ObservedWorkload struct {
	// Workload is the workload.
	Workload ObjectReference `json:"workload"`

	// Result is Successful (the hub asked for a fresh schedule) or Failed.
	// +optional
	Result RebalanceResult `json:"result,omitempty"`

	// Reason says why it failed, e.g. ReferencedBindingNotFound.
	// +optional
	Reason RebalanceFailedReason `json:"reason,omitempty"`
}

// RebalanceResult is the outcome for one workload.
// +kubebuilder:validation:Enum=Successful;Failed
type RebalanceResult string

// Rebalance results.
const (
	// RebalanceSuccessful: the workload's binding was asked to reschedule.
	RebalanceSuccessful RebalanceResult = "Successful"
	// RebalanceFailed: it could not be; Reason says why.
	RebalanceFailed RebalanceResult = "Failed"
)

// RebalanceFailedReason says why a workload could not be rebalanced.
type RebalanceFailedReason string

// Rebalance failure reasons.
const (
	// RebalanceObjectNotFound: no template holds the object, or none of its
	// bindings exists yet.
	RebalanceObjectNotFound RebalanceFailedReason = "ReferencedBindingNotFound"
)
