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
	"slices"
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

func TestUnhealthyEverywhere(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	two := []workv1alpha1.TargetCluster{{Name: "a"}, {Name: "b"}}
	one := []workv1alpha1.TargetCluster{{Name: "a"}}
	item := func(c string, h workv1alpha1.ResourceHealth, gen int64) workv1alpha1.AggregatedStatusItem {
		return workv1alpha1.AggregatedStatusItem{ClusterName: c, Health: h, ObservedGeneration: gen}
	}
	history := func(c, reason string, ago time.Duration) []workv1alpha1.EvictionHistoryEntry {
		return []workv1alpha1.EvictionHistoryEntry{{ClusterName: c, Reason: reason, EvictedAt: metav1.NewTime(now.Add(-ago))}}
	}
	H, U, X := workv1alpha1.ResourceHealthy, workv1alpha1.ResourceUnhealthy, workv1alpha1.ResourceUnknown
	af, taint := workv1alpha1.EvictionReasonApplicationFailure, workv1alpha1.EvictionReasonTaintUntolerated
	for _, tc := range []struct {
		name   string
		spec   workv1alpha1.ResourceBindingSpec
		status []workv1alpha1.AggregatedStatusItem
		want   bool
	}{
		{"no placement", workv1alpha1.ResourceBindingSpec{}, nil, false},
		{"unhealthy on both", workv1alpha1.ResourceBindingSpec{Clusters: two}, []workv1alpha1.AggregatedStatusItem{item("a", U, 3), item("b", U, 3)}, true},
		{"healthy on one", workv1alpha1.ResourceBindingSpec{Clusters: two}, []workv1alpha1.AggregatedStatusItem{item("a", U, 3), item("b", H, 3)}, false},
		{"unknown on one", workv1alpha1.ResourceBindingSpec{Clusters: two}, []workv1alpha1.AggregatedStatusItem{item("a", U, 3), item("b", X, 3)}, false},
		{"one has not reported", workv1alpha1.ResourceBindingSpec{Clusters: two}, []workv1alpha1.AggregatedStatusItem{item("a", U, 3)}, false},
		{"one reported an older generation", workv1alpha1.ResourceBindingSpec{Clusters: two}, []workv1alpha1.AggregatedStatusItem{item("a", U, 3), item("b", U, 2)}, false},
		{"placed on one cluster: moved once (the cluster may be at fault)", workv1alpha1.ResourceBindingSpec{Clusters: one},
			[]workv1alpha1.AggregatedStatusItem{item("a", U, 3), item("z", H, 3)}, false},
		{"placed on one, already failed on another (open task)", workv1alpha1.ResourceBindingSpec{Clusters: one,
			GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{{FromCluster: "z", Reason: af}}},
			[]workv1alpha1.AggregatedStatusItem{item("a", U, 3)}, true},
		{"placed on one, already failed on another (recent history)", workv1alpha1.ResourceBindingSpec{Clusters: one, EvictionHistory: history("z", af, time.Minute)},
			[]workv1alpha1.AggregatedStatusItem{item("a", U, 3)}, true},
		{"placed on one, history too old", workv1alpha1.ResourceBindingSpec{Clusters: one, EvictionHistory: history("z", af, time.Hour)},
			[]workv1alpha1.AggregatedStatusItem{item("a", U, 3)}, false},
		{"placed on one, failing again where it failed before (it came back)", workv1alpha1.ResourceBindingSpec{Clusters: one, EvictionHistory: history("a", af, time.Minute)},
			[]workv1alpha1.AggregatedStatusItem{item("a", U, 3)}, true},
		{"placed on one, evicted elsewhere for a taint: not the application", workv1alpha1.ResourceBindingSpec{Clusters: one, EvictionHistory: history("z", taint, time.Minute)},
			[]workv1alpha1.AggregatedStatusItem{item("a", U, 3)}, false},
	} {
		if got := UnhealthyEverywhere(&tc.spec, tc.status, 3, now, 10*time.Minute); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestKeepOne(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	since := func(c string, d time.Duration) workv1alpha1.AggregatedStatusItem {
		return workv1alpha1.AggregatedStatusItem{ClusterName: c, Health: workv1alpha1.ResourceUnhealthy, UnhealthySince: &metav1.Time{Time: now.Add(-d)}}
	}
	targets := func(names ...string) []workv1alpha1.TargetCluster {
		var out []workv1alpha1.TargetCluster
		for _, n := range names {
			out = append(out, workv1alpha1.TargetCluster{Name: n})
		}
		return out
	}
	status := []workv1alpha1.AggregatedStatusItem{since("a", time.Hour), since("b", time.Minute), since("c", time.Minute)}
	for _, tc := range []struct {
		name     string
		evict    []string
		clusters []workv1alpha1.TargetCluster
		want     []string
	}{
		{"nothing to evict", nil, targets("a", "b"), nil},
		{"some stay anyway", []string{"a"}, targets("a", "b"), []string{"a"}},
		{"all due: the one unhealthy the shortest stays", []string{"a", "b"}, targets("a", "b"), []string{"a"}},
		{"ties by name", []string{"a", "b", "c"}, targets("a", "b", "c"), []string{"a", "c"}},
		{"a binding on one cluster may leave it (gracefully)", []string{"a"}, targets("a"), []string{"a"}},
	} {
		got := KeepOne(tc.evict, tc.clusters, status)
		if len(got) != len(tc.want) || len(got) > 0 && !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
