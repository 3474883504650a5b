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

// BindingConditionWorksUpToDate is True when every existing Work of the
// binding renders the template's current generation. It is False with
// reason StaleCopies when some cluster keeps a copy that cannot follow the
// template (an evicting copy, which is left as it was while its graceful
// eviction task lasts, or a Work an override or a deleting cluster keeps
// from being updated), and with reason NoClusterScheduled when no cluster
// is scheduled, so a template change reaches nothing.
const BindingConditionWorksUpToDate = "WorksUpToDate"

// AnnotationTemplateGeneration on a Work is the generation of the
// template it was rendered from.
const AnnotationTemplateGeneration = "work.flotilla.io/template-generation"
