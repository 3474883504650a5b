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
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
)

// Manifest is one complete Kubernetes object (apiVersion, kind, metadata
// and the rest), kept as raw JSON.
type Manifest struct {
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:EmbeddedResource
	runtime.RawExtension `json:",inline"`
}

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=rt,categories=flotilla
// +kubebuilder:printcolumn:name="KIND",type=string,JSONPath=`.spec.manifest.kind`
// +kubebuilder:printcolumn:name="SCHEDULED",type=string,JSONPath=`.status.conditions[?(@.type=="Scheduled")].status`
// +kubebuilder:printcolumn:name="FULLYAPPLIED",type=string,JSONPath=`.status.conditions[?(@.type=="FullyApplied")].status`
// +kubebuilder:printcolumn:name="REPLICAS",type=integer,JSONPath=`.status.workloadStatus.replicas`
// +kubebuilder:printcolumn:name="AVAILABLE",type=integer,JSONPath=`.status.workloadStatus.availableReplicas`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`

// ResourceTemplate holds a namespaced object to run on member clusters. The
// hub stores it inertly (it never runs on the host cluster); policies
// select it by the embedded object.
type ResourceTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec holds the object.
	Spec ResourceTemplateSpec `json:"spec"`

	// Status says where the object runs and how it is doing.
	// +optional
	Status ResourceTemplateStatus `json:"status,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// ResourceTemplateList is a list of ResourceTemplates.
type ResourceTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the ResourceTemplates.
	Items []ResourceTemplate `json:"items"`
}

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=crt,categories=flotilla
// +kubebuilder:printcolumn:name="KIND",type=string,JSONPath=`.spec.manifest.kind`
// +kubebuilder:printcolumn:name="SCHEDULED",type=string,JSONPath=`.status.conditions[?(@.type=="Scheduled")].status`
// +kubebuilder:printcolumn:name="FULLYAPPLIED",type=string,JSONPath=`.status.conditions[?(@.type=="FullyApplied")].status`
// +kubebuilder:printcolumn:name="REPLICAS",type=integer,JSONPath=`.status.workloadStatus.replicas`
// +kubebuilder:printcolumn:name="AVAILABLE",type=integer,JSONPath=`.status.workloadStatus.availableReplicas`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`

// ClusterResourceTemplate holds a cluster-scoped object (a Namespace,
// ClusterRole, CustomResourceDefinition, ...) to run on member clusters.
type ClusterResourceTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec holds the object.
	Spec ResourceTemplateSpec `json:"spec"`

	// Status says where the object runs and how it is doing.
	// +optional
	Status ResourceTemplateStatus `json:"status,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// ClusterResourceTemplateList is a list of ClusterResourceTemplates.
type ClusterResourceTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the ClusterResourceTemplates.
	Items []ClusterResourceTemplate `json:"items"`
}

// ResourceTemplateSpec holds the object to propagate.
type ResourceTemplateSpec struct {
	// Manifest is the object. It needs apiVersion, kind and metadata.name.
	// In a ResourceTemplate, metadata.namespace may be omitted (the
	// template's namespace is used) and otherwise must be the template's
	// namespace; in a ClusterResourceTemplate it must be omitted. The
	// namespace rules are enforced by the ValidatingAdmissionPolicy
	// shipped with the CRDs, because CRD validation cannot see an
	// object's own namespace.
	// +kubebuilder:validation:XValidation:rule="has(self.metadata) && has(self.metadata.name) && size(self.metadata.name) > 0",message="manifest.metadata.name is required"
	Manifest Manifest `json:"manifest"`

	// Dependencies name other objects of the template's namespace the
	// object needs, besides those its pod template references. A policy
	// with propagateDeps propagates them, from their own ResourceTemplates,
	// to wherever this object runs.
	// +kubebuilder:validation:MaxItems=64
	// +optional
	Dependencies []DependencyReference `json:"dependencies,omitempty"`
}

// DependencyReference names an object of the template's namespace, held
// by another ResourceTemplate.
type DependencyReference struct {
	// APIVersion of the object, e.g. v1.
	// +kubebuilder:validation:MinLength=1
	APIVersion string `json:"apiVersion"`

	// Kind of the object, e.g. ConfigMap.
	// +kubebuilder:validation:MinLength=1
	Kind string `json:"kind"`

	// Name of the object.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// ResourceTemplateStatus says where a template's object runs and how it is
// doing there.
type ResourceTemplateStatus struct {
	// ObservedGeneration is the template generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions mirror the binding's (Scheduled, FullyApplied) and say
	// why the template is not propagated (e.g. no policy matches).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Clusters are the clusters the object is scheduled to, with their
	// replicas.
	// +optional
	Clusters []TargetCluster `json:"clusters,omitempty"`

	// AggregatedStatus is the object's status on each cluster.
	// +optional
	AggregatedStatus []AggregatedStatusItem `json:"aggregatedStatus,omitempty"`

	// WorkloadStatus is the object's status summed over the clusters,
	// shaped like the object's own .status (e.g. replicas, readyReplicas
	// and availableReplicas of a Deployment).
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	WorkloadStatus *runtime.RawExtension `json:"workloadStatus,omitempty"`

	// Rollout is the binding's rollout state, mirrored.
	// +optional
	Rollout *RolloutStatus `json:"rollout,omitempty"`
}

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=rb,categories=flotilla
// +kubebuilder:printcolumn:name="SCHEDULED",type=string,JSONPath=`.status.conditions[?(@.type=="Scheduled")].status`
// +kubebuilder:printcolumn:name="FULLYAPPLIED",type=string,JSONPath=`.status.conditions[?(@.type=="FullyApplied")].status`
// +kubebuilder:printcolumn:name="LAST-FAILOVER",type=string,JSONPath=`.status.failoverHistory[-1:].reason`
// +kubebuilder:printcolumn:name="FROM",type=string,JSONPath=`.status.failoverHistory[-1:].originCluster`
// +kubebuilder:printcolumn:name="TO",type=string,JSONPath=`.status.failoverHistory[-1:].clustersAfterFailover`,priority=1
// +kubebuilder:printcolumn:name="AT",type=date,JSONPath=`.status.failoverHistory[-1:].startTime`,priority=1
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`

