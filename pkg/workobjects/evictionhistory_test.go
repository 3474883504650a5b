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

package workobjects

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

func blockSpec(seconds *int32, history ...workv1alpha1.EvictionHistoryEntry) *workv1alpha1.ResourceBindingSpec {
	return &workv1alpha1.ResourceBindingSpec{EvictionHistory: history,
		Failover: &policyv1alpha1.FailoverBehavior{Application: &policyv1alpha1.ApplicationFailoverBehavior{BlockPredecessorSeconds: seconds}}}
}

func TestPredecessorBlocks(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	entry := func(cluster, reason string, ago time.Duration) workv1alpha1.EvictionHistoryEntry {
		return workv1alpha1.EvictionHistoryEntry{ClusterName: cluster, Reason: reason, EvictedAt: metav1.NewTime(now.Add(-ago))}
	}
	app, taint := workv1alpha1.EvictionReasonApplicationFailure, workv1alpha1.EvictionReasonTaintUntolerated
	for _, c := range []struct {
		name string
		spec *workv1alpha1.ResourceBindingSpec
		want string
		next time.Duration // 0: none
	}{
		{name: "no blockPredecessorSeconds: no block", spec: blockSpec(nil, entry("m1", app, time.Second)), want: "[]"},
		{name: "no failover at all", spec: &workv1alpha1.ResourceBindingSpec{EvictionHistory: []workv1alpha1.EvictionHistoryEntry{entry("m1", app, 0)}}, want: "[]"},
		{name: "within the block", spec: blockSpec(ptr.To[int32](60), entry("m1", app, 20*time.Second)),
			want: "[m1 until 12:00:40]", next: 40 * time.Second},
		{name: "block over", spec: blockSpec(ptr.To[int32](60), entry("m1", app, 60*time.Second)), want: "[]"},
		{name: "0 blocks forever", spec: blockSpec(ptr.To[int32](0), entry("m1", app, 1000*time.Hour)), want: "[m1 forever]"},
		{name: "only application failures block", spec: blockSpec(ptr.To[int32](0), entry("m1", taint, time.Second), entry("m2", "Rescheduled", time.Second)), want: "[]"},
		{name: "the latest entry of a cluster wins, sorted by name", spec: blockSpec(ptr.To[int32](60),
			entry("m2", app, 50*time.Second), entry("m1", app, 30*time.Second), entry("m2", app, 10*time.Second)),
			want: "[m1 until 12:00:30 m2 until 12:00:50]", next: 30 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := "["
			for i, b := range PredecessorBlocks(c.spec, now) {
				if i > 0 {
					got += " "
				}
				if b.Forever() {
					got += b.Cluster + " forever"
				} else {
					got += b.Cluster + " until " + b.Until.Format("15:04:05")
				}
			}
			got += "]"
			if got != c.want {
				t.Errorf("blocks %s, want %s", got, c.want)
			}
			next, ok := NextUnblock(c.spec, now)
			if ok != (c.next > 0) || next != c.next {
				t.Errorf("NextUnblock = %s %v, want %s", next, ok, c.next)
			}
		})
	}
}

// The history is bounded, but a block outlives any number of later
// evictions: EvictCluster keeps the entry that still blocks its cluster.
func TestEvictionHistoryKeepsBlockingEntries(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name      string
		seconds   *int32
		keptFirst bool
	}{
		{name: "blockPredecessorSeconds 0 keeps it forever", seconds: ptr.To[int32](0), keptFirst: true},
		{name: "a block still running keeps it", seconds: ptr.To[int32](3600), keptFirst: true},
		{name: "a block that ended lets it go", seconds: ptr.To[int32](1)},
		{name: "no block: the newest MaxEvictionHistory only"},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec := blockSpec(c.seconds, workv1alpha1.EvictionHistoryEntry{ClusterName: "bad", Reason: workv1alpha1.EvictionReasonApplicationFailure,
				EvictedAt: metav1.NewTime(now.Add(-time.Minute))})
			// MaxEvictionHistory later evictions, from other clusters.
			for i := range MaxEvictionHistory {
				name := fmt.Sprintf("m%d", i)
				spec.Clusters = []workv1alpha1.TargetCluster{{Name: name, Replicas: 1}}
				EvictCluster(spec, workv1alpha1.GracefulEvictionTask{FromCluster: name, Reason: workv1alpha1.EvictionReasonTaintUntolerated},
					metav1.NewTime(now.Add(time.Duration(i)*time.Millisecond)))
			}
			wantLen := MaxEvictionHistory
			if c.keptFirst {
				wantLen++
			}
			if len(spec.EvictionHistory) != wantLen || c.keptFirst != (spec.EvictionHistory[0].ClusterName == "bad") {
				t.Fatalf("history %+v: want %d entries, blocking entry kept %v", spec.EvictionHistory, wantLen, c.keptFirst)
			}
			if spec.EvictionHistory[len(spec.EvictionHistory)-1].ClusterName != fmt.Sprintf("m%d", MaxEvictionHistory-1) {
				t.Errorf("newest entry lost: %+v", spec.EvictionHistory)
			}
		})
	}
}
