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
	"k8s.io/apimachinery/pkg/util/intstr"
)

// RolloutStrategy says how a template change reaches the clusters. The
// names are Open Cluster Management's rolloutStrategy (type All,
// Progressive, ProgressivePerGroup; minSuccessTime, progressDeadline,
// maxFailures, maxConcurrency; decision groups by groupName and
// groupClusterSelector); approvals and analyses are Flotilla's additions.
// +kubebuilder:validation:XValidation:rule="self.type != 'Progressive' || has(self.progressive)",message="rolloutStrategy: type Progressive needs progressive",fieldPath=".progressive"
// +kubebuilder:validation:XValidation:rule="self.type != 'ProgressivePerGroup' || has(self.progressivePerGroup)",message="rolloutStrategy: type ProgressivePerGroup needs progressivePerGroup",fieldPath=".progressivePerGroup"
// +kubebuilder:validation:XValidation:rule="!has(self.progressive) || self.type == 'Progressive'",message="rolloutStrategy: progressive is only for type Progressive",fieldPath=".progressive"
// +kubebuilder:validation:XValidation:rule="!has(self.progressivePerGroup) || self.type == 'ProgressivePerGroup'",message="rolloutStrategy: progressivePerGroup is only for type ProgressivePerGroup",fieldPath=".progressivePerGroup"
type RolloutStrategy struct {
	// Type is All (every cluster at once: the default, as without a
	// strategy), Progressive (maxConcurrency clusters at a time, by name)
	// or ProgressivePerGroup (groups of clusters by label, in order).
	// +kubebuilder:default=All
	// +optional
	Type RolloutType `json:"type,omitempty"`

	// Progressive configures type Progressive.
	// +optional
	Progressive *RolloutProgressive `json:"progressive,omitempty"`

	// ProgressivePerGroup configures type ProgressivePerGroup.
	// +optional
	ProgressivePerGroup *RolloutProgressivePerGroup `json:"progressivePerGroup,omitempty"`

	// Rollback, when set, returns the clusters that run a halted revision
	// to the last revision that completed. Nil halts only: the clusters
	// keep what they run until the template changes or the rollout is
	// resumed.
	// +optional
	Rollback *RolloutRollback `json:"rollback,omitempty"`

	// RevisionHistoryLimit is how many revisions of the template are kept
	// besides the newest, the last completed and those a cluster runs.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default=10
	// +optional
	RevisionHistoryLimit *int32 `json:"revisionHistoryLimit,omitempty"`
}

// RolloutType is how a rollout proceeds.
// +kubebuilder:validation:Enum=All;Progressive;ProgressivePerGroup
type RolloutType string

// Rollout types (OCM's names).
const (
	// RolloutTypeAll writes the new revision to every cluster at once.
	RolloutTypeAll RolloutType = "All"
	// RolloutTypeProgressive updates maxConcurrency clusters at a time.
	RolloutTypeProgressive RolloutType = "Progressive"
	// RolloutTypeProgressivePerGroup updates the groups in order.
	RolloutTypeProgressivePerGroup RolloutType = "ProgressivePerGroup"
)

// RolloutConfig is what every progressive rollout shares.
type RolloutConfig struct {
	// MinSuccessTime is how long an updated cluster's copy must stay
	// Healthy (the resource interpreter's health, on the new revision)
	// before it counts as a success: the soak time. Default 0.
	// +optional
	MinSuccessTime metav1.Duration `json:"minSuccessTime,omitempty"`

	// ProgressDeadline is how long an updated cluster's copy may be
	// anything but Healthy — after its update, or after it was last
	// Healthy — before it counts as a failure. Default 10m.
	// +optional
	ProgressDeadline *metav1.Duration `json:"progressDeadline,omitempty"`

	// MaxFailures is how many updated clusters may fail (a number or a
	// percentage of the clusters) before the rollout halts. Default 0:
	// the first failure halts it.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=8
	// +kubebuilder:validation:XValidation:rule="type(self) == string ? self.matches('^((100|[0-9]{1,2})%|[0-9]{1,6})$') : (self >= 0 && self <= 100000)",message="maxFailures must be a number from 0 or a percentage from 0% to 100%"
	// +optional
	MaxFailures *intstr.IntOrString `json:"maxFailures,omitempty"`
}

// RolloutProgressive updates the clusters a few at a time, ordered by
// name (or by the value of sortingLabelKey, then name).
type RolloutProgressive struct {
	RolloutConfig `json:",inline"`

	// MaxConcurrency is how many clusters (a number or a percentage) may
	// be updating at once; clusters whose copy is being evicted or failed
	// back count too. Default 1.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=8
	// +kubebuilder:validation:XValidation:rule="type(self) == string ? self.matches('^((100|[1-9][0-9]?)%|[1-9][0-9]{0,5})$') : (self >= 1 && self <= 100000)",message="maxConcurrency must be a number from 1 or a percentage from 1% to 100%"
	// +optional
	MaxConcurrency *intstr.IntOrString `json:"maxConcurrency,omitempty"`

	// SortingLabelKey orders the clusters by the value of this label,
	// then by name (KubeFleet's name).
	// +kubebuilder:validation:MaxLength=317
	// +optional
	SortingLabelKey string `json:"sortingLabelKey,omitempty"`
}

