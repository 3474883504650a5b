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
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/hub/clustertaint"
)

func fleet(notReady, total int) []*clusterv1alpha1.Cluster {
	var out []*clusterv1alpha1.Cluster
	for i := range total {
		status := metav1.ConditionTrue
		if i < notReady {
			status = metav1.ConditionUnknown
		}
		out = append(out, &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("m%d", i)},
			Status: clusterv1alpha1.ClusterStatus{Conditions: []metav1.Condition{{Type: clusterv1alpha1.ClusterConditionReady, Status: status}}}})
	}
	return out
}

// The eviction rate follows the fleet guard: the primary rate in a healthy
// fleet (one token at once), the secondary rate under a partial disruption
// with an empty bucket (no burst spent while the outage grows).
func TestEvictionRateFollowsTheFleetGuard(t *testing.T) {
	guard := clustertaint.NewFleetGuard(0.55, 2, 0.01)
	c := &Controller{opts: Options{Guard: guard}}
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	allowed := func(at time.Time) bool {
		r := c.reserve(at)
		ok := r.OK() && r.DelayFrom(at) == 0
		if !ok {
			r.CancelAt(at)
		}
		return ok
	}

	guard.Update(fleet(1, 10))
	if !allowed(now) {
		t.Fatal("normal fleet: the first eviction must pass at once")
	}
	if allowed(now) {
		t.Fatal("normal fleet: a second eviction in the same instant must wait")
	}
	if !allowed(now.Add(500 * time.Millisecond)) {
		t.Fatal("normal fleet at 2/s: half a second later one more passes")
	}

	guard.Update(fleet(6, 10))
	if allowed(now.Add(time.Second)) {
		t.Fatal("partial disruption: the bucket must start empty")
	}
	if allowed(now.Add(50 * time.Second)) {
		t.Fatal("partial disruption at 0.01/s: nothing within 50s")
	}
	if !allowed(now.Add(102 * time.Second)) {
		t.Fatal("partial disruption at 0.01/s: one after 100s")
	}
}