// ResourceBinding binds a ResourceTemplate to the policy that selected it
// and records the scheduling result. The hub owns it.
type ResourceBinding struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the placement and scheduling result.
	Spec ResourceBindingSpec `json:"spec"`

	// Status is the scheduling and propagation state.
	// +optional
	Status ResourceBindingStatus `json:"status,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// ResourceBindingList is a list of ResourceBindings.
type ResourceBindingList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the ResourceBindings.
	Items []ResourceBinding `json:"items"`
}

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=crb,categories=flotilla
// +kubebuilder:printcolumn:name="SCHEDULED",type=string,JSONPath=`.status.conditions[?(@.type=="Scheduled")].status`
// +kubebuilder:printcolumn:name="FULLYAPPLIED",type=string,JSONPath=`.status.conditions[?(@.type=="FullyApplied")].status`
// +kubebuilder:printcolumn:name="LAST-FAILOVER",type=string,JSONPath=`.status.failoverHistory[-1:].reason`
// +kubebuilder:printcolumn:name="FROM",type=string,JSONPath=`.status.failoverHistory[-1:].originCluster`
// +kubebuilder:printcolumn:name="TO",type=string,JSONPath=`.status.failoverHistory[-1:].clustersAfterFailover`,priority=1
// +kubebuilder:printcolumn:name="AT",type=date,JSONPath=`.status.failoverHistory[-1:].startTime`,priority=1
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`

