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
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=pp,categories=flotilla
// +kubebuilder:printcolumn:name="PRIORITY",type=integer,JSONPath=`.spec.priority`
// +kubebuilder:printcolumn:name="PREEMPTION",type=string,JSONPath=`.spec.preemption`,priority=1
// +kubebuilder:printcolumn:name="CONFLICT-RESOLUTION",type=string,JSONPath=`.spec.conflictResolution`,priority=1
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`

// PropagationPolicy selects ResourceTemplates of its own namespace and says
// which member clusters they run on and how they fail over.
type PropagationPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired propagation.
	Spec PropagationSpec `json:"spec"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// PropagationPolicyList is a list of PropagationPolicies.
type PropagationPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the PropagationPolicies.
	Items []PropagationPolicy `json:"items"`
}

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=cpp,categories=flotilla
// +kubebuilder:printcolumn:name="PRIORITY",type=integer,JSONPath=`.spec.priority`
// +kubebuilder:printcolumn:name="PREEMPTION",type=string,JSONPath=`.spec.preemption`,priority=1
// +kubebuilder:printcolumn:name="CONFLICT-RESOLUTION",type=string,JSONPath=`.spec.conflictResolution`,priority=1
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`

// ClusterPropagationPolicy is the cluster-wide PropagationPolicy: it selects
// ClusterResourceTemplates, and ResourceTemplates of any namespace that no
// PropagationPolicy claims.
type ClusterPropagationPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired propagation.
	Spec PropagationSpec `json:"spec"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// ClusterPropagationPolicyList is a list of ClusterPropagationPolicies.
type ClusterPropagationPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the ClusterPropagationPolicies.
	Items []ClusterPropagationPolicy `json:"items"`
}

// PropagationSpec is the desired propagation of the selected templates.
type PropagationSpec struct {
	// ResourceSelectors pick the templates this policy propagates, by the
	// apiVersion, kind, namespace, name and labels of their embedded object.
	// A template matches if any selector matches.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=128
	ResourceSelectors []ResourceSelector `json:"resourceSelectors"`

	// Placement says which clusters the selected workloads may run on and
	// how their replicas are spread.
	// +optional
	Placement Placement `json:"placement,omitempty"`

	// Priority decides which policy claims a template no policy has claimed
	// yet, among those that select it: a PropagationPolicy before a
	// ClusterPropagationPolicy, then the higher priority, then the more
	// precise selector (by name, then by labelSelector, then by kind), then
	// the lower name. Once claimed, a template stays with its policy until
	// that policy is deleted or stops selecting it; a later policy takes it
	// only with preemption Always.
	// +kubebuilder:default=0
	// +optional
	Priority *int32 `json:"priority,omitempty"`

	// Preemption says whether this policy takes templates another policy
	// has claimed: Never (the default) or Always. With Always, a
	// PropagationPolicy takes a template one of its resourceSelectors names
	// from a lower-priority PropagationPolicy or from any
	// ClusterPropagationPolicy; a ClusterPropagationPolicy takes one it
	// names (with the namespace, for a namespaced object) from a
	// lower-priority ClusterPropagationPolicy only. The workload moves
	// gracefully: its old clusters keep it until the new placement is
	// healthy.
	// +kubebuilder:default=Never
	// +optional
	Preemption PreemptionBehavior `json:"preemption,omitempty"`

	// Failover says how workloads move away from failed clusters and
	// failed applications. Nil leaves cluster failover at the hub's defaults
	// and disables application failover.
	// +optional
	Failover *FailoverBehavior `json:"failover,omitempty"`

	// ConflictResolution says what a member does when an object the Work
	// would create already exists there and Flotilla does not manage it:
	// Abort (leave it and report a conflict) or Overwrite (adopt it).
	// +kubebuilder:default=Abort
	// +optional
	ConflictResolution ConflictResolution `json:"conflictResolution,omitempty"`

	// Suspension pauses dispatching of the selected workloads to members.
	// +optional
	Suspension *Suspension `json:"suspension,omitempty"`

	// PreserveResourcesOnDeletion keeps the propagated objects on the members
	// (without Flotilla's labels) when the template or its Works are deleted.
	// +optional
	PreserveResourcesOnDeletion *bool `json:"preserveResourcesOnDeletion,omitempty"`

	// PropagateDeps propagates what the selected workloads depend on (the
	// ConfigMaps, Secrets, ServiceAccounts and PersistentVolumeClaims their
	// pod templates reference, and a template's spec.dependencies) to the
	// same clusters, and moves them with the workload on failover. A
	// dependency must be a ResourceTemplate of the workload's namespace; one
	// no workload needs any more is removed from the members.
	// +optional
	PropagateDeps bool `json:"propagateDeps,omitempty"`

	// DependentOverrides names the override policies that must exist before
	// this policy propagates anything: OverridePolicies of the template's
	// namespace for a PropagationPolicy, ClusterOverridePolicies for a
	// ClusterPropagationPolicy. Until they all exist the templates wait,
	// with a Propagated=False DependentOverridesMissing condition.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	// +optional
	DependentOverrides []string `json:"dependentOverrides,omitempty"`

	// RolloutStrategy says how a change of a selected template reaches
	// the clusters: all at once (the default), a few clusters at a time,
	// or group by group, each step gated by the copies' health, a soak
	// time, approvals and analyses, halting (and rolling back) a revision
	// that fails. See docs/rollout.md.
	// +optional
	RolloutStrategy *RolloutStrategy `json:"rolloutStrategy,omitempty"`

	// ApplyStrategy is how the members write the propagated objects:
	// ServerSideApply (keep them as the template says), CreateOnly (create a
	// missing object, then leave it alone) or ReadOnly (never write; only
	// report the status of an object that is already there).
	// +kubebuilder:default=ServerSideApply
	// +optional
	ApplyStrategy ApplyStrategy `json:"applyStrategy,omitempty"`

	// SchedulePriority gives the selected workloads the priority of a
	// PriorityClass: higher priority is scheduled, evicted from a failed
	// cluster and moved first (Karmada's schedulePriority; see
	// SchedulePriority).
	// +optional
	SchedulePriority *SchedulePriority `json:"schedulePriority,omitempty"`
}