// RolloutProgressivePerGroup updates the groups one after the other.
type RolloutProgressivePerGroup struct {
	RolloutConfig `json:",inline"`

	// DecisionGroups are the groups, in order. A cluster is in the first
	// group that selects it; the clusters no group selects form a last
	// group of their own (named "remaining"), so a cluster that joins
	// outside every group is updated last, never first.
	// +listType=map
	// +listMapKey=groupName
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	DecisionGroups []RolloutGroup `json:"decisionGroups"`
}

// RemainingGroupName names the group of clusters no decision group
// selects.
const RemainingGroupName = "remaining"

// RolloutGroup is one group of a ProgressivePerGroup rollout.
// +kubebuilder:validation:XValidation:rule="self.groupName != 'remaining'",message="decisionGroups: the group name remaining is the clusters no group selects",fieldPath=".groupName"
type RolloutGroup struct {
	// GroupName names the group in status, events and approvals.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
	GroupName string `json:"groupName"`

	// GroupClusterSelector selects the group's clusters.
	GroupClusterSelector GroupClusterSelector `json:"groupClusterSelector"`

	// MaxConcurrency is how many of the group's clusters (a number or a
	// percentage) may be updating at once. Default: all of them.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=8
	// +kubebuilder:validation:XValidation:rule="type(self) == string ? self.matches('^((100|[1-9][0-9]?)%|[1-9][0-9]{0,5})$') : (self >= 1 && self <= 100000)",message="maxConcurrency must be a number from 1 or a percentage from 1% to 100%"
	// +optional
	MaxConcurrency *intstr.IntOrString `json:"maxConcurrency,omitempty"`

	// Approval Required makes the rollout wait, once the group has
	// succeeded, until a person approves it (kubectl flotilla rollout
	// approve) before the next group starts. Default None.
	// +kubebuilder:default=None
	// +optional
	Approval ApprovalMode `json:"approval,omitempty"`

	// Analysis, when set, must succeed over the group's clusters, besides
	// their health, before the group succeeds.
	// +optional
	Analysis *RolloutAnalysis `json:"analysis,omitempty"`
}

// GroupClusterSelector selects clusters (OCM's name).
type GroupClusterSelector struct {
	// LabelSelector matches the Cluster objects' labels.
	// +kubebuilder:validation:XValidation:rule="!has(self.matchLabels) || size(self.matchLabels) <= 64",message="labelSelector: at most 64 matchLabels"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || size(self.matchExpressions) <= 32",message="labelSelector: at most 32 matchExpressions"
	LabelSelector *metav1.LabelSelector `json:"labelSelector"`
}

// ApprovalMode says whether a group waits for a person.
// +kubebuilder:validation:Enum=None;Required
type ApprovalMode string

// Approval modes.
const (
	ApprovalNone     ApprovalMode = "None"
	ApprovalRequired ApprovalMode = "Required"
)

// RolloutAnalysis is a measurement the group must pass: Argo Rollouts'
// AnalysisRun semantics. Every interval the hub runs the Prometheus query
// over the group's clusters; a measurement is a success when
// successCondition holds, a failure when failureCondition holds, and
// inconclusive otherwise, or when the hub cannot read the metric. The
// analysis succeeds after count successes; it fails (and halts the
// rollout) after more than failureLimit failures; an inconclusive
// measurement pauses the rollout for a person (kubectl flotilla rollout
// approve accepts it). Where the hub connects is the hub's
// --rollout-prometheus-address, never the tenant's choice.
type RolloutAnalysis struct {
	// Prometheus is the query.
	Prometheus PrometheusAnalysis `json:"prometheus"`

	// SuccessCondition is a CEL expression over result, the query's
	// value (a double; the first sample of a vector), e.g. "result < 0.01".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	SuccessCondition string `json:"successCondition"`

	// FailureCondition is a CEL expression over result; empty means a
	// measurement that is not a success is inconclusive.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	FailureCondition string `json:"failureCondition,omitempty"`

	// Interval between measurements. Default 30s; at least 1s.
	// +optional
	Interval *metav1.Duration `json:"interval,omitempty"`

	// Count is how many successful measurements the analysis needs.
	// Default 1.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	Count *int32 `json:"count,omitempty"`

	// FailureLimit is how many failed measurements are tolerated.
	// Default 0.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	FailureLimit *int32 `json:"failureLimit,omitempty"`
}

// PrometheusAnalysis is a PromQL query.
type PrometheusAnalysis struct {
	// Query is the PromQL expression. {{clusters}} in it is replaced by a
	// regular expression that matches exactly the group's cluster names
	// (for a label matcher such as cluster=~"{{clusters}}").
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Query string `json:"query"`
}

// RolloutRollback says how a halted revision is rolled back.
type RolloutRollback struct {
	// Type is All (every cluster that runs the halted revision returns to
	// the last completed one at once; the default) or Progressive (as
	// many at a time as the rollout updates, each batch once the previous
	// one is Healthy again or its progressDeadline has passed).
	// +kubebuilder:default=All
	// +optional
	Type RollbackType `json:"type,omitempty"`
}

// RollbackType is how a rollback proceeds.
// +kubebuilder:validation:Enum=All;Progressive
type RollbackType string

// Rollback types.
const (
	RollbackAll         RollbackType = "All"
	RollbackProgressive RollbackType = "Progressive"
)
