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

package binding

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// carryReportState fills item's firstReportedTime and everHealthy, the
// history application failover's preConditions read, from prev (the item
// of the same cluster in the stored status, or nil). firstReportedTime is
// the hub's clock when the agent first reported the copy applied, and is
// kept from then on; everHealthy, once true, stays true. Both go with the
// item when the cluster leaves the placement: a copy placed there again
// starts over.
func carryReportState(item, prev *workv1alpha1.AggregatedStatusItem, now metav1.Time) {
	if prev != nil {
		item.FirstReportedTime = prev.FirstReportedTime
		item.EverHealthy = prev.EverHealthy
	}
	if item.FirstReportedTime == nil && item.Applied {
		t := now
		item.FirstReportedTime = &t
	}
	if item.Health == workv1alpha1.ResourceHealthy {
		item.EverHealthy = true
	}
}
