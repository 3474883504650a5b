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

import "strings"

// WorkloadAffinityGroups are the groups a binding's workload is in, made
// by the hub from the policy's placement.workloadAffinity and the
// template's labels (Karmada's spec.workloadAffinityGroups). Each is
// "<label key>=<label value>", e.g. "app.group=frontend"; the group's
// members are the bindings of the same namespace with the same string.
// Only namespaced ResourceBindings carry them.
type WorkloadAffinityGroups struct {
	// AffinityGroup is the affinity group, from placement.workloadAffinity.affinity.
	// +kubebuilder:validation:MaxLength=381
	// +optional
	AffinityGroup string `json:"affinityGroup,omitempty"`

	// AntiAffinityGroup is the anti-affinity group, from placement.workloadAffinity.antiAffinity.
	// +kubebuilder:validation:MaxLength=381
	// +optional
	AntiAffinityGroup string `json:"antiAffinityGroup,omitempty"`
}

// MaxWorkloadAffinityGroupLength is the longest group string: a label key
// (317) and a label value (63) joined by '='.
const MaxWorkloadAffinityGroupLength = 381

// WorkloadAffinityGroup is the group string of a label key and value.
func WorkloadAffinityGroup(key, value string) string { return key + "=" + value }

// SplitWorkloadAffinityGroup returns a group string's label key and value
// (a label key never holds '=').
func SplitWorkloadAffinityGroup(group string) (key, value string) {
	key, value, _ = strings.Cut(group, "=")
	return key, value
}

// Reasons of a ClusterDecision for the workload affinity filters (Karmada's
// plugin names).
const (
	DecisionWorkloadAffinity     = "WorkloadAffinity"
	DecisionWorkloadAntiAffinity = "WorkloadAntiAffinity"
)
