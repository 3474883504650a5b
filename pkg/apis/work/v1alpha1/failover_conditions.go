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
	// BindingConditionApplicationFailoverHeld is True while application
	// failover holds its evictions for the binding: the workload is
	// Unhealthy on every cluster it is placed on, so the application is
	// at fault, not the clusters, and moving it would only break it
	// somewhere else. False once that no longer holds.
	BindingConditionApplicationFailoverHeld = "ApplicationFailoverHeld"

	// BindingReasonUnhealthyEverywhere: every placed cluster reports the
	// current generation Unhealthy.
	BindingReasonUnhealthyEverywhere = "UnhealthyEverywhere"
	// BindingReasonApplicationFailoverReleased: some placed cluster is no
	// longer Unhealthy (or has not reported); application failover acts
	// again.
	BindingReasonApplicationFailoverReleased = "Released"
)