// ClusterResourceBinding is the ResourceBinding of a ClusterResourceTemplate
// (or of a ResourceTemplate selected by a ClusterPropagationPolicy).
type ClusterResourceBinding struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the placement and scheduling result.
	Spec ResourceBindingSpec `json:"spec"`

	// Status is the scheduling and propagation state.
	// +optional
	Status ResourceBindingStatus `json:"status,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// ClusterResourceBindingList is a list of ClusterResourceBindings.
type ClusterResourceBindingList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the ClusterResourceBindings.
	Items []ClusterResourceBinding `json:"items"`
}

// ResourceBindingSpec is what to propagate, where it may go and where the
// scheduler put it.
type ResourceBindingSpec struct {
	// Resource identifies the template's embedded object.
	Resource ObjectReference `json:"resource"`

	// Replicas is the object's desired replica count (0 for kinds without
	// replicas).
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// ReplicaRequirements are the resources one replica requests.
	// +optional
	ReplicaRequirements *ReplicaRequirements `json:"replicaRequirements,omitempty"`

	// Placement is copied from the policy.
	// +optional
	Placement *policyv1alpha1.Placement `json:"placement,omitempty"`

	// Failover is copied from the policy.
	// +optional
	Failover *policyv1alpha1.FailoverBehavior `json:"failover,omitempty"`

	// ConflictResolution is copied from the policy.
	// +optional
	ConflictResolution policyv1alpha1.ConflictResolution `json:"conflictResolution,omitempty"`

	// Suspension is copied from the policy.
	// +optional
	Suspension *policyv1alpha1.Suspension `json:"suspension,omitempty"`

	// PreserveResourcesOnDeletion is copied from the policy.
	// +optional
	PreserveResourcesOnDeletion *bool `json:"preserveResourcesOnDeletion,omitempty"`

	// SchedulePriority is the priority resolved from the policy's
	// schedulePriority (the PriorityClass's value, bounded).
	// +optional
	SchedulePriority *SchedulePriority `json:"schedulePriority,omitempty"`

	// PropagateDeps is copied from the policy.
	// +optional
	PropagateDeps bool `json:"propagateDeps,omitempty"`

	// ApplyStrategy is copied from the policy.
	// +optional
	ApplyStrategy policyv1alpha1.ApplyStrategy `json:"applyStrategy,omitempty"`

	// RolloutStrategy is copied from the policy.
	// +optional
	RolloutStrategy *policyv1alpha1.RolloutStrategy `json:"rolloutStrategy,omitempty"`

	// RequiredBy lists the bindings of the workloads that depend on this
	// binding's object (propagateDeps) and where they are placed; the
	// object is propagated to those clusters too. A binding with no
	// placement of its own exists only for them and is deleted when the
	// list is empty.
	// +optional
	RequiredBy []BindingSnapshot `json:"requiredBy,omitempty"`

	// Clusters is the scheduling result: the target clusters and their
	// replicas.
	// +listType=map
	// +listMapKey=name
	// +optional
	Clusters []TargetCluster `json:"clusters,omitempty"`

	// GracefulEvictionTasks are the clusters the workload is being evicted
	// from; their Works are kept until the task ends.
	// +listType=map
	// +listMapKey=fromCluster
	// +optional
	GracefulEvictionTasks []GracefulEvictionTask `json:"gracefulEvictionTasks,omitempty"`

	// EvictionHistory records recent evictions; the scheduler avoids these
	// clusters for this binding for a while.
	// +optional
	EvictionHistory []EvictionHistoryEntry `json:"evictionHistory,omitempty"`

	// RescheduleTriggeredAt asks for a new schedule when it is later than
	// status.lastScheduledTime.
	// +optional
	RescheduleTriggeredAt *metav1.Time `json:"rescheduleTriggeredAt,omitempty"`

	// RescheduleReason says who asked for the reschedule at
	// rescheduleTriggeredAt (Rebalance or Failback); the scheduler gives
	// the graceful tasks it makes this reason. Empty means Rescheduled.
	// +kubebuilder:validation:MaxLength=32
	// +optional
	RescheduleReason string `json:"rescheduleReason,omitempty"`

	// WorkloadAffinityGroups are the workload's affinity and anti-affinity
	// groups, made by the hub from placement.workloadAffinity and the
	// template's labels; the scheduler reads them.
	// +optional
	WorkloadAffinityGroups *WorkloadAffinityGroups `json:"workloadAffinityGroups,omitempty"`
}

// BindingSnapshot is a binding that depends on another one, and where it
// is placed.
type BindingSnapshot struct {
	// Namespace of the binding; empty for a ClusterResourceBinding.
	// +optional
	Namespace string `json:"namespace,omitempty"`

	// Name of the binding.
	Name string `json:"name"`

	// Clusters the dependent workload is placed on, including clusters it
	// is still being gracefully evicted from.
	// +optional
	Clusters []TargetCluster `json:"clusters,omitempty"`

	// PreserveResourcesOnDeletion, ApplyStrategy, ConflictResolution and
	// Suspension are the dependent binding's (its policy's): the object is
	// handled on the dependent's clusters as the dependent's policy says,
	// and where several dependents (or the object's own policy) disagree
	// the safest setting wins (preserve, ReadOnly over CreateOnly over
	// ServerSideApply, suspended, Abort).
	// +optional
	PreserveResourcesOnDeletion *bool `json:"preserveResourcesOnDeletion,omitempty"`

	// ApplyStrategy is the dependent binding's.
	// +optional
	ApplyStrategy policyv1alpha1.ApplyStrategy `json:"applyStrategy,omitempty"`

	// ConflictResolution is the dependent binding's.
	// +optional
	ConflictResolution policyv1alpha1.ConflictResolution `json:"conflictResolution,omitempty"`

	// Suspension is the dependent binding's.
	// +optional
	Suspension *policyv1alpha1.Suspension `json:"suspension,omitempty"`
}

// ObjectReference identifies a template's embedded object.
type ObjectReference struct {
	// APIVersion of the object.
	APIVersion string `json:"apiVersion"`

	// Kind of the object.
	Kind string `json:"kind"`

	// Namespace of the object; empty for cluster-scoped objects.
	// +optional
	Namespace string `json:"namespace,omitempty"`

	// Name of the object.
	Name string `json:"name"`

	// UID of the template holding the object.
	// +optional
	UID types.UID `json:"uid,omitempty"`

	// ResourceVersion of the template holding the object.
	// +optional
	ResourceVersion string `json:"resourceVersion,omitempty"`
}

// ReplicaRequirements are the resources one replica needs.
type ReplicaRequirements struct {
	// ResourceRequest is the sum of one replica's container requests.
	// +optional
	ResourceRequest corev1.ResourceList `json:"resourceRequest,omitempty"`
}

// TargetCluster is a cluster in a scheduling result.
type TargetCluster struct {
	// Name of the cluster.
	Name string `json:"name"`

	// Replicas assigned to the cluster.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
}

// GracefulEvictionTask is a cluster a workload is being evicted from.
type GracefulEvictionTask struct {
	// FromCluster is the cluster the workload is evicted from.
	FromCluster string `json:"fromCluster"`

	// PurgeMode says when the copy on FromCluster is deleted.
	// +optional
	PurgeMode policyv1alpha1.PurgeMode `json:"purgeMode,omitempty"`

	// Replicas the workload had on FromCluster; nil for kinds without
	// replicas.
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// Reason is a CamelCase word saying why, e.g. TaintUntolerated or
	// ApplicationFailure.
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`
	Reason string `json:"reason"`

	// Message explains the eviction.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Message string `json:"message,omitempty"`

	// Producer is the controller that evicted the workload.
	Producer string `json:"producer"`

	// GracePeriodSeconds bounds how long the task waits for the new
	// placement to become healthy; nil uses the hub's
	// --graceful-eviction-timeout.
	// +kubebuilder:validation:Minimum=1
	// +optional
	GracePeriodSeconds *int32 `json:"gracePeriodSeconds,omitempty"`

	// SuppressDeletion, when true, keeps the copy on FromCluster even after
	// the task's conditions are met; false lets it go at once.
	// +optional
	SuppressDeletion *bool `json:"suppressDeletion,omitempty"`

	// ClustersBeforeFailover are the clusters the workload was scheduled
	// to before this eviction.
	// +optional
	ClustersBeforeFailover []string `json:"clustersBeforeFailover,omitempty"`

	// CreationTimestamp is when the task was created.
	// +optional
	CreationTimestamp *metav1.Time `json:"creationTimestamp,omitempty"`

	// PreservedLabelState are the labels the failover's statePreservation
	// rules read from the copy's last reported status on FromCluster; the
	// copies that replace it carry them.
	// +optional
	PreservedLabelState map[string]string `json:"preservedLabelState,omitempty"`
}