// PreemptionBehavior says whether a policy takes templates another policy
// has claimed.
// +kubebuilder:validation:Enum=Always;Never
type PreemptionBehavior string

// Preemption behaviours (Karmada's names).
const (
	// PreemptAlways takes claimed templates, as Preemption describes.
	PreemptAlways PreemptionBehavior = "Always"
	// PreemptNever never takes a template another policy has claimed.
	PreemptNever PreemptionBehavior = "Never"
)

// ApplyStrategy is how an agent writes a Work's manifests.
// +kubebuilder:validation:Enum=ServerSideApply;CreateOnly;ReadOnly
type ApplyStrategy string

// Apply strategies.
const (
	// ApplyStrategyServerSideApply applies with server-side apply and keeps
	// the object as the manifest says.
	ApplyStrategyServerSideApply ApplyStrategy = "ServerSideApply"
	// ApplyStrategyCreateOnly creates a missing object and then leaves it
	// alone.
	ApplyStrategyCreateOnly ApplyStrategy = "CreateOnly"
	// ApplyStrategyReadOnly never writes; it only reports the status of
	// the existing object.
	ApplyStrategyReadOnly ApplyStrategy = "ReadOnly"
)

// ResourceSelector selects templates by their embedded object.
type ResourceSelector struct {
	// APIVersion of the embedded object, e.g. apps/v1.
	// +kubebuilder:validation:MinLength=1
	APIVersion string `json:"apiVersion"`

	// Kind of the embedded object, e.g. Deployment.
	// +kubebuilder:validation:MinLength=1
	Kind string `json:"kind"`

	// Namespace of the embedded object. Empty matches any namespace the
	// policy can see (only its own for a PropagationPolicy).
	// +optional
	Namespace string `json:"namespace,omitempty"`

	// Name of the embedded object. Empty matches any name; when set,
	// LabelSelector is ignored.
	// +optional
	Name string `json:"name,omitempty"`

	// LabelSelector matches the embedded object's labels.
	// +optional
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
}

