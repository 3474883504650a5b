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

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Rollout conditions of a binding (mirrored on its template).
const (
	// BindingConditionRolloutProgressing is True while the newest revision
	// is reaching the clusters, False when it waits (an approval, an
	// inconclusive analysis, the fleet guard) or is halted.
	BindingConditionRolloutProgressing = "RolloutProgressing"
	// BindingConditionRolloutHalted is True when the newest revision
	// failed its gates: no further cluster receives it.
	BindingConditionRolloutHalted = "RolloutHalted"
	// BindingConditionRolloutComplete is True when every cluster runs the
	// newest revision and its gates passed.
	BindingConditionRolloutComplete = "RolloutComplete"
)

// AnnotationTemplateRevision on a Work is the revision of the template it
// renders.
const AnnotationTemplateRevision = "flotilla.io/template-revision"

// Annotations a person writes on a template to steer its rollout
// (kubectl flotilla rollout approve / resume).
const (
	// AnnotationRolloutApprove is "<revision>/<group>": the groups up to
	// and including <group> of <revision> are approved (and an
	// inconclusive analysis of one of them accepted).
	AnnotationRolloutApprove = "rollout.flotilla.io/approve"
	// AnnotationRolloutResume is "<revision>": a halted <revision> goes on
	// (the failures counted so far are forgotten).
	AnnotationRolloutResume = "rollout.flotilla.io/resume"
)

// RolloutStatusMaxClusters bounds status.rollout.clusters.
const RolloutStatusMaxClusters = 1024

// RolloutStatus is the state of a template's rollout.
type RolloutStatus struct {
	// Revision is the template's newest revision, the one rolling out.
	Revision int64 `json:"revision"`

	// StableRevision is the last revision that completed (0: none yet).
	// A copy that fails over, or a cluster whose group the newest
	// revision has not reached, runs it.
	// +optional
	StableRevision int64 `json:"stableRevision,omitempty"`

	// Phase is Progressing, Waiting (an approval, an inconclusive
	// analysis, the fleet guard), Halted, RollingBack, RolledBack or
	// Complete.
	Phase RolloutPhase `json:"phase"`

	// Reason is a CamelCase word for why the rollout is in its phase
	// (the reason of its conditions), e.g. WaitingForApproval.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Reason string `json:"reason,omitempty"`

	// Group is the group the rollout is in (Progressing, Waiting) or
	// halted in.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Group string `json:"group,omitempty"`

	// GroupIndex is Group's place in the order, from 0.
	// +optional
	GroupIndex int32 `json:"groupIndex,omitempty"`

	// Message says why the rollout is where it is.
	// +kubebuilder:validation:MaxLength=4096
	// +optional
	Message string `json:"message,omitempty"`

	// HaltedTime is when the revision halted.
	// +optional
	HaltedTime *metav1.Time `json:"haltedTime,omitempty"`

	// Failures counts the clusters whose copy of the revision failed.
	// +optional
	Failures int32 `json:"failures,omitempty"`

	// Resumed is the last rollout.flotilla.io/resume value the hub
	// honoured: each value resumes once.
	// +kubebuilder:validation:MaxLength=128
	// +optional
	Resumed string `json:"resumed,omitempty"`

	// Analysis is the state of the current group's analysis.
	// +optional
	Analysis *AnalysisStatus `json:"analysis,omitempty"`

	// Clusters is, per cluster, the revision it runs and how it is doing.
	// +listType=map
	// +listMapKey=clusterName
	// +kubebuilder:validation:MaxItems=1024
	// +optional
	Clusters []ClusterRolloutStatus `json:"clusters,omitempty"`

	// Revisions is the kept history, newest first.
	// +kubebuilder:validation:MaxItems=102
	// +optional
	Revisions []RevisionRecord `json:"revisions,omitempty"`
}

// RolloutPhase is where a rollout is.
type RolloutPhase string