// Eviction reasons.
const (
	// EvictionReasonTaintUntolerated: the cluster has a NoExecute taint the
	// placement does not tolerate (any longer).
	EvictionReasonTaintUntolerated = "TaintUntolerated"
	// EvictionReasonApplicationFailure: the workload stayed unhealthy on
	// the cluster for the failover's tolerationSeconds.
	EvictionReasonApplicationFailure = "ApplicationFailure"
	// EvictionReasonRebalance: a WorkloadRebalancer rescheduled the
	// workload from scratch.
	EvictionReasonRebalance = "Rebalance"
	// EvictionReasonFailback: the workload is returning to the placement it
	// had before a failover.
	EvictionReasonFailback = "Failback"
)

// Eviction producers.
const (
	// EvictionProducerTaintManager is the hub's taint manager.
	EvictionProducerTaintManager = "TaintManager"
	// EvictionProducerApplicationFailover is the hub's application
	// failover controller.
	EvictionProducerApplicationFailover = "ApplicationFailover"
)

// EvictionHistoryEntry records one eviction of a binding from a cluster.
type EvictionHistoryEntry struct {
	// ClusterName is the cluster the workload was evicted from.
	ClusterName string `json:"clusterName"`

	// Reason is the eviction's reason, as in the GracefulEvictionTask.
	Reason string `json:"reason"`

	// EvictedAt is when the eviction happened.
	EvictedAt metav1.Time `json:"evictedAt"`
}