// Placement says where workloads may run.
// +kubebuilder:validation:XValidation:rule="!(has(self.clusterAffinity) && has(self.clusterAffinities))",message="placement: clusterAffinity and clusterAffinities are mutually exclusive",fieldPath=".clusterAffinities"
// +kubebuilder:validation:XValidation:rule="!has(self.clusterAffinities) || self.clusterAffinities.all(t, !has(t.overflowAffinities) || size(t.overflowAffinities) == 0) || (has(self.replicaScheduling) && (!has(self.replicaScheduling.replicaSchedulingType) || self.replicaScheduling.replicaSchedulingType == 'Divided') && has(self.replicaScheduling.replicaDivisionPreference) && (self.replicaScheduling.replicaDivisionPreference == 'Aggregated' || (self.replicaScheduling.replicaDivisionPreference == 'Weighted' && has(self.replicaScheduling.weightPreference) && has(self.replicaScheduling.weightPreference.dynamicWeight))))",message="placement: overflowAffinities can only be used together with dynamic weight or aggregated scheduling (replicaScheduling Divided, Aggregated or Weighted by dynamicWeight)",fieldPath=".clusterAffinities"
type Placement struct {
	// ClusterAffinity restricts the clusters the workload may be scheduled
	// to. Nil means every cluster.
	// +optional
	ClusterAffinity *ClusterAffinity `json:"clusterAffinity,omitempty"`

	// ClusterAffinities is an ordered list of affinity groups: the scheduler
	// uses the first group that yields a result and falls back to the next
	// one when it cannot. Mutually exclusive with ClusterAffinity.
	// +listType=map
	// +listMapKey=affinityName
	// +kubebuilder:validation:MaxItems=16
	// +optional
	ClusterAffinities []ClusterAffinityTerm `json:"clusterAffinities,omitempty"`

	// ClusterTolerations let the workload be scheduled to, and stay on,
	// clusters with matching taints. A NoExecute toleration's
	// tolerationSeconds bounds how long it stays after the taint was added.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.all(t, !has(t.tolerationSeconds) || t.tolerationSeconds >= 0)",message="clusterTolerations: tolerationSeconds must not be negative"
	// +optional
	ClusterTolerations []corev1.Toleration `json:"clusterTolerations,omitempty"`

	// SpreadConstraints bound the number of groups (clusters, regions, zones,
	// providers or label values) the workload is spread over, in any
	// combination: groups are chosen first (as few as meet every
	// constraint), then clusters in them (Karmada's selection). As in
	// Karmada, a spreadByField region, zone or provider constraint needs a
	// cluster constraint beside it, and each field appears once.
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self.all(a, has(a.spreadByLabel) || self.filter(b, !has(b.spreadByLabel) && (has(b.spreadByField) ? b.spreadByField : 'cluster') == (has(a.spreadByField) ? a.spreadByField : 'cluster')).size() == 1)",message="spreadConstraints: each spreadByField may appear only once (a constraint with neither spreadByField nor spreadByLabel spreads by cluster)"
	// +kubebuilder:validation:XValidation:rule="self.all(a, !has(a.spreadByLabel) || self.filter(b, has(b.spreadByLabel) && b.spreadByLabel == a.spreadByLabel).size() == 1)",message="spreadConstraints: each spreadByLabel may appear only once"
	// +kubebuilder:validation:XValidation:rule="!self.exists(a, has(a.spreadByField) && a.spreadByField != 'cluster') || self.exists(a, !has(a.spreadByLabel) && (!has(a.spreadByField) || a.spreadByField == 'cluster'))",message="spreadConstraints: a spreadByField region, zone or provider constraint needs a spreadByField cluster constraint too (it bounds the number of clusters), as in Karmada"
	// +optional
	SpreadConstraints []SpreadConstraint `json:"spreadConstraints,omitempty"`

	// ReplicaScheduling says how replicas are assigned to the chosen
	// clusters. Nil means every cluster gets the full object unchanged.
	// +optional
	ReplicaScheduling *ReplicaSchedulingStrategy `json:"replicaScheduling,omitempty"`

	// WorkloadAffinity keeps the workload with, or apart from, other
	// workloads by a label of their templates (see WorkloadAffinity).
	// +optional
	WorkloadAffinity *WorkloadAffinity `json:"workloadAffinity,omitempty"`
}

