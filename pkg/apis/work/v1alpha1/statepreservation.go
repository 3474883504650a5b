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

// AnnotationPreservedLabelState on a Work is the failover state (labels,
// as a JSON object) the hub injected into its workload: the
// preservedLabelState of the eviction that placed the copy on this
// cluster. The hub renders it again on every change, so the copy keeps
// the labels for as long as it runs there, after the eviction task has
// ended; a later failover's state replaces it.
const AnnotationPreservedLabelState = "work.flotilla.io/preserved-label-state"