// ResourceBindingStatus is a binding's scheduling and propagation state.
type ResourceBindingStatus struct {
	// SchedulerObservedGeneration is the binding generation the scheduler
	// last scheduled.
	// +optional
	SchedulerObservedGeneration int64 `json:"schedulerObservedGeneration,omitempty"`

	// SchedulerObservedAffinityName is the clusterAffinities term the last
	// schedule used.
	// +optional
	SchedulerObservedAffinityName string `json:"schedulerObservingAffinityName,omitempty"`

	// LastScheduledTime is when the scheduler last scheduled the binding.
	// +optional
	LastScheduledTime *metav1.Time `json:"lastScheduledTime,omitempty"`

	// Conditions are Scheduled and FullyApplied.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// AggregatedStatus is the object's status on each target cluster,
	// gathered from the Works.
	// +optional
	AggregatedStatus []AggregatedStatusItem `json:"aggregatedStatus,omitempty"`

	// FailoverHistory records the binding's most recent failovers,
	// rebalances and failbacks, oldest first (at most
	// FailoverHistoryLimit).
	// +kubebuilder:validation:MaxItems=32
	// +optional
	FailoverHistory []FailoverHistoryItem `json:"failoverHistory,omitempty"`

	// SchedulingDecision is each cluster's filter and score result at the
	// scheduler's last written decision (`kubectl flotilla explain`).
	// +optional
	SchedulingDecision *SchedulingDecision `json:"schedulingDecision,omitempty"`

	// Rollout is the state of the template's newest revision: which
	// revision each cluster runs, its group and verdict.
	// +optional
	Rollout *RolloutStatus `json:"rollout,omitempty"`
}

// FailoverHistoryLimit is how many entries status.failoverHistory keeps.
const FailoverHistoryLimit = 10

// FailoverHistoryItem is one failover, rebalance or failback: a cluster
// the workload left, or shrank on, and where it went.
type FailoverHistoryItem struct {
	// Reason is why: TaintUntolerated (cluster failure),
	// ApplicationFailure, Rebalance, Failback or Rescheduled.
	Reason string `json:"reason"`

	// Message says more, e.g. the taint.
	// +optional
	Message string `json:"message,omitempty"`

	// OriginCluster is the cluster the workload left or shrank on.
	OriginCluster string `json:"originCluster"`

	// ClustersBeforeFailover are the clusters the workload was placed on
	// before.
	// +optional
	ClustersBeforeFailover []string `json:"clustersBeforeFailover,omitempty"`

	// ClustersAfterFailover are the clusters it was placed on after the
	// scheduler placed it again.
	// +optional
	ClustersAfterFailover []string `json:"clustersAfterFailover,omitempty"`

	// PurgeMode is how the copy on OriginCluster was removed.
	// +optional
	PurgeMode policyv1alpha1.PurgeMode `json:"purgeMode,omitempty"`

	// PreservedLabelState is the state carried to the new copies.
	// +optional
	PreservedLabelState map[string]string `json:"preservedLabelState,omitempty"`

	// StartTime is when the workload started to leave OriginCluster.
	StartTime metav1.Time `json:"startTime"`

	// EndTime is when every wanted replica was available again, on the
	// hub's clock; nil while that has not happened.
	// +optional
	EndTime *metav1.Time `json:"endTime,omitempty"`

	// DegradedSince is set while fewer replicas are available than wanted
	// during this entry.
	// +optional
	DegradedSince *metav1.Time `json:"degradedSince,omitempty"`

	// DegradedSeconds is how long, in total, fewer replicas were available
	// than wanted between StartTime and EndTime.
	// +optional
	DegradedSeconds int64 `json:"degradedSeconds,omitempty"`
}