// ClusterAffinity selects clusters. All set criteria must hold.
type ClusterAffinity struct {
	// LabelSelector matches the Cluster objects' labels (at most 64
	// matchLabels and 32 matchExpressions).
	// +kubebuilder:validation:XValidation:rule="!has(self.matchLabels) || size(self.matchLabels) <= 64",message="labelSelector: at most 64 matchLabels"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || size(self.matchExpressions) <= 32",message="labelSelector: at most 32 matchExpressions"
	// +optional
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`

	// FieldSelector matches the clusters' provider, region and zones.
	// +optional
	FieldSelector *FieldSelector `json:"fieldSelector,omitempty"`

	// ClusterNames lists the clusters that may be selected (at most 1024).
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=253
	// +optional
	ClusterNames []string `json:"clusterNames,omitempty"`

	// ExcludeClusters lists clusters that are never selected (at most
	// 1024).
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=253
	// +optional
	ExcludeClusters []string `json:"exclude,omitempty"`
}

// ClusterAffinityTerm is one named group of ClusterAffinities.
type ClusterAffinityTerm struct {
	// AffinityName identifies the group; it is recorded in the binding's
	// status when the scheduler uses it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	AffinityName string `json:"affinityName"`

	ClusterAffinity `json:",inline"`

	// OverflowAffinities are further groups of clusters, in order, that
	// take the replicas the term's own clusters (the inline
	// ClusterAffinity, the preferred group) have no room for: each group
	// is filled before the next one is used, and a scale-down takes
	// replicas from the last group first. A cluster is in the first group
	// that selects it. Only for Divided replicas spread by room
	// (Aggregated, or Weighted by dynamicWeight); objects without replicas
	// use the preferred group alone. With failover.failback the replicas
	// come back to the preferred group once it has had room for the
	// stabilization window.
	// +kubebuilder:validation:MaxItems=8
	// +optional
	OverflowAffinities []OverflowClusterAffinity `json:"overflowAffinities,omitempty"`
}

// OverflowClusterAffinity is one overflow group of a ClusterAffinityTerm.
type OverflowClusterAffinity struct {
	// AffinityName identifies the overflow group.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	AffinityName string `json:"affinityName"`

	ClusterAffinity `json:",inline"`
}

// FieldSelector matches clusters by fields of their spec.
type FieldSelector struct {
	// MatchExpressions must all hold (at most 16).
	// +kubebuilder:validation:MaxItems=16
	// +optional
	MatchExpressions []FieldSelectorRequirement `json:"matchExpressions,omitempty"`
}

// FieldSelectorRequirement compares one cluster field with a set of values.
type FieldSelectorRequirement struct {
	// Key is the cluster field: provider, region or zone (which matches any
	// of the cluster's zones).
	// +kubebuilder:validation:Enum=provider;region;zone
	Key string `json:"key"`

	// Operator is In or NotIn.
	// +kubebuilder:validation:Enum=In;NotIn
	Operator corev1.NodeSelectorOperator `json:"operator"`

	// Values the field is compared with (at most 256).
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=253
	// +optional
	Values []string `json:"values,omitempty"`
}

// Cluster fields a FieldSelectorRequirement may use as its key.
const (
	// ProviderField selects on Cluster spec.provider.
	ProviderField = "provider"
	// RegionField selects on Cluster spec.region.
	RegionField = "region"
	// ZoneField selects on Cluster spec.zones.
	ZoneField = "zone"
)

// SpreadConstraint bounds how many groups the workload is spread over.
// Setting neither SpreadByField nor SpreadByLabel spreads by cluster.
// +kubebuilder:validation:XValidation:rule="!(has(self.spreadByField) && has(self.spreadByLabel))",message="spreadByField and spreadByLabel are mutually exclusive",fieldPath=".spreadByLabel"
// +kubebuilder:validation:XValidation:rule="!has(self.minGroups) || !has(self.maxGroups) || self.minGroups <= self.maxGroups",message="minGroups must not be greater than maxGroups",fieldPath=".minGroups"
type SpreadConstraint struct {
	// SpreadByField groups clusters by one of their fields.
	// +optional
	SpreadByField SpreadFieldValue `json:"spreadByField,omitempty"`

	// SpreadByLabel groups clusters by the value of this label.
	// +kubebuilder:validation:MaxLength=317
	// +optional
	SpreadByLabel string `json:"spreadByLabel,omitempty"`

	// MaxGroups is the largest number of groups to use.
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxGroups int32 `json:"maxGroups,omitempty"`

	// MinGroups is the smallest number of groups to use; scheduling fails if
	// fewer are available.
	// +kubebuilder:validation:Minimum=1
	// +optional
	MinGroups int32 `json:"minGroups,omitempty"`
}

// SpreadFieldValue is a cluster field used to group clusters.
// +kubebuilder:validation:Enum=cluster;region;zone;provider
type SpreadFieldValue string

// Fields clusters can be grouped by.
const (
	// SpreadByFieldCluster makes every cluster its own group.
	SpreadByFieldCluster SpreadFieldValue = "cluster"
	// SpreadByFieldRegion groups clusters by spec.region.
	SpreadByFieldRegion SpreadFieldValue = "region"
	// SpreadByFieldZone groups clusters by zone.
	SpreadByFieldZone SpreadFieldValue = "zone"
	// SpreadByFieldProvider groups clusters by spec.provider.
	SpreadByFieldProvider SpreadFieldValue = "provider"
)

// ReplicaSchedulingStrategy says how replicas are assigned to clusters.
type ReplicaSchedulingStrategy struct {
	// ReplicaSchedulingType is Duplicated (every cluster runs all replicas)
	// or Divided (the replicas are split between the clusters).
	// +kubebuilder:default=Divided
	// +optional
	ReplicaSchedulingType ReplicaSchedulingType `json:"replicaSchedulingType,omitempty"`

	// ReplicaDivisionPreference says how Divided replicas are split:
	// Aggregated (on as few clusters as possible) or Weighted (by
	// WeightPreference).
	// +optional
	ReplicaDivisionPreference ReplicaDivisionPreference `json:"replicaDivisionPreference,omitempty"`

	// WeightPreference gives the weights of a Weighted division. Nil
	// weighs all clusters equally.
	// +optional
	WeightPreference *ClusterPreferences `json:"weightPreference,omitempty"`
}

// ReplicaSchedulingType is how replicas are assigned to clusters.
// +kubebuilder:validation:Enum=Duplicated;Divided
type ReplicaSchedulingType string

// Replica scheduling types.
const (
	// ReplicaSchedulingTypeDuplicated runs all replicas on every cluster.
	ReplicaSchedulingTypeDuplicated ReplicaSchedulingType = "Duplicated"
	// ReplicaSchedulingTypeDivided splits the replicas between the clusters.
	ReplicaSchedulingTypeDivided ReplicaSchedulingType = "Divided"
)

// ReplicaDivisionPreference is how Divided replicas are split.
// +kubebuilder:validation:Enum=Aggregated;Weighted
type ReplicaDivisionPreference string

// Replica division preferences.
const (
	// ReplicaDivisionPreferenceAggregated packs replicas onto as few
	// clusters as possible.
	ReplicaDivisionPreferenceAggregated ReplicaDivisionPreference = "Aggregated"
	// ReplicaDivisionPreferenceWeighted splits replicas by weight.
	ReplicaDivisionPreferenceWeighted ReplicaDivisionPreference = "Weighted"
)

// ClusterPreferences gives the weights of a Weighted division: either static
// per-cluster weights or a dynamic factor, not both.
// +kubebuilder:validation:XValidation:rule="!has(self.dynamicWeight) || !has(self.staticWeightList) || size(self.staticWeightList) == 0",message="weightPreference: dynamicWeight and staticWeightList are mutually exclusive",fieldPath=".dynamicWeight"
type ClusterPreferences struct {
	// StaticWeightList weighs the clusters each entry selects. Clusters no
	// entry selects get no replicas.
	// +kubebuilder:validation:MaxItems=128
	// +optional
	StaticWeightList []StaticClusterWeight `json:"staticWeightList,omitempty"`

	// DynamicWeight weighs each cluster by a factor the hub computes;
	// AvailableReplicas uses how many replicas fit in the cluster's
	// resourceSummary.
	// +optional
	DynamicWeight DynamicWeightFactor `json:"dynamicWeight,omitempty"`
}

// StaticClusterWeight is the weight of the clusters an affinity selects.
type StaticClusterWeight struct {
	// TargetCluster selects the clusters that get Weight.
	TargetCluster ClusterAffinity `json:"targetCluster"`

	// Weight is the relative share of replicas; at least 1.
	// +kubebuilder:validation:Minimum=1
	Weight int64 `json:"weight"`
}

// DynamicWeightFactor is what dynamic weights are computed from.
// +kubebuilder:validation:Enum=AvailableReplicas
type DynamicWeightFactor string

// DynamicWeightByAvailableReplicas weighs clusters by how many replicas
// their free resources can hold.
const DynamicWeightByAvailableReplicas DynamicWeightFactor = "AvailableReplicas"

// FailoverBehavior says how workloads leave failed clusters and failed
// applications.
type FailoverBehavior struct {
	// Application enables application failover: a workload that stays
	// unhealthy on a cluster is moved elsewhere. Nil disables it.
	// +optional
	Application *ApplicationFailoverBehavior `json:"application,omitempty"`

	// Cluster tunes cluster failover (eviction from NoExecute-tainted
	// clusters). Nil uses the defaults.
	// +optional
	Cluster *ClusterFailoverBehavior `json:"cluster,omitempty"`

	// Failback moves a workload back to the placement it had before a
	// failover once the clusters it left have been Ready for the
	// stabilization window. Nil leaves a failed-over workload where it is.
	// +optional
	Failback *FailbackBehavior `json:"failback,omitempty"`
}

// FailbackBehavior says when a failed-over workload returns to its
// preferred placement. A failback always adds the returning copy first and
// removes or shrinks the others only once it is healthy, and never starts
// while the fleet guard sees a disruption.
type FailbackBehavior struct {
	// StabilizationWindowSeconds is how long every cluster the workload
	// returns to must have been Ready, without a break, before it returns.
	// A cluster that fails again within the window starts it over.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=300
	// +optional
	StabilizationWindowSeconds int32 `json:"stabilizationWindowSeconds,omitempty"`

	// MaxConcurrent is the most failbacks in progress at once across the
	// fleet (counting those of every policy) for this policy to start one.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=5
	// +optional
	MaxConcurrent int32 `json:"maxConcurrent,omitempty"`
}

// StatePreservation says which values of a workload's status on the
// cluster it leaves are carried to its new copies, as labels.
type StatePreservation struct {
	// Rules are the values to carry; each becomes one label.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +listType=map
	// +listMapKey=aliasLabelName
	Rules []StatePreservationRule `json:"rules"`
}

// StatePreservationRule carries one value of the old copy's status.
type StatePreservationRule struct {
	// AliasLabelName is the label the value is written to on the new
	// copies, e.g. flink.example.io/checkpoint-path.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`
	AliasLabelName string `json:"aliasLabelName"`

	// JSONPath selects the value in the old copy's .status, in kubectl's
	// JSONPath syntax relative to .status, e.g. {.jobStatus.checkpointPath}.
	// The value must be a string, number or boolean that is a valid label
	// value; a rule whose value is missing or not a valid label value carries
	// nothing and is reported on the binding.
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self.startsWith('{') && self.endsWith('}')",message="jsonPath must be a JSONPath template in braces, e.g. {.jobStatus.checkpointPath}"
	JSONPath string `json:"jsonPath"`

	// ValuePattern constrains the carried value: an RE2 regular expression
	// (Go regexp syntax) the whole value must match, e.g.
	// s3://flink/checkpoints/wordcount/chk-[0-9]+. The value is read from
	// the status the member reported, so it is the member's claim: a value
	// that does not match is not carried, and the failover says so (a
	// Warning event StatePreservationFailed and the eviction's message).
	// Empty carries any value.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	ValuePattern string `json:"valuePattern,omitempty"`
}

