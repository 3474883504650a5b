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
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

func TestCarryReportState(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	now := metav1.NewTime(t0.Add(time.Minute))
	for _, tc := range []struct {
		name      string
		item      workv1alpha1.AggregatedStatusItem
		prev      *workv1alpha1.AggregatedStatusItem
		wantFirst *metav1.Time
		wantEver  bool
	}{
		{name: "not applied yet: nothing reported", item: workv1alpha1.AggregatedStatusItem{Health: workv1alpha1.ResourceUnknown}},
		{name: "first report stamps now", item: workv1alpha1.AggregatedStatusItem{Applied: true, Health: workv1alpha1.ResourceUnhealthy}, wantFirst: &now},
		{name: "kept across updates", item: workv1alpha1.AggregatedStatusItem{Applied: true, Health: workv1alpha1.ResourceUnhealthy},
			prev: &workv1alpha1.AggregatedStatusItem{Applied: true, FirstReportedTime: &t0}, wantFirst: &t0},
		{name: "kept while the copy is re-applied", item: workv1alpha1.AggregatedStatusItem{Health: workv1alpha1.ResourceUnknown},
			prev: &workv1alpha1.AggregatedStatusItem{Applied: true, FirstReportedTime: &t0, EverHealthy: true}, wantFirst: &t0, wantEver: true},
		{name: "healthy once", item: workv1alpha1.AggregatedStatusItem{Applied: true, Health: workv1alpha1.ResourceHealthy}, wantFirst: &now, wantEver: true},
		{name: "healthy once stays after turning unhealthy", item: workv1alpha1.AggregatedStatusItem{Applied: true, Health: workv1alpha1.ResourceUnhealthy},
			prev: &workv1alpha1.AggregatedStatusItem{FirstReportedTime: &t0, EverHealthy: true}, wantFirst: &t0, wantEver: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			item := tc.item
			carryReportState(&item, tc.prev, now)
			if (item.FirstReportedTime == nil) != (tc.wantFirst == nil) || item.FirstReportedTime != nil && !item.FirstReportedTime.Equal(tc.wantFirst) {
				t.Errorf("firstReportedTime = %v, want %v", item.FirstReportedTime, tc.wantFirst)
			}
			if item.EverHealthy != tc.wantEver {
				t.Errorf("everHealthy = %v, want %v", item.EverHealthy, tc.wantEver)
			}
		})
	}
}