// Binding condition types.
const (
	// BindingConditionScheduled is True when the scheduler found target
	// clusters for the binding, False with each cluster's reason otherwise.
	BindingConditionScheduled = "Scheduled"
	// BindingConditionFullyApplied is True when the object is applied on
	// every target cluster.
	BindingConditionFullyApplied = "FullyApplied"
)

// AggregatedStatusItem is an object's status on one cluster.
type AggregatedStatusItem struct {
	// ClusterName is the cluster.
	ClusterName string `json:"clusterName"`

	// Status is the object's trimmed .status on the cluster.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	Status *runtime.RawExtension `json:"status,omitempty"`

	// Applied is true when the object was applied on the cluster.
	// +optional
	Applied bool `json:"applied,omitempty"`

	// AppliedMessage says why applying failed or, on an applied copy, what
	// of the cluster's report the hub left out (a status over its share).
	// +optional
	AppliedMessage string `json:"appliedMessage,omitempty"`

	// Health is the object's health on the cluster.
	// +optional
	Health ResourceHealth `json:"health,omitempty"`

	// ReadyEndpoints, for a Service, is the ready endpoints the agent
	// counted in its EndpointSlices on the cluster; unset when none were
	// reported.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	ReadyEndpoints *int32 `json:"readyEndpoints,omitempty"`

	// ObservedGeneration is the binding generation whose Work this status
	// was reported for. Status for an older generation says nothing about
	// the current placement.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// UnhealthySince is when Health last became Unhealthy; it is kept
	// while Health stays Unhealthy and cleared otherwise. Application
	// failover counts tolerationSeconds from it, so a hub restart does not
	// reset the count.
	// +optional
	UnhealthySince *metav1.Time `json:"unhealthySince,omitempty"`

	// FirstReportedTime is when the hub first saw a status for the copy on
	// this cluster (failover preConditions.delaySeconds counts from it).
	// +optional
	FirstReportedTime *metav1.Time `json:"firstReportedTime,omitempty"`

	// EverHealthy is true once the copy on this cluster has been Healthy
	// (failover preConditions.healthyState: Healthy needs it).
	// +optional
	EverHealthy bool `json:"everHealthy,omitempty"`
}

// ResourceHealth is the health of an object on a member.
// +kubebuilder:validation:Enum=Healthy;Unhealthy;Unknown
type ResourceHealth string