// ApplicationFailoverBehavior says when an unhealthy application is moved
// and what happens to the copy it leaves behind.
// +kubebuilder:validation:XValidation:rule="!has(self.gracePeriodSeconds) || !has(self.purgeMode) || self.purgeMode == 'Gracefully' || self.purgeMode == 'Graciously'",message="gracePeriodSeconds may only be set when purgeMode is Gracefully",fieldPath=".gracePeriodSeconds"
type ApplicationFailoverBehavior struct {
	// DecisionConditions say when the application is considered failed.
	// +kubebuilder:default={}
	// +optional
	DecisionConditions DecisionConditions `json:"decisionConditions,omitempty"`

	// PurgeMode says what happens to the copy on the cluster the
	// application leaves.
	// +kubebuilder:default=Gracefully
	// +optional
	PurgeMode PurgeMode `json:"purgeMode,omitempty"`

	// GracePeriodSeconds is how long a Gracefully purged copy is kept at
	// most while the new copy is not yet healthy. Only valid with purgeMode
	// Gracefully; defaults to 600 when evaluated.
	// +kubebuilder:validation:Minimum=1
	// +optional
	GracePeriodSeconds *int32 `json:"gracePeriodSeconds,omitempty"`

	// PreConditions must hold before the application's health on a cluster
	// counts towards a failover at all.
	// +optional
	PreConditions *PreConditions `json:"preConditions,omitempty"`

	// BlockPredecessorSeconds is how long the scheduler must not place the
	// application back on a cluster it failed over from: 0 means never
	// again (until the eviction history is cleared by a failback or a
	// WorkloadRebalancer). Nil keeps the default: a recently evicted
	// cluster is only avoided while others fit.
	// +kubebuilder:validation:Minimum=0
	// +optional
	BlockPredecessorSeconds *int32 `json:"blockPredecessorSeconds,omitempty"`

	// StatePreservation carries values of the unhealthy copy's status to
	// the copies that replace it.
	// +optional
	StatePreservation *StatePreservation `json:"statePreservation,omitempty"`
}

