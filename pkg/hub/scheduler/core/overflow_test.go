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
	"fmt"
	"math/rand"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// room reports room for n more pods.
func room(n int) func(*clusterv1alpha1.Cluster) { return capacity(strconv.Itoa(n), "100") }

// overflowTerm is a clusterAffinities term preferring the clusters of
// preferred, overflowing to each further list in order.
func overflowTerm(name string, preferred []string, overflow ...[]string) policyv1alpha1.ClusterAffinityTerm {
	t := policyv1alpha1.ClusterAffinityTerm{AffinityName: name, ClusterAffinity: *names(preferred...)}
	for i, o := range overflow {
		t.OverflowAffinities = append(t.OverflowAffinities, policyv1alpha1.OverflowClusterAffinity{
			AffinityName: fmt.Sprintf("%s-overflow%d", name, i+1), ClusterAffinity: *names(o...)})
	}
	return t
}

func overflowPlacement(strategy *policyv1alpha1.ReplicaSchedulingStrategy, terms ...policyv1alpha1.ClusterAffinityTerm) *policyv1alpha1.Placement {
	return &policyv1alpha1.Placement{ClusterAffinities: terms, ReplicaScheduling: strategy}
}

// Karmada's example: on-prem member1 preferred, public-cloud member2 and
// member3 take what it has no room for.
func TestScheduleOverflow(t *testing.T) {
	onPrem := overflowTerm("on-prem", []string{"member1"}, []string{"member2", "member3"})
	deployment := workv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "nginx"}
	spec := func(replicas int32, p *policyv1alpha1.Placement, current ...any) *workv1alpha1.ResourceBindingSpec {
		return &workv1alpha1.ResourceBindingSpec{Resource: deployment, Replicas: replicas, Placement: p, Clusters: targets(current...)}
	}
	notReady := readyIs(metav1.ConditionFalse)
	for _, c := range []struct {
		name     string
		in       Input
		want     []workv1alpha1.TargetCluster
		wantErr  string
		affinity string
	}{
		{
			name: "the preferred group fits: the overflow group gets nothing",
			in: Input{Spec: spec(4, overflowPlacement(dynamic(), onPrem)),
				Clusters: []*clusterv1alpha1.Cluster{cluster("member1", room(10)), cluster("member2", room(50)), cluster("member3", room(50))}},
			want: targets("member1", 4), affinity: "on-prem",
		},
		{
			name: "the preferred group is full: the overflow group gets the rest, divided by room",
			in: Input{Spec: spec(6, overflowPlacement(dynamic(), onPrem)),
				Clusters: []*clusterv1alpha1.Cluster{cluster("member1", room(2)), cluster("member2", room(30)), cluster("member3", room(10))}},
			want: targets("member1", 2, "member2", 3, "member3", 1), affinity: "on-prem",
		},
		{
			name: "Aggregated: the preferred group full, the rest packed on the roomiest overflow cluster",
			in: Input{Spec: spec(8, overflowPlacement(aggregatedStrategy, onPrem)),
				Clusters: []*clusterv1alpha1.Cluster{cluster("member1", room(3)), cluster("member2", room(4)), cluster("member3", room(10))}},
			want: targets("member1", 3, "member3", 5), affinity: "on-prem",
		},
		{
			name: "the preferred cluster is not Ready (unavailable): the overflow group takes all",
			in: Input{Spec: spec(4, overflowPlacement(dynamic(), onPrem)),
				Clusters: []*clusterv1alpha1.Cluster{cluster("member1", room(10), notReady), cluster("member2", room(10)), cluster("member3", room(10))}},
			want: targets("member2", 2, "member3", 2), affinity: "on-prem",
		},
		{
			name: "failover: the preferred cluster is evicted, the overflow group takes its replicas, nothing else moves",
			in: Input{Spec: &workv1alpha1.ResourceBindingSpec{Resource: deployment, Replicas: 6, Placement: overflowPlacement(dynamic(), onPrem),
				Clusters:              targets("member2", 2),
				GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{failureTask("member1")}},
				Clusters: []*clusterv1alpha1.Cluster{cluster("member1", room(10), tainted(clusterv1alpha1.TaintClusterNotReady, corev1.TaintEffectNoExecute)),
					cluster("member2", room(10)), cluster("member3", room(10))}},
			want: targets("member2", 4, "member3", 2), affinity: "on-prem",
		},
		{
			name: "a preferred cluster that never reported has no known room: the overflow group takes all",
			in: Input{Spec: spec(4, overflowPlacement(dynamic(), onPrem)),
				Clusters: []*clusterv1alpha1.Cluster{cluster("member1"), cluster("member2", room(10)), cluster("member3", room(10))}},
			want: targets("member2", 2, "member3", 2), affinity: "on-prem",
		},
		{
			name: "no cluster ever reported: nothing fits, and the message says so",
			in: Input{Spec: spec(4, overflowPlacement(dynamic(), onPrem)),
				Clusters: []*clusterv1alpha1.Cluster{cluster("member1"), cluster("member2"), cluster("member3")}},
			wantErr: "3/3 clusters are available, but the selected clusters of every overflow group have room for 0 of 4 replicas.",
		},
		{
			name: "scale-up: what runs stays, the preferred group takes what it has room for, the overflow group the rest",
			in: Input{Spec: spec(8, overflowPlacement(dynamic(), onPrem), "member1", 3, "member2", 1),
				Clusters: []*clusterv1alpha1.Cluster{cluster("member1", room(2)), cluster("member2", room(10)), cluster("member3", room(10))}},
			want: targets("member1", 5, "member2", 2, "member3", 1), affinity: "on-prem",
		},
		{
			name: "room again, but no reschedule asked: what runs stays (the come-back is the failback's)",
			in: Input{Spec: spec(4, overflowPlacement(dynamic(), onPrem), "member1", 3, "member2", 1), ObservedAffinityName: "on-prem",
				Clusters: []*clusterv1alpha1.Cluster{cluster("member1", room(5)), cluster("member2", room(10)), cluster("member3", room(10))}},
			want: targets("member1", 3, "member2", 1), affinity: "on-prem",
		},
		{
			name: "come-back: a fresh schedule with room in the preferred group brings every replica back",
			in: Input{Fresh: true, Spec: spec(4, overflowPlacement(dynamic(), onPrem), "member1", 3, "member2", 1), ObservedAffinityName: "on-prem",
				Clusters: []*clusterv1alpha1.Cluster{cluster("member1", room(1)), cluster("member2", room(10)), cluster("member3", room(10))}},
			want: targets("member1", 4), affinity: "on-prem",
		},
		{
			name: "partial come-back: the preferred group has room for one more of two overflowed",
			in: Input{Fresh: true, Spec: spec(5, overflowPlacement(aggregatedStrategy, onPrem), "member1", 3, "member2", 2),
				Clusters: []*clusterv1alpha1.Cluster{cluster("member1", room(1)), cluster("member2", room(10)), cluster("member3", room(10))}},
			want: targets("member1", 4, "member2", 1), affinity: "on-prem",
		},
		{
			name: "scale-down: the overflow group gives up its replicas first",
			in: Input{Spec: spec(4, overflowPlacement(dynamic(), onPrem), "member1", 3, "member2", 2, "member3", 1),
				Clusters: []*clusterv1alpha1.Cluster{cluster("member1", room(0)), cluster("member2", room(10)), cluster("member3", room(10))}},
			want: targets("member1", 3, "member2", 1), affinity: "on-prem",
		},
		{
			name: "scale-down below the preferred group's share: the overflow group empties, then the preferred group shrinks",
			in: Input{Spec: spec(2, overflowPlacement(aggregatedStrategy, onPrem), "member1", 3, "member2", 2),
				Clusters: []*clusterv1alpha1.Cluster{cluster("member1", room(0)), cluster("member2", room(10)), cluster("member3", room(10))}},
			want: targets("member1", 2), affinity: "on-prem",
		},
		{
			name: "two overflow groups: the second is used only when the first is full too",
			in: Input{Spec: spec(10, overflowPlacement(dynamic(), overflowTerm("idc", []string{"member1"}, []string{"member2"}, []string{"member3"}))),
				Clusters: []*clusterv1alpha1.Cluster{cluster("member1", room(4)), cluster("member2", room(4)), cluster("member3", room(100))}},
			want: targets("member1", 4, "member2", 4, "member3", 2), affinity: "idc",
		},
		{
			name: "a cluster in the preferred group and an overflow group is preferred (first occurrence wins)",
			in: Input{Spec: spec(6, overflowPlacement(aggregatedStrategy, overflowTerm("idc", []string{"member1", "member2"}, []string{"member2", "member3"}))),
				Clusters: []*clusterv1alpha1.Cluster{cluster("member1", room(2)), cluster("member2", room(2)), cluster("member3", room(100))}},
			want: targets("member1", 2, "member2", 2, "member3", 2), affinity: "idc",
		},
		{
			name: "several terms: the first term with its overflow is full, the next term takes the workload",
			in: Input{Spec: spec(6, overflowPlacement(dynamic(), onPrem, overflowTerm("backup", []string{"member4"}))),
				Clusters: []*clusterv1alpha1.Cluster{cluster("member1", room(2)), cluster("member2", room(1)), cluster("member3", room(1)), cluster("member4", room(10))}},
			want: targets("member4", 6), affinity: "backup",
		},
		{
			name: "several terms: the first term fits with its overflow, the next term is not used",
			in: Input{Spec: spec(6, overflowPlacement(dynamic(), onPrem, overflowTerm("backup", []string{"member4"}))),
				Clusters: []*clusterv1alpha1.Cluster{cluster("member1", room(2)), cluster("member2", room(2)), cluster("member3", room(2)), cluster("member4", room(10))}},
			want: targets("member1", 2, "member2", 2, "member3", 2), affinity: "on-prem",
		},
		{
			name: "a cluster spread constraint (maxGroups 2) takes the preferred cluster, then the roomier overflow cluster",
			in: Input{Spec: spec(6, &policyv1alpha1.Placement{ClusterAffinities: []policyv1alpha1.ClusterAffinityTerm{onPrem}, ReplicaScheduling: dynamic(),
				SpreadConstraints: []policyv1alpha1.SpreadConstraint{{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MaxGroups: 2}}}),
				Clusters: []*clusterv1alpha1.Cluster{cluster("member1", room(2)), cluster("member2", room(3)), cluster("member3", room(10))}},
			want: targets("member1", 2, "member3", 4), affinity: "on-prem",
		},
		{
			name: "Duplicated (refused by the CRD) never overflows: the preferred group only",
			in: Input{Spec: spec(4, overflowPlacement(duplicated, onPrem)),
				Clusters: []*clusterv1alpha1.Cluster{cluster("member1", room(1)), cluster("member2", room(10)), cluster("member3", room(10))}},
			want: targets("member1", 4), affinity: "on-prem",
		},
		{
			name: "static weights (refused by the CRD) never overflow",
			in: Input{Spec: spec(4, overflowPlacement(weighted(map[string]int64{"member1": 1, "member2": 1}), onPrem)),
				Clusters: []*clusterv1alpha1.Cluster{cluster("member1", room(1)), cluster("member2", room(10)), cluster("member3", room(10))}},
			want: targets("member1", 4), affinity: "on-prem",
		},
		{
			name: "an object without replicas uses the preferred group only",
			in: Input{Spec: spec(0, overflowPlacement(aggregatedStrategy, onPrem)),
				Clusters: []*clusterv1alpha1.Cluster{cluster("member1", room(0)), cluster("member2", room(10)), cluster("member3", room(10))}},
			want: targets("member1", 0), affinity: "on-prem",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.in.Key, c.in.Now = "default/nginx-deployment", now
			got, err := Schedule(c.in)
			if c.wantErr != "" {
				if err == nil || err.Error() != c.wantErr {
					t.Fatalf("err = %v, want %q (result %v)", err, c.wantErr, got.Clusters)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Clusters, c.want) || got.AffinityName != c.affinity {
				t.Fatalf("got %v (term %q), want %v (term %q)", got.Clusters, got.AffinityName, c.want, c.affinity)
			}
		})
	}
}

