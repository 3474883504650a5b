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

package applicationfailover

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

func TestDue(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	since := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(-d)} }
	for _, c := range []struct {
		name  string
		item  *workv1alpha1.AggregatedStatusItem
		due   bool
		after time.Duration
	}{
		{name: "no status"},
		{name: "healthy", item: &workv1alpha1.AggregatedStatusItem{Health: workv1alpha1.ResourceHealthy, ObservedGeneration: 3}},
		{name: "unknown health", item: &workv1alpha1.AggregatedStatusItem{Health: workv1alpha1.ResourceUnknown, UnhealthySince: since(time.Hour), ObservedGeneration: 3}},
		{name: "unhealthy, counting down", item: &workv1alpha1.AggregatedStatusItem{Health: workv1alpha1.ResourceUnhealthy, UnhealthySince: since(20 * time.Second), ObservedGeneration: 3},
			after: 10 * time.Second},
		{name: "unhealthy past the toleration", item: &workv1alpha1.AggregatedStatusItem{Health: workv1alpha1.ResourceUnhealthy, UnhealthySince: since(30 * time.Second), ObservedGeneration: 3},
			due: true},
		{name: "health of an older generation does not count", item: &workv1alpha1.AggregatedStatusItem{Health: workv1alpha1.ResourceUnhealthy, UnhealthySince: since(time.Hour), ObservedGeneration: 2}},
		// The countdown is read from the status, so a restarted hub
		// resumes it where it was.
		{name: "a restart resumes the countdown from the status", item: &workv1alpha1.AggregatedStatusItem{Health: workv1alpha1.ResourceUnhealthy, UnhealthySince: since(29 * time.Second), ObservedGeneration: 3},
			after: time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			due, after := Due(c.item, 3, 30, now)
			if due != c.due || after != c.after {
				t.Errorf("Due = %v after %s, want %v after %s", due, after, c.due, c.after)
			}
		})
	}
}
