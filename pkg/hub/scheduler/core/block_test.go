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

package core

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// blockPredecessorSeconds is a hard filter: unlike the eviction history's
// preference, it does not give way when nothing else fits.
func TestScheduleBlockPredecessor(t *testing.T) {
	deployment := workv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "nginx"}
	appFailure := func(cluster string, ago time.Duration) workv1alpha1.EvictionHistoryEntry {
		return workv1alpha1.EvictionHistoryEntry{ClusterName: cluster, Reason: workv1alpha1.EvictionReasonApplicationFailure,
			EvictedAt: metav1.NewTime(now.Add(-ago))}
	}
	failover := func(seconds *int32) *policyv1alpha1.FailoverBehavior {
		return &policyv1alpha1.FailoverBehavior{Application: &policyv1alpha1.ApplicationFailoverBehavior{BlockPredecessorSeconds: seconds}}
	}
	one := func(names ...string) *policyv1alpha1.Placement {
		return &policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: names}, ReplicaScheduling: duplicated}
	}
	for _, c := range []struct {
		name    string
		spec    workv1alpha1.ResourceBindingSpec
		want    []workv1alpha1.TargetCluster
		wantErr []string // substrings of the FitError
	}{
		{
			name: "without blockPredecessorSeconds the history is a preference: back to the only cluster",
			spec: workv1alpha1.ResourceBindingSpec{Replicas: 2, Placement: one("member1"),
				EvictionHistory: []workv1alpha1.EvictionHistoryEntry{appFailure("member1", time.Minute)}},
			want: targets("member1", 2),
		},
		{
			name: "blocked: not back to the only cluster; the message says until when",
			spec: workv1alpha1.ResourceBindingSpec{Replicas: 2, Placement: one("member1"), Failover: failover(ptr[int32](120)),
				EvictionHistory: []workv1alpha1.EvictionHistoryEntry{appFailure("member1", time.Minute)}},
			wantErr: []string{"0/2 clusters are available", "1 " + reasonBlocked, "member1 until 2026-11-23T12:01:00Z"},
		},
		{
			name: "blocked longer than the history TTL (10m here)",
			spec: workv1alpha1.ResourceBindingSpec{Replicas: 2, Placement: one("member1"), Failover: failover(ptr[int32](3600)),
				EvictionHistory: []workv1alpha1.EvictionHistoryEntry{appFailure("member1", 30*time.Minute)}},
			wantErr: []string{"member1 until 2026-11-23T12:30:00Z"},
		},
		{
			name: "the block ended: back to it",
			spec: workv1alpha1.ResourceBindingSpec{Replicas: 2, Placement: one("member1"), Failover: failover(ptr[int32](30)),
				EvictionHistory: []workv1alpha1.EvictionHistoryEntry{appFailure("member1", time.Minute)}},
			want: targets("member1", 2),
		},
		{
			name: "0 blocks forever",
			spec: workv1alpha1.ResourceBindingSpec{Replicas: 2, Placement: one("member1"), Failover: failover(ptr[int32](0)),
				EvictionHistory: []workv1alpha1.EvictionHistoryEntry{appFailure("member1", 1000*time.Hour)}},
			wantErr: []string{"member1 until its eviction history entry is removed"},
		},
		{
			name: "a taint eviction does not block",
			spec: workv1alpha1.ResourceBindingSpec{Replicas: 2, Placement: one("member1"), Failover: failover(ptr[int32](0)),
				EvictionHistory: []workv1alpha1.EvictionHistoryEntry{{ClusterName: "member1", Reason: workv1alpha1.EvictionReasonTaintUntolerated,
					EvictedAt: metav1.NewTime(now.Add(-time.Minute))}}},
			want: targets("member1", 2),
		},
		{
			name: "another cluster fits: placed there",
			spec: workv1alpha1.ResourceBindingSpec{Replicas: 2, Placement: one("member1", "member2"), Failover: failover(ptr[int32](0)),
				EvictionHistory: []workv1alpha1.EvictionHistoryEntry{appFailure("member1", time.Minute)}},
			want: targets("member2", 2),
		},
		{
			name: "a cluster still in the result keeps its replicas",
			spec: workv1alpha1.ResourceBindingSpec{Replicas: 2, Placement: one("member1", "member2"), Failover: failover(ptr[int32](0)),
				Clusters:        targets("member1", 2),
				EvictionHistory: []workv1alpha1.EvictionHistoryEntry{appFailure("member1", time.Hour)}},
			want: targets("member1", 2, "member2", 2),
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec := c.spec
			spec.Resource = deployment
			got, err := Schedule(Input{Key: "default/nginx-deployment", Spec: &spec, Clusters: clusters("member1", "member2"),
				Now: now, EvictionHistoryTTL: 10 * time.Minute})
			if c.wantErr != nil {
				var fit *FitError
				if !errors.As(err, &fit) {
					t.Fatalf("error = %v (result %v), want a FitError", err, got.Clusters)
				}
				for _, s := range c.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not say %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if !reflect.DeepEqual(got.Clusters, c.want) {
				t.Errorf("clusters = %v, want %v", got.Clusters, c.want)
			}
		})
	}
}