// Invariants over seeded random fleets (replay: OVERFLOW_SEED=n): the
// overflow groups get replicas only when the groups before them are full
// (each group's clusters are given all their room before the next gets
// one), the replicas add up, no cluster is given more than its room, and
// a fresh schedule of the result (the come-back's) changes nothing.
func TestScheduleOverflowProperty(t *testing.T) {
	seed := time.Now().UnixNano()
	if s := os.Getenv("OVERFLOW_SEED"); s != "" {
		seed, _ = strconv.ParseInt(s, 10, 64)
	}
	t.Logf("seed %d (replay with OVERFLOW_SEED=%d)", seed, seed)
	r := rand.New(rand.NewSource(seed))
	for iter := 0; iter < 2000; iter++ {
		n := 2 + r.Intn(5)
		var fleet []*clusterv1alpha1.Cluster
		group := map[string]int{}
		var lists [3][]string
		for i := 0; i < n; i++ {
			name := fmt.Sprintf("m%d", i)
			g := r.Intn(3)
			group[name] = g
			lists[g] = append(lists[g], name)
			fleet = append(fleet, cluster(name, room(r.Intn(6))))
		}
		if len(lists[0]) == 0 {
			continue
		}
		strategy := dynamic()
		if r.Intn(2) == 0 {
			strategy = aggregatedStrategy
		}
		term := overflowTerm("t", lists[0], lists[1], lists[2])
		if len(lists[1]) == 0 {
			term = overflowTerm("t", lists[0], lists[2])
			for name, g := range group {
				if g == 2 {
					group[name] = 1
				}
			}
		}
		replicas := int32(1 + r.Intn(12))
		spec := &workv1alpha1.ResourceBindingSpec{Replicas: replicas, Placement: overflowPlacement(strategy, term)}
		res, err := Schedule(Input{Key: "k", Spec: spec, Clusters: fleet, Now: now})
		desc := fmt.Sprintf("iteration %d: %d replicas, %s, groups %v, fleet %s", iter, replicas, strategy.ReplicaDivisionPreference, group, describeRoom(fleet))
		var total int64
		roomOf := map[string]int64{}
		groupRoom := map[int]int64{}
		for _, c := range fleet {
			a, _ := availableReplicas(c, nil, nil)
			roomOf[c.Name] = a
			groupRoom[group[c.Name]] += a
			total += a
		}
		if total < int64(replicas) {
			if err == nil {
				t.Fatalf("%s: scheduled %v though the fleet has room for %d", desc, res.Clusters, total)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", desc, err)
		}
		var sum int32
		perGroup := map[int]int64{}
		for _, tc := range res.Clusters {
			sum += tc.Replicas
			perGroup[group[tc.Name]] += int64(tc.Replicas)
			if int64(tc.Replicas) > roomOf[tc.Name] {
				t.Fatalf("%s: %s got %d, it has room for %d", desc, tc.Name, tc.Replicas, roomOf[tc.Name])
			}
		}
		if sum != replicas {
			t.Fatalf("%s: replicas add up to %d: %v", desc, sum, res.Clusters)
		}
		for g := 1; g < 3; g++ {
			if perGroup[g] > 0 && perGroup[g-1] < groupRoom[g-1] {
				t.Fatalf("%s: group %d got %d while group %d used %d of its room %d: %v", desc, g, perGroup[g], g-1, perGroup[g-1], groupRoom[g-1], res.Clusters)
			}
		}
		// The come-back's fresh schedule of a settled result: the room the
		// result takes is allocated now.
		settled := make([]*clusterv1alpha1.Cluster, len(fleet))
		for i, c := range fleet {
			var placed int64
			for _, tc := range res.Clusters {
				if tc.Name == c.Name {
					placed = int64(tc.Replicas)
				}
			}
			settled[i] = cluster(c.Name, room(int(roomOf[c.Name]-placed)))
		}
		again, err := Schedule(Input{Key: "k", Spec: &workv1alpha1.ResourceBindingSpec{Replicas: replicas, Placement: spec.Placement, Clusters: res.Clusters},
			Clusters: settled, Now: now, Fresh: true})
		if err != nil {
			t.Fatalf("%s: fresh schedule of the settled result: %v", desc, err)
		}
		againGroup := map[int]int64{}
		for _, tc := range again.Clusters {
			againGroup[group[tc.Name]] += int64(tc.Replicas)
		}
		if !reflect.DeepEqual(againGroup, perGroup) {
			t.Fatalf("%s: a fresh schedule of the settled result %v moves replicas between groups: %v", desc, res.Clusters, again.Clusters)
		}
	}
}

func describeRoom(fleet []*clusterv1alpha1.Cluster) string {
	var parts []string
	for _, c := range fleet {
		a, _ := availableReplicas(c, nil, nil)
		parts = append(parts, fmt.Sprintf("%s:%d", c.Name, a))
	}
	return strings.Join(parts, " ")
}
