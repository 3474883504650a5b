package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// SchedulingDecision is what the scheduler saw when it last wrote a
// decision: each cluster's filter and score result. It is written in the
// same status update as the Scheduled condition, never on its own, so a
// cluster whose health changed since may read differently now; the
// decision says when it was made.
type SchedulingDecision struct {
	// DecidedTime is when the scheduler made this decision.
	DecidedTime metav1.Time `json:"decidedTime"`

	// AffinityName is the clusterAffinities term the decision is for: the
	// term used, or, when none fit, the term whose failure is reported.
	// +optional
	AffinityName string `json:"affinityName,omitempty"`

	// Clusters are the verdicts: every selected cluster first, then at most
	// MaxUnselectedClusterDecisions others (clusters that passed the
	// filters before those that did not), so a binding's size stays bounded
	// at fleet scale.
	// +kubebuilder:validation:MaxItems=128
	// +optional
	Clusters []ClusterDecision `json:"clusters,omitempty"`

	// FilteredCounts counts the clusters each filter removed, over the
	// whole fleet (including clusters not listed in clusters).
	// +optional
	FilteredCounts []FilterCount `json:"filteredCounts,omitempty"`

	// OmittedClusters is how many clusters have no entry in clusters.
	// +optional
	OmittedClusters int32 `json:"omittedClusters,omitempty"`
}

// ClusterDecision is the scheduler's verdict on one cluster.
type ClusterDecision struct {
	// ClusterName is the cluster.
	ClusterName string `json:"clusterName"`

	// Selected is true when the binding was placed on the cluster.
	Selected bool `json:"selected"`

	// Replicas is what the cluster was given (workloads with replicas).
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// Score is the cluster's score when it passed the filters (Karmada's
	// ClusterLocality: 100 when it already ran the workload, 50 when a
	// copy the scheduler is removing still runs there, 0 otherwise); absent
	// when a filter removed it.
	// +optional
	Score *int32 `json:"score,omitempty"`

	// Reason is a CamelCase code: for a filtered cluster the filter
	// (ClusterDeleting, ClusterAffinityMismatch, TaintUntolerated, Blocked,
	// WorkloadAffinity, WorkloadAntiAffinity, Evicting, RecentlyEvicted, APINotServed), otherwise Selected,
	// NotSelectedBySpread or NoReplicasAssigned.
	Reason string `json:"reason"`

	// Message says why in words, e.g. which taint.
	// +optional
	Message string `json:"message,omitempty"`
}

// FilterCount is how many clusters one filter removed.
type FilterCount struct {
	// Reason is the filter's CamelCase code.
	Reason string `json:"reason"`
	// Count is how many clusters it removed.
	Count int32 `json:"count"`
}

// MaxUnselectedClusterDecisions bounds the unselected clusters a
// SchedulingDecision lists (KubeFleet keeps 20 likewise).
const MaxUnselectedClusterDecisions = 20

// MaxClusterDecisions is the most entries SchedulingDecision.Clusters
// holds (its CRD MaxItems): selected clusters beyond it are counted in
// OmittedClusters like the unselected ones beyond
// MaxUnselectedClusterDecisions.
const MaxClusterDecisions = 128

// Reasons of a ClusterDecision.
const (
	DecisionSelected                = "Selected"
	DecisionNotSelectedBySpread     = "NotSelectedBySpread"
	DecisionNoReplicasAssigned      = "NoReplicasAssigned"
	DecisionClusterDeleting         = "ClusterDeleting"
	DecisionClusterAffinityMismatch = "ClusterAffinityMismatch"
	DecisionTaintUntolerated        = "TaintUntolerated"
	DecisionBlocked                 = "Blocked"
	DecisionEvicting                = "Evicting"
	DecisionRecentlyEvicted         = "RecentlyEvicted"
	DecisionAPINotServed            = "APINotServed"
)
