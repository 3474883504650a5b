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

// WorkloadAffinity keeps workloads together (affinity) or apart
// (anti-affinity) across clusters, by a label of their templates
// (Karmada's placement.workloadAffinity, v1.17). Workloads whose embedded
// objects carry the same value of the key, in the same namespace, and
// whose policies name the same key, form one group. Both terms are hard
// requirements:
//
//   - affinity: a workload goes only to clusters where every placed member
//     of its group runs; the first member of a group (none placed yet) is
//     never held back, it goes wherever its placement allows and the others
//     follow it;
//   - antiAffinity: a workload never goes to a cluster where another member
//     of its group runs (or is still being gracefully evicted from).
//
// A cluster a workload already runs on is never taken from it by these
// rules. Groups never cross namespaces: a ClusterPropagationPolicy's
// workloads are grouped within each template's namespace, and templates of
// cluster-scoped kinds (ClusterResourceTemplates) are not grouped at all,
// as in Karmada.
// +kubebuilder:validation:XValidation:rule="!has(self.affinity) || !has(self.antiAffinity) || self.affinity.groupByLabelKey != self.antiAffinity.groupByLabelKey",message="workloadAffinity: affinity and antiAffinity must not use the same groupByLabelKey (a group cannot be kept both together and apart)"
type WorkloadAffinity struct {
	// Affinity co-locates the workloads of a group: each goes only to
	// clusters where the group's placed workloads run.
	// +optional
	Affinity *WorkloadAffinityTerm `json:"affinity,omitempty"`

	// AntiAffinity separates the workloads of a group: none goes to a
	// cluster where another of the group runs.
	// +optional
	AntiAffinity *WorkloadAntiAffinityTerm `json:"antiAffinity,omitempty"`
}

// WorkloadAffinityTerm is an affinity group by label key.
type WorkloadAffinityTerm struct {
	// GroupByLabelKey is the label key, on the template's embedded object,
	// whose value names the group (e.g. app.group: workloads labelled
	// app.group=frontend form one group, app.group=backend another). A
	// workload without the label is in no group.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:XValidation:rule="self.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$') && (!self.contains('/') || self.indexOf('/') <= 253)",message="groupByLabelKey must be a label key: an optional DNS subdomain prefix (at most 253 characters) and '/', then a name of 1-63 letters, digits, '-', '_' or '.' that starts and ends with a letter or digit"
	// +required
	GroupByLabelKey string `json:"groupByLabelKey"`
}

// WorkloadAntiAffinityTerm is an anti-affinity group by label key.
type WorkloadAntiAffinityTerm struct {
	// GroupByLabelKey is the label key, on the template's embedded object,
	// whose value names the group (e.g. pipeline.id: the workloads labelled
	// pipeline.id=payments never share a cluster). A workload without the
	// label is in no group.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:XValidation:rule="self.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$') && (!self.contains('/') || self.indexOf('/') <= 253)",message="groupByLabelKey must be a label key: an optional DNS subdomain prefix (at most 253 characters) and '/', then a name of 1-63 letters, digits, '-', '_' or '.' that starts and ends with a letter or digit"
	// +required
	GroupByLabelKey string `json:"groupByLabelKey"`
}