// Rollout phases.
const (
	RolloutPhaseProgressing RolloutPhase = "Progressing"
	RolloutPhaseWaiting     RolloutPhase = "Waiting"
	RolloutPhaseHalted      RolloutPhase = "Halted"
	RolloutPhaseRollingBack RolloutPhase = "RollingBack"
	RolloutPhaseRolledBack  RolloutPhase = "RolledBack"
	RolloutPhaseComplete    RolloutPhase = "Complete"
)

// ClusterRolloutStatus is one cluster's part in the rollout.
type ClusterRolloutStatus struct {
	// ClusterName is the cluster.
	ClusterName string `json:"clusterName"`

	// Revision is the revision its Work renders (0: no Work yet).
	// +optional
	Revision int64 `json:"revision,omitempty"`

	// Group is the cluster's group.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Group string `json:"group,omitempty"`

	// Verdict is Pending (its group not reached yet), Updating (on the
	// revision, not yet Healthy), Soaking (Healthy, for less than
	// minSuccessTime), Succeeded, Failed, Lost (the cluster is not Ready:
	// neither a success nor a failure) or RolledBack.
	Verdict ClusterVerdict `json:"verdict"`

	// UpdatedTime is when the cluster was given the revision.
	// +optional
	UpdatedTime *metav1.Time `json:"updatedTime,omitempty"`

	// HealthySince is since when its copy of the revision is Healthy.
	// +optional
	HealthySince *metav1.Time `json:"healthySince,omitempty"`

	// LastHealthyTime is when its copy of the revision was last Healthy.
	// +optional
	LastHealthyTime *metav1.Time `json:"lastHealthyTime,omitempty"`

	// Message says why, for a Failed or Lost cluster.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Message string `json:"message,omitempty"`
}

// ClusterVerdict is how one cluster is doing in a rollout.
type ClusterVerdict string

// Cluster verdicts.
const (
	VerdictPending    ClusterVerdict = "Pending"
	VerdictUpdating   ClusterVerdict = "Updating"
	VerdictSoaking    ClusterVerdict = "Soaking"
	VerdictSucceeded  ClusterVerdict = "Succeeded"
	VerdictFailed     ClusterVerdict = "Failed"
	VerdictLost       ClusterVerdict = "Lost"
	VerdictRolledBack ClusterVerdict = "RolledBack"
)

// AnalysisStatus is the state of a group's analysis.
type AnalysisStatus struct {
	// Group is the group measured.
	// +kubebuilder:validation:MaxLength=63
	Group string `json:"group"`
	// Phase is Running, Successful, Failed or Inconclusive.
	Phase AnalysisPhase `json:"phase"`
	// Successes, Failures and Inconclusive count the measurements.
	// +optional
	Successes int32 `json:"successes,omitempty"`
	// +optional
	Failures int32 `json:"failures,omitempty"`
	// +optional
	Inconclusive int32 `json:"inconclusive,omitempty"`
	// Message is the last measurement's value or error.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Message string `json:"message,omitempty"`
}

// AnalysisPhase is where an analysis is.
type AnalysisPhase string

// Analysis phases.
const (
	AnalysisRunning      AnalysisPhase = "Running"
	AnalysisSuccessful   AnalysisPhase = "Successful"
	AnalysisFailed       AnalysisPhase = "Failed"
	AnalysisInconclusive AnalysisPhase = "Inconclusive"
)

// RevisionRecord is one kept revision of a template.
type RevisionRecord struct {
	// Revision is its number.
	Revision int64 `json:"revision"`
	// TemplateGeneration is the template generation it was first seen at.
	// +optional
	TemplateGeneration int64 `json:"templateGeneration,omitempty"`
	// Outcome is Progressing, Complete, Halted, RolledBack or Superseded.
	// +optional
	Outcome string `json:"outcome,omitempty"`
	// CreatedTime is when the hub recorded it.
	// +optional
	CreatedTime *metav1.Time `json:"createdTime,omitempty"`
}