// Health values.
const (
	// ResourceHealthy: the object does what it should (e.g. all replicas
	// of the current generation are available).
	ResourceHealthy ResourceHealth = "Healthy"
	// ResourceUnhealthy: the object does not (yet) do what it should.
	ResourceUnhealthy ResourceHealth = "Unhealthy"
	// ResourceUnknown: the health could not be determined.
	ResourceUnknown ResourceHealth = "Unknown"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,categories=flotilla
// +kubebuilder:printcolumn:name="APPLIED",type=string,JSONPath=`.status.conditions[?(@.type=="Applied")].status`
// +kubebuilder:printcolumn:name="AVAILABLE",type=string,JSONPath=`.status.conditions[?(@.type=="Available")].status`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`

// Work is what one member applies: the manifests of one binding, rendered
// for that member. It lives in the member's namespace flotilla-es-<cluster>
// on the hub, where the member's agent reads it and reports its status.
type Work struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is what to apply.
	Spec WorkSpec `json:"spec"`

	// Status is what the agent reports.
	// +optional
	Status WorkStatus `json:"status,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// WorkList is a list of Works.
type WorkList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the Works.
	Items []Work `json:"items"`
}

// WorkSpec is what a member applies and how.
type WorkSpec struct {
	// Workload holds the manifests.
	Workload WorkloadTemplate `json:"workload"`

	// SuspendDispatching, when true, makes the agent leave the member
	// objects as they are until it is false again.
	// +optional
	SuspendDispatching *bool `json:"suspendDispatching,omitempty"`

	// PreserveResourcesOnDeletion, when true, makes the agent keep the
	// member objects (stripped of Flotilla's labels) when the Work is
	// deleted.
	// +optional
	PreserveResourcesOnDeletion *bool `json:"preserveResourcesOnDeletion,omitempty"`

	// ApplyStrategy is how the agent writes the manifests.
	// +kubebuilder:default=ServerSideApply
	// +optional
	ApplyStrategy policyv1alpha1.ApplyStrategy `json:"applyStrategy,omitempty"`

	// ConflictResolution says what the agent does with an existing member
	// object that Flotilla does not manage: Abort or Overwrite.
	// +kubebuilder:default=Abort
	// +optional
	ConflictResolution policyv1alpha1.ConflictResolution `json:"conflictResolution,omitempty"`
}

// WorkloadTemplate holds a Work's manifests.
type WorkloadTemplate struct {
	// Manifests are the objects to apply; at least one.
	// +kubebuilder:validation:MinItems=1
	Manifests []Manifest `json:"manifests"`
}

// Apply strategies, as the policy spells them (the Work field has the
// policy's type so a policy's applyStrategy is copied unchanged).
const (
	// ApplyStrategyServerSideApply applies with server-side apply and keeps
	// the object as the manifest says.
	ApplyStrategyServerSideApply = policyv1alpha1.ApplyStrategyServerSideApply
	// ApplyStrategyCreateOnly creates a missing object and then leaves it
	// alone.
	ApplyStrategyCreateOnly = policyv1alpha1.ApplyStrategyCreateOnly
	// ApplyStrategyReadOnly never writes; it only reports the status of
	// the existing object.
	ApplyStrategyReadOnly = policyv1alpha1.ApplyStrategyReadOnly
)

// WorkStatus is what an agent reports about a Work. The hub takes it as
// untrusted input: the bounds below (pkg/statuslimits, which the hub also
// applies when it reads a Work) keep one member's report from growing what
// the hub writes for everyone.
type WorkStatus struct {
	// Conditions are Applied and Available (at most 8; messages of at most
	// 4096 characters).
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self.all(c, size(c.message) <= 4096)",message="a condition message has at most 4096 characters"
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ManifestStatuses are the status and health of each manifest's object
	// (at most 64).
	// +kubebuilder:validation:MaxItems=64
	// +optional
	ManifestStatuses []ManifestStatus `json:"manifestStatuses,omitempty"`
}

// Work condition types.
const (
	// WorkConditionApplied is True when every manifest was applied; when
	// False the message names the failed manifests.
	WorkConditionApplied = "Applied"
	// WorkConditionAvailable is True when every applied object is Healthy.
	WorkConditionAvailable = "Available"
	// WorkConditionDispatching is False while spec.suspendDispatching
	// holds the Work back from its member (and True once it is resumed).
	WorkConditionDispatching = "Dispatching"
)

// ManifestStatus is the state of one manifest's object on the member.
type ManifestStatus struct {
	// Identifier says which manifest and object this is.
	Identifier ResourceIdentifier `json:"identifier"`

	// Status is the object's trimmed .status: at most 128 top-level
	// fields (and 16 KiB of JSON, which the agent keeps to and the hub
	// checks when it reads it: CRD validation cannot count bytes).
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	// +kubebuilder:validation:MaxProperties=128
	// +optional
	Status *runtime.RawExtension `json:"status,omitempty"`

	// Health is the object's health.
	// +optional
	Health ResourceHealth `json:"health,omitempty"`

	// ReadyEndpoints, for a Service, is how many ready endpoints its
	// EndpointSlices on the member hold (capped at 1000000); unset for
	// other kinds and until the agent has counted them.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	ReadyEndpoints *int32 `json:"readyEndpoints,omitempty"`
}

// ResourceIdentifier identifies a manifest of a Work and its object.
type ResourceIdentifier struct {
	// Ordinal is the manifest's index in spec.workload.manifests.
	// +kubebuilder:validation:Minimum=0
	Ordinal int32 `json:"ordinal"`

	// Group of the object.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Group string `json:"group,omitempty"`

	// Version of the object.
	// +kubebuilder:validation:MaxLength=63
	Version string `json:"version"`

	// Kind of the object.
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`

	// Resource is the object's plural resource name.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Resource string `json:"resource,omitempty"`

	// Namespace of the object; empty for cluster-scoped objects.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Namespace string `json:"namespace,omitempty"`

	// Name of the object.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}
