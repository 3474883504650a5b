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

package taintmanager

import (
	"testing"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

func TestSafePurgeMode(t *testing.T) {
	targets := []workv1alpha1.TargetCluster{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	item := func(cluster string, h workv1alpha1.ResourceHealth, gen int64) workv1alpha1.AggregatedStatusItem {
		return workv1alpha1.AggregatedStatusItem{ClusterName: cluster, Health: h, ObservedGeneration: gen}
	}
	const gen = 4
	H, U := workv1alpha1.ResourceHealthy, workv1alpha1.ResourceUnhealthy
	for _, tc := range []struct {
		name       string
		mode       policyv1alpha1.PurgeMode
		status     []workv1alpha1.AggregatedStatusItem
		evicting   []string
		want       policyv1alpha1.PurgeMode
		downgraded bool
	}{
		{name: "Gracefully stays", mode: policyv1alpha1.PurgeModeGracefully, want: policyv1alpha1.PurgeModeGracefully},
		{name: "unset is Gracefully", want: policyv1alpha1.PurgeModeGracefully},
		{name: "Directly with a healthy copy elsewhere", mode: policyv1alpha1.PurgeModeDirectly,
			status: []workv1alpha1.AggregatedStatusItem{item("a", U, gen), item("b", H, gen)}, evicting: []string{"a"}, want: policyv1alpha1.PurgeModeDirectly},
		{name: "Immediately (legacy) with a healthy copy elsewhere", mode: policyv1alpha1.PurgeModeImmediately,
			status: []workv1alpha1.AggregatedStatusItem{item("b", H, gen)}, evicting: []string{"a"}, want: policyv1alpha1.PurgeModeDirectly},
		{name: "Directly, nothing healthy elsewhere", mode: policyv1alpha1.PurgeModeDirectly,
			status: []workv1alpha1.AggregatedStatusItem{item("a", U, gen), item("b", U, gen)}, evicting: []string{"a"},
			want: policyv1alpha1.PurgeModeGracefully, downgraded: true},
		{name: "Directly, the only healthy copy is being evicted too", mode: policyv1alpha1.PurgeModeDirectly,
			status: []workv1alpha1.AggregatedStatusItem{item("a", H, gen), item("b", H, gen)}, evicting: []string{"a", "b"},
			want: policyv1alpha1.PurgeModeGracefully, downgraded: true},
		{name: "Directly, healthy elsewhere only for an older generation", mode: policyv1alpha1.PurgeModeDirectly,
			status: []workv1alpha1.AggregatedStatusItem{item("b", H, gen-1)}, evicting: []string{"a"},
			want: policyv1alpha1.PurgeModeGracefully, downgraded: true},
		{name: "Directly, no status at all", mode: policyv1alpha1.PurgeModeDirectly, evicting: []string{"a"},
			want: policyv1alpha1.PurgeModeGracefully, downgraded: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evicting := func(c string) bool {
				for _, e := range tc.evicting {
					if e == c {
						return true
					}
				}
				return false
			}
			got, downgraded := SafePurgeMode(tc.mode, targets, tc.status, gen, evicting)
			if got != tc.want || downgraded != tc.downgraded {
				t.Errorf("SafePurgeMode = %s, %v; want %s, %v", got, downgraded, tc.want, tc.downgraded)
			}
		})
	}
}
