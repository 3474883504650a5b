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
	// EvictionReasonRescheduled: the scheduler took the cluster out of the
	// placement (placement change, reschedule, spread, scale-down); not a
	// failure, so it leaves no eviction history. The old copy stays until
	// the new placement is healthy.
	EvictionReasonRescheduled = "Rescheduled"

	// EvictionReasonFailbackRolledBack: a failback's new placement did not
	// become healthy in time and the old one was restored. An entry of a
	// cluster the workload still runs on (a come-back that grew it) only
	// keeps failbacks from trying it again; the scheduler does not avoid
	// the cluster for it.
	EvictionReasonFailbackRolledBack = "FailbackRolledBack"

	// EvictionProducerScheduler is the hub's scheduler.
	EvictionProducerScheduler = "Scheduler"
)
