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

const (
	// BindingConditionDependenciesResolved is set on the binding of a
	// workload whose policy has propagateDeps (and mirrored on its
	// template): True when every object it depends on is held by a
	// ResourceTemplate of its namespace and propagated with it, False
	// (reason DependencyMissing) naming those that are not.
	BindingConditionDependenciesResolved = "DependenciesResolved"

	// BindingReasonDependenciesResolved: every dependency is propagated.
	BindingReasonDependenciesResolved = "DependenciesResolved"
	// BindingReasonDependencyMissing: some dependency has no
	// ResourceTemplate in the workload's namespace (or one the hub may not
	// propagate); the workload runs without it until it appears.
	BindingReasonDependencyMissing = "DependencyMissing"

	// LabelDependencyOnly marks a binding the hub made only to propagate a
	// dependency that no policy selects (its placement is nil; it follows
	// spec.requiredBy and is deleted when nothing requires it).
	LabelDependencyOnly = "work.flotilla.io/dependency-only"
)