// PreConditions gate application failover; all that are set must hold.
type PreConditions struct {
	// DelaySeconds is how long after the hub first saw the application's
	// status on a cluster its health starts to count there (time for a
	// slow first start).
	// +kubebuilder:validation:Minimum=0
	// +optional
	DelaySeconds *int32 `json:"delaySeconds,omitempty"`

	// HealthyState, when Healthy, counts only an application that has
	// been Healthy on the cluster at least once: one that never started is
	// left to be fixed where it is.
	// +kubebuilder:validation:Enum=Healthy
	// +optional
	HealthyState string `json:"healthyState,omitempty"`
}

// HealthyStateHealthy is the PreConditions healthyState that requires the
// application to have been Healthy once.
const HealthyStateHealthy = "Healthy"

// DecisionConditions say when an application is considered failed.
type DecisionConditions struct {
	// TolerationSeconds is how long the application must stay unhealthy
	// on a cluster, without a break, before it is moved.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:default=300
	// +optional
	TolerationSeconds *int32 `json:"tolerationSeconds,omitempty"`
}

// ClusterFailoverBehavior tunes eviction from failed clusters.
type ClusterFailoverBehavior struct {
	// PurgeMode says what happens to the copy on the evicted cluster.
	// +kubebuilder:default=Gracefully
	// +optional
	PurgeMode PurgeMode `json:"purgeMode,omitempty"`

	// StatePreservation carries values of the evicted copy's last reported
	// status to the copies that replace it.
	// +optional
	StatePreservation *StatePreservation `json:"statePreservation,omitempty"`
}

// PurgeMode is what happens to the copy of a workload on the cluster it is
// evicted from. Immediately and Graciously are the spellings of Karmada's
// application failover proposal, accepted as aliases of Directly and
// Gracefully; use NormalizePurgeMode before comparing.
// +kubebuilder:validation:Enum=Directly;Gracefully;Never;Immediately;Graciously
type PurgeMode string

// Purge modes.
const (
	// PurgeModeDirectly deletes the old copy at once; the new copy is
	// created after it is gone.
	PurgeModeDirectly PurgeMode = "Directly"
	// PurgeModeGracefully keeps the old copy until the new placement is
	// healthy or the grace period has passed.
	PurgeModeGracefully PurgeMode = "Gracefully"
	// PurgeModeNever keeps the old copy until a person removes it.
	PurgeModeNever PurgeMode = "Never"
	// PurgeModeImmediately is an alias of PurgeModeDirectly.
	PurgeModeImmediately PurgeMode = "Immediately"
	// PurgeModeGraciously is an alias of PurgeModeGracefully.
	PurgeModeGraciously PurgeMode = "Graciously"
)

// ConflictResolution is what a member does with an existing object that
// Flotilla does not manage.
// +kubebuilder:validation:Enum=Abort;Overwrite
type ConflictResolution string

// Conflict resolutions.
const (
	// ConflictAbort leaves the existing object alone and reports a conflict.
	ConflictAbort ConflictResolution = "Abort"
	// ConflictOverwrite adopts the existing object and applies the manifest.
	ConflictOverwrite ConflictResolution = "Overwrite"
)

// Suspension pauses propagation.
type Suspension struct {
	// Dispatching pauses propagation to every member: the Works are marked
	// suspendDispatching, so the members keep their objects as they are.
	// +optional
	Dispatching *bool `json:"dispatching,omitempty"`

	// DispatchingOnClusters pauses propagation to the listed members only.
	// +optional
	DispatchingOnClusters *SuspendClusters `json:"dispatchingOnClusters,omitempty"`
}

// SuspendClusters lists clusters whose dispatching is paused.
type SuspendClusters struct {
	// ClusterNames are the paused clusters (at most 1024).
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=253
	// +optional
	ClusterNames []string `json:"clusterNames,omitempty"`
}
