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
	"fmt"
	"math/rand"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

var now = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func cluster(name string, mods ...func(*clusterv1alpha1.Cluster)) *clusterv1alpha1.Cluster {
	c := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}}
	c.Status.Conditions = []metav1.Condition{{Type: clusterv1alpha1.ClusterConditionReady, Status: metav1.ConditionTrue}}
	for _, m := range mods {
		m(c)
	}
	return c
}

// readyIs sets the Ready condition's status; "" removes the condition (a
// cluster whose agent never reported).
func readyIs(status metav1.ConditionStatus) func(*clusterv1alpha1.Cluster) {
	return func(c *clusterv1alpha1.Cluster) {
		c.Status.Conditions = nil
		if status != "" {
			c.Status.Conditions = []metav1.Condition{{Type: clusterv1alpha1.ClusterConditionReady, Status: status}}
		}
	}
}

func tainted(key string, effect corev1.TaintEffect) func(*clusterv1alpha1.Cluster) {
	return func(c *clusterv1alpha1.Cluster) {
		c.Spec.Taints = append(c.Spec.Taints, corev1.Taint{Key: key, Effect: effect})
	}
}

func region(r string) func(*clusterv1alpha1.Cluster) {
	return func(c *clusterv1alpha1.Cluster) { c.Spec.Region = r }
}

func capacity(pods, cpu string) func(*clusterv1alpha1.Cluster) {
	return func(c *clusterv1alpha1.Cluster) {
		c.Status.ResourceSummary = &clusterv1alpha1.ResourceSummary{Allocatable: corev1.ResourceList{
			corev1.ResourcePods: resource.MustParse(pods), corev1.ResourceCPU: resource.MustParse(cpu)}}
	}
}

func names(ns ...string) *policyv1alpha1.ClusterAffinity {
	return &policyv1alpha1.ClusterAffinity{ClusterNames: ns}
}

func weighted(weights map[string]int64) *policyv1alpha1.ReplicaSchedulingStrategy {
	s := &policyv1alpha1.ReplicaSchedulingStrategy{
		ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
		ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
		WeightPreference:          &policyv1alpha1.ClusterPreferences{},
	}
	for n, w := range weights {
		s.WeightPreference.StaticWeightList = append(s.WeightPreference.StaticWeightList,
			policyv1alpha1.StaticClusterWeight{TargetCluster: *names(n), Weight: w})
	}
	return s
}

var duplicated = &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDuplicated}

func targets(pairs ...any) []workv1alpha1.TargetCluster {
	var out []workv1alpha1.TargetCluster
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, workv1alpha1.TargetCluster{Name: pairs[i].(string), Replicas: int32(pairs[i+1].(int))})
	}
	return out
}

func clusters(ns ...string) []*clusterv1alpha1.Cluster {
	var out []*clusterv1alpha1.Cluster
	for _, n := range ns {
		out = append(out, cluster(n))
	}
	return out
}

func TestSchedule(t *testing.T) {
	deployment := workv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "nginx"}
	seedWeights := weighted(map[string]int64{"member1": 1, "member2": 2})
	seed001 := &policyv1alpha1.Placement{
		ClusterAffinity:   names("member1", "member2", "member3", "member5"),
		SpreadConstraints: []policyv1alpha1.SpreadConstraint{{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MinGroups: 2, MaxGroups: 2}},
		ReplicaScheduling: duplicated,
	}
	for _, c := range []struct {
		name      string
		spec      workv1alpha1.ResourceBindingSpec
		clusters  []*clusterv1alpha1.Cluster
		want      []workv1alpha1.TargetCluster
		wantOneOf [][]workv1alpha1.TargetCluster
		wantErr   string
		affinity  string
	}{
		{
			name:     "seed 000: 3 replicas weighted 1:2",
			spec:     workv1alpha1.ResourceBindingSpec{Replicas: 3, Placement: &policyv1alpha1.Placement{ClusterAffinity: names("member1", "member2"), ReplicaScheduling: seedWeights}},
			clusters: clusters("member1", "member2", "member3"),
			want:     targets("member1", 1, "member2", 2),
		},
		{
			name: "seed 000: member1 evicted, member2 takes all 3",
			spec: workv1alpha1.ResourceBindingSpec{Replicas: 3, Clusters: targets("member2", 2),
				GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{{FromCluster: "member1"}},
				Placement:             &policyv1alpha1.Placement{ClusterAffinity: names("member1", "member2"), ReplicaScheduling: seedWeights}},
			clusters: []*clusterv1alpha1.Cluster{cluster("member1", tainted(clusterv1alpha1.TaintClusterUnreachable, corev1.TaintEffectNoExecute)), cluster("member2")},
			want:     targets("member2", 3),
		},
		{
			name:     "seed 000: member1 removed from the fleet",
			spec:     workv1alpha1.ResourceBindingSpec{Replicas: 3, Clusters: targets("member1", 1, "member2", 2), Placement: &policyv1alpha1.Placement{ClusterAffinity: names("member1", "member2"), ReplicaScheduling: seedWeights}},
			clusters: clusters("member2", "member3"),
			want:     targets("member2", 3),
		},
		{
			name:     "9 replicas weighted 1:2",
			spec:     workv1alpha1.ResourceBindingSpec{Replicas: 9, Placement: &policyv1alpha1.Placement{ReplicaScheduling: seedWeights}},
			clusters: clusters("member1", "member2"),
			want:     targets("member1", 3, "member2", 6),
		},
		{
			name:     "seed 001: duplicated, spread min=max=2, first schedule",
			spec:     workv1alpha1.ResourceBindingSpec{Replicas: 2, Placement: seed001},
			clusters: clusters("member1", "member2", "member3", "member4", "member5"),
			want:     targets("member1", 2, "member2", 2),
		},
		{
			name: "seed 001: member2 failed, member1 stays and member3 or member5 joins",
			spec: workv1alpha1.ResourceBindingSpec{Replicas: 2, Placement: seed001, Clusters: targets("member1", 2),
				GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{{FromCluster: "member2"}}},
			clusters: []*clusterv1alpha1.Cluster{cluster("member1"), cluster("member2", tainted(clusterv1alpha1.TaintClusterNotReady, corev1.TaintEffectNoExecute)),
				cluster("member3"), cluster("member4"), cluster("member5")},
			wantOneOf: [][]workv1alpha1.TargetCluster{targets("member1", 2, "member3", 2), targets("member1", 2, "member5", 2)},
		},
		{
			name:     "existing clusters win a spread constraint (locality)",
			spec:     workv1alpha1.ResourceBindingSpec{Replicas: 1, Placement: seed001, Clusters: targets("member3", 1, "member5", 1)},
			clusters: clusters("member1", "member2", "member3", "member5"),
			want:     targets("member3", 1, "member5", 1),
		},
		{
			name:     "spread minimum not met",
			spec:     workv1alpha1.ResourceBindingSpec{Replicas: 1, Placement: seed001},
			clusters: []*clusterv1alpha1.Cluster{cluster("member1"), cluster("member2", tainted("maintenance", corev1.TaintEffectNoSchedule))},
			wantErr:  "1/2 clusters are available (1 cluster(s) had untolerated taint {maintenance: }), but the spread constraint by cluster needs at least 2 clusters and 1 are available.",
		},
		{
			name: "no cluster fits: the scheduler log's reasons",
			spec: workv1alpha1.ResourceBindingSpec{Replicas: 3, Placement: &policyv1alpha1.Placement{ClusterAffinity: names("member1", "member2")}},
			clusters: []*clusterv1alpha1.Cluster{cluster("member1", tainted(clusterv1alpha1.TaintClusterNotReady, corev1.TaintEffectNoSchedule)),
				cluster("member2", tainted(clusterv1alpha1.TaintClusterUnreachable, corev1.TaintEffectNoExecute)), cluster("member3")},
			wantErr: "0/3 clusters are available: 1 cluster(s) did not match the placement cluster affinity constraint, " +
				"1 cluster(s) had untolerated taint {cluster.flotilla.io/not-ready: }, 1 cluster(s) had untolerated taint {cluster.flotilla.io/unreachable: }.",
		},
		{
			// The not-ready taint lands a moment after the cluster is
			// registered or its Ready leaves True; until then the scheduler
			// reads the condition itself.
			name: "a cluster that never reported, or whose Ready just left True, gets nothing before its taint lands",
			spec: workv1alpha1.ResourceBindingSpec{Replicas: 2, Placement: &policyv1alpha1.Placement{ReplicaScheduling: duplicated}},
			clusters: []*clusterv1alpha1.Cluster{cluster("member1"), cluster("member2", readyIs("")),
				cluster("member3", readyIs(metav1.ConditionUnknown)), cluster("member4", readyIs(metav1.ConditionFalse))},
			want: targets("member1", 2),
		},
		{
			name: "a placement that tolerates not-ready may use a cluster whose taint has not landed",
			spec: workv1alpha1.ResourceBindingSpec{Replicas: 2, Placement: &policyv1alpha1.Placement{ReplicaScheduling: duplicated,
				ClusterTolerations: []corev1.Toleration{{Key: clusterv1alpha1.TaintClusterNotReady, Operator: corev1.TolerationOpExists}}}},
			clusters: []*clusterv1alpha1.Cluster{cluster("member1"), cluster("member2", readyIs(metav1.ConditionFalse)), cluster("member3", readyIs(metav1.ConditionUnknown))},
			want:     targets("member1", 2, "member2", 2),
		},
		{
			name: "a toleration admits a tainted cluster",
			spec: workv1alpha1.ResourceBindingSpec{Replicas: 2, Placement: &policyv1alpha1.Placement{ReplicaScheduling: duplicated,
				ClusterTolerations: []corev1.Toleration{{Key: "maintenance", Operator: corev1.TolerationOpExists}}}},
			clusters: []*clusterv1alpha1.Cluster{cluster("member1", tainted("maintenance", corev1.TaintEffectNoSchedule)), cluster("member2", tainted("other", corev1.TaintEffectNoSchedule))},
			want:     targets("member1", 2),
		},
		{
			name: "a cluster already in the result keeps it despite a new taint",
			spec: workv1alpha1.ResourceBindingSpec{Replicas: 4, Clusters: targets("member1", 2, "member2", 2),
				Placement: &policyv1alpha1.Placement{ReplicaScheduling: weighted(nil)}},
			clusters: []*clusterv1alpha1.Cluster{cluster("member1", tainted(clusterv1alpha1.TaintClusterNotReady, corev1.TaintEffectNoSchedule)), cluster("member2")},
			want:     targets("member1", 2, "member2", 2),
		},
		{
			name: "recent eviction history is avoided, an old entry is not",
			spec: workv1alpha1.ResourceBindingSpec{Replicas: 2, Placement: &policyv1alpha1.Placement{ReplicaScheduling: duplicated},
				EvictionHistory: []workv1alpha1.EvictionHistoryEntry{
					{ClusterName: "member1", EvictedAt: metav1.NewTime(now.Add(-time.Minute))},
					{ClusterName: "member2", EvictedAt: metav1.NewTime(now.Add(-time.Hour))}}},
			clusters: clusters("member1", "member2"),
			want:     targets("member2", 2),
		},
		{
			name:     "deleting clusters are filtered",
			spec:     workv1alpha1.ResourceBindingSpec{Replicas: 2, Placement: &policyv1alpha1.Placement{ReplicaScheduling: duplicated}},
			clusters: []*clusterv1alpha1.Cluster{cluster("member1", func(c *clusterv1alpha1.Cluster) { c.DeletionTimestamp = &metav1.Time{Time: now} }), cluster("member2")},
			want:     targets("member2", 2),
		},
		{
			name: "a cluster that does not serve the kind is filtered",
			spec: workv1alpha1.ResourceBindingSpec{Replicas: 2, Placement: &policyv1alpha1.Placement{ReplicaScheduling: duplicated}},
			clusters: []*clusterv1alpha1.Cluster{
				cluster("member1", func(c *clusterv1alpha1.Cluster) {
					c.Status.APIEnablements = []clusterv1alpha1.APIEnablement{{GroupVersion: "v1", Resources: []clusterv1alpha1.APIResource{{Name: "pods", Kind: "Pod"}}}}
				}),
				cluster("member2", func(c *clusterv1alpha1.Cluster) {
					c.Status.APIEnablements = []clusterv1alpha1.APIEnablement{{GroupVersion: "apps/v1", Resources: []clusterv1alpha1.APIResource{{Name: "deployments", Kind: "Deployment"}}}}
				})},
			want: targets("member2", 2),
		},
		{
			name: "field selector and exclude",
			spec: workv1alpha1.ResourceBindingSpec{Replicas: 1, Placement: &policyv1alpha1.Placement{ReplicaScheduling: duplicated,
				ClusterAffinity: &policyv1alpha1.ClusterAffinity{ExcludeClusters: []string{"member3"}, FieldSelector: &policyv1alpha1.FieldSelector{
					MatchExpressions: []policyv1alpha1.FieldSelectorRequirement{{Key: "region", Operator: corev1.NodeSelectorOpIn, Values: []string{"eu"}}}}}}},
			clusters: []*clusterv1alpha1.Cluster{cluster("member1", region("eu")), cluster("member2", region("us")), cluster("member3", region("eu"))},
			want:     targets("member1", 1),
		},
		{
			name: "ordered cluster affinities fall back to the next group",
			spec: workv1alpha1.ResourceBindingSpec{Replicas: 2, Placement: &policyv1alpha1.Placement{ReplicaScheduling: duplicated,
				ClusterAffinities: []policyv1alpha1.ClusterAffinityTerm{
					{AffinityName: "primary", ClusterAffinity: *names("member1")},
					{AffinityName: "backup", ClusterAffinity: *names("member2")}}}},
			clusters: []*clusterv1alpha1.Cluster{cluster("member1", tainted(clusterv1alpha1.TaintClusterNotReady, corev1.TaintEffectNoSchedule)), cluster("member2")},
			want:     targets("member2", 2),
			affinity: "backup",
		},
		{
			name: "spread by region picks one cluster per region",
			spec: workv1alpha1.ResourceBindingSpec{Replicas: 1, Placement: &policyv1alpha1.Placement{ReplicaScheduling: duplicated,
				SpreadConstraints: []policyv1alpha1.SpreadConstraint{
					{SpreadByField: policyv1alpha1.SpreadByFieldRegion, MinGroups: 2, MaxGroups: 2},
					{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MaxGroups: 2}}}},
			clusters: []*clusterv1alpha1.Cluster{cluster("a1", region("a")), cluster("a2", region("a")), cluster("b1", region("b")), cluster("c1", region("c"))},
			want:     targets("a1", 1, "b1", 1),
		},
		{
			name:     "a non-workload gets 0 replicas everywhere, even Divided",
			spec:     workv1alpha1.ResourceBindingSpec{Placement: &policyv1alpha1.Placement{ReplicaScheduling: seedWeights}},
			clusters: clusters("member1", "member2"),
			want:     targets("member1", 0, "member2", 0),
		},
		{
			name:     "nil placement duplicates to every cluster",
			spec:     workv1alpha1.ResourceBindingSpec{Replicas: 2},
			clusters: clusters("member1", "member2"),
			want:     targets("member1", 2, "member2", 2),
		},
		{
			name:     "static weights naming no feasible cluster fall back to equal weights",
			spec:     workv1alpha1.ResourceBindingSpec{Replicas: 4, Placement: &policyv1alpha1.Placement{ReplicaScheduling: weighted(map[string]int64{"gone": 3})}},
			clusters: clusters("member1", "member2"),
			want:     targets("member1", 2, "member2", 2),
		},
		{
			name: "dynamic weights by available replicas",
			spec: workv1alpha1.ResourceBindingSpec{Replicas: 6,
				ReplicaRequirements: &workv1alpha1.ReplicaRequirements{ResourceRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}},
				Placement: &policyv1alpha1.Placement{ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
					ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided, ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
					WeightPreference: &policyv1alpha1.ClusterPreferences{DynamicWeight: policyv1alpha1.DynamicWeightByAvailableReplicas}}}},
			clusters: []*clusterv1alpha1.Cluster{cluster("member1", capacity("110", "2")), cluster("member2", capacity("110", "4"))},
			want:     targets("member1", 2, "member2", 4),
		},
		{
			name: "dynamic weights refuse when nothing fits",
			spec: workv1alpha1.ResourceBindingSpec{Replicas: 6,
				ReplicaRequirements: &workv1alpha1.ReplicaRequirements{ResourceRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}},
				Placement: &policyv1alpha1.Placement{ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
					ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided, ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
					WeightPreference: &policyv1alpha1.ClusterPreferences{DynamicWeight: policyv1alpha1.DynamicWeightByAvailableReplicas}}}},
			clusters: []*clusterv1alpha1.Cluster{cluster("member1", capacity("110", "2")), cluster("member2", capacity("110", "4"))},
			wantErr:  "2/2 clusters are available, but the selected clusters have room for 3 of 6 replicas.",
		},
		{
			name: "aggregated keeps the current cluster and packs",
			spec: workv1alpha1.ResourceBindingSpec{Replicas: 5, Clusters: targets("member2", 3),
				ReplicaRequirements: &workv1alpha1.ReplicaRequirements{ResourceRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
				Placement: &policyv1alpha1.Placement{ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
					ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided, ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceAggregated}}},
			clusters: []*clusterv1alpha1.Cluster{cluster("member1", capacity("110", "10")), cluster("member2", capacity("110", "1")), cluster("member3", capacity("110", "2"))},
			want:     targets("member1", 1, "member2", 4),
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec := c.spec
			spec.Resource = deployment
			got, err := Schedule(Input{Key: "default/nginx-deployment", Spec: &spec, Clusters: c.clusters, Now: now, EvictionHistoryTTL: 10 * time.Minute})
			if c.wantErr != "" {
				var fit *FitError
				if !errors.As(err, &fit) || err.Error() != c.wantErr {
					t.Fatalf("error = %v, want FitError %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if got.AffinityName != c.affinity {
				t.Errorf("affinity = %q, want %q", got.AffinityName, c.affinity)
			}
			want := c.wantOneOf
			if c.want != nil {
				want = append(want, c.want)
			}
			for _, w := range want {
				if reflect.DeepEqual(got.Clusters, w) {
					return
				}
			}
			t.Errorf("clusters = %v, want one of %v", got.Clusters, want)
		})
	}
}

// Seven replicas over weights 1:1:1: 3/2/2, the extra one placed stably for
// each workload and spread fairly over many.
func TestWebsterRemaindersFairAndStable(t *testing.T) {
	cs := clusters("member1", "member2", "member3")
	spec := func() *workv1alpha1.ResourceBindingSpec {
		return &workv1alpha1.ResourceBindingSpec{Replicas: 7, Placement: &policyv1alpha1.Placement{
			ReplicaScheduling: weighted(map[string]int64{"member1": 1, "member2": 1, "member3": 1})}}
	}
	extra := map[string]int{}
	const workloads = 300
	for i := range workloads {
		key := fmt.Sprintf("ns/app-%d", i)
		first, err := Schedule(Input{Key: key, Spec: spec(), Clusters: cs})
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			again, _ := Schedule(Input{Key: key, Spec: spec(), Clusters: cs})
			if !reflect.DeepEqual(first, again) {
				t.Fatalf("%s: %v then %v", key, first.Clusters, again.Clusters)
			}
		}
		for _, tc := range first.Clusters {
			switch tc.Replicas {
			case 3:
				extra[tc.Name]++
			case 2:
			default:
				t.Fatalf("%s: %v is not 3/2/2", key, first.Clusters)
			}
		}
	}
	for _, c := range cs {
		if extra[c.Name] < workloads/5 {
			t.Errorf("the extra replica went to %s only %d times of %d: %v", c.Name, extra[c.Name], workloads, extra)
		}
	}
}

func TestWebster(t *testing.T) {
	for _, c := range []struct {
		total   int32
		weights []int64
		want    []int32
	}{
		{3, []int64{1, 2}, []int32{1, 2}},
		{10, []int64{1, 1, 1, 0}, []int32{4, 3, 3, 0}},
		// Rounded quotas 4/2/1/1 exceed 7: the seat with the lowest
		// quotient (50/7) is taken back.
		{7, []int64{50, 30, 12, 8}, []int32{3, 2, 1, 1}},
		{8, []int64{53, 24, 23}, []int32{4, 2, 2}},
		{0, []int64{1, 2}, []int32{0, 0}},
		{4, []int64{0, 0}, []int32{0, 0}},
		{2147483647, []int64{9223372036854775807, 1}, []int32{2147483647, 0}},
	} {
		got := Webster(c.total, c.weights, make([]uint64, len(c.weights)))
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("Webster(%d, %v) = %v, want %v", c.total, c.weights, got, c.want)
		}
	}
}

// FuzzDivided: a Divided result always sums to the desired replicas and
// never targets a filtered cluster.
func FuzzDivided(f *testing.F) {
	f.Add(int32(3), uint64(0x12), uint8(2), uint8(0))
	f.Add(int32(7), uint64(0x111), uint8(3), uint8(1))
	f.Add(int32(1000), uint64(0xdeadbeef), uint8(20), uint8(0x35))
	f.Add(int32(2147483647), uint64(1<<63), uint8(5), uint8(2))
	f.Fuzz(func(t *testing.T, replicas int32, weightBits uint64, n uint8, filteredBits uint8) {
		if replicas < 1 {
			replicas = 1
		}
		n = n%24 + 1
		var cs []*clusterv1alpha1.Cluster
		weights := map[string]int64{}
		filtered := map[string]bool{}
		for i := range int(n) {
			name := fmt.Sprintf("member%d", i)
			c := cluster(name)
			if filteredBits&(1<<(i%8)) != 0 && i < 8 {
				c.Spec.Taints = []corev1.Taint{{Key: clusterv1alpha1.TaintClusterUnreachable, Effect: corev1.TaintEffectNoExecute}}
				filtered[name] = true
			}
			weights[name] = int64((weightBits >> (uint(i) * 2 % 64)) & 7)
			cs = append(cs, c)
		}
		spec := &workv1alpha1.ResourceBindingSpec{Replicas: replicas, Placement: &policyv1alpha1.Placement{ReplicaScheduling: weighted(weights)}}
		got, err := Schedule(Input{Key: "k", Spec: spec, Clusters: cs})
		if len(filtered) == int(n) {
			if err == nil {
				t.Fatalf("every cluster filtered, yet scheduled to %v", got.Clusters)
			}
			return
		}
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		var sum int64
		for _, tc := range got.Clusters {
			if filtered[tc.Name] {
				t.Fatalf("targets filtered cluster %s: %v", tc.Name, got.Clusters)
			}
			if tc.Replicas <= 0 {
				t.Fatalf("a Divided target with %d replicas: %v", tc.Replicas, got.Clusters)
			}
			sum += int64(tc.Replicas)
		}
		if sum != int64(replicas) {
			t.Fatalf("sum %d != %d: %v", sum, replicas, got.Clusters)
		}
	})
}

func dynamic() *policyv1alpha1.ReplicaSchedulingStrategy {
	return &policyv1alpha1.ReplicaSchedulingStrategy{
		ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided, ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
		WeightPreference: &policyv1alpha1.ClusterPreferences{DynamicWeight: policyv1alpha1.DynamicWeightByAvailableReplicas}}
}

var aggregatedStrategy = &policyv1alpha1.ReplicaSchedulingStrategy{
	ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided, ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceAggregated}

// full reports room for no more pods: all 110 allocated.
func full(c *clusterv1alpha1.Cluster) {
	capacity("110", "100")(c)
	c.Status.ResourceSummary.Allocated = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110")}
}

func failureTask(cluster string) workv1alpha1.GracefulEvictionTask {
	return workv1alpha1.GracefulEvictionTask{FromCluster: cluster, Reason: workv1alpha1.EvictionReasonTaintUntolerated,
		Producer: workv1alpha1.EvictionProducerTaintManager}
}

func recentlyEvicted(cluster string) workv1alpha1.EvictionHistoryEntry {
	return workv1alpha1.EvictionHistoryEntry{ClusterName: cluster, EvictedAt: metav1.NewTime(now.Add(-time.Minute))}
}

// The rules of issue 17 for the scheduler, one case each.
func TestScheduleKeepsWhatRuns(t *testing.T) {
	noExecute := tainted(clusterv1alpha1.TaintClusterUnreachable, corev1.TaintEffectNoExecute)
	w111 := weighted(map[string]int64{"member1": 1, "member2": 1, "member3": 1})
	affinities := func(terms ...string) []policyv1alpha1.ClusterAffinityTerm {
		var out []policyv1alpha1.ClusterAffinityTerm
		for i := 0; i < len(terms); i += 2 {
			out = append(out, policyv1alpha1.ClusterAffinityTerm{AffinityName: terms[i], ClusterAffinity: *names(terms[i+1])})
		}
		return out
	}
	for _, c := range []struct {
		name     string
		in       Input
		want     []workv1alpha1.TargetCluster
		wantErr  string
		affinity string
	}{
		{
			name: "dynamic failover: full member2 keeps its 3, roomy member3 takes the missing 3 (the issue's case)",
			in: Input{Spec: &workv1alpha1.ResourceBindingSpec{Replicas: 6, Clusters: targets("member2", 3),
				GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{failureTask("member1")},
				Placement:             &policyv1alpha1.Placement{ReplicaScheduling: dynamic()}},
				Clusters: []*clusterv1alpha1.Cluster{cluster("member1", noExecute, capacity("110", "100")), cluster("member2", full), cluster("member3", capacity("100", "100"))}},
			want: targets("member2", 3, "member3", 3),
		},
		{
			name: "dynamic: the missing replicas do not fit: a FitError, nobody shrinks",
			in: Input{Spec: &workv1alpha1.ResourceBindingSpec{Replicas: 6, Clusters: targets("member2", 3),
				Placement: &policyv1alpha1.Placement{ReplicaScheduling: dynamic()}},
				Clusters: []*clusterv1alpha1.Cluster{cluster("member2", full), cluster("member3", capacity("2", "100"))}},
			wantErr: "2/2 clusters are available, but the selected clusters have room for 2 of the 3 missing replicas.",
		},
		{
			name: "dynamic: a cluster without a resource summary gets none of the missing replicas",
			in: Input{Spec: &workv1alpha1.ResourceBindingSpec{Replicas: 6, Clusters: targets("member2", 3),
				Placement: &policyv1alpha1.Placement{ReplicaScheduling: dynamic()}},
				Clusters: []*clusterv1alpha1.Cluster{cluster("member1"), cluster("member2", capacity("10", "100")), cluster("member3", capacity("20", "100"))}},
			want: targets("member2", 4, "member3", 2),
		},
		{
			name: "static 1:1:1 failover: survivors keep 2 and get 1 more",
			in: Input{Spec: &workv1alpha1.ResourceBindingSpec{Replicas: 6, Clusters: targets("member2", 2, "member3", 2),
				GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{failureTask("member1")},
				Placement:             &policyv1alpha1.Placement{ReplicaScheduling: w111}},
				Clusters: []*clusterv1alpha1.Cluster{cluster("member1", noExecute), cluster("member2"), cluster("member3")}},
			want: targets("member2", 3, "member3", 3),
		},
		{
			name: "static 1:1:1 scale-up after a failover: the survivors keep 3 each, the returned cluster gets the new one",
			in: Input{Spec: &workv1alpha1.ResourceBindingSpec{Replicas: 7, Clusters: targets("member2", 3, "member3", 3),
				Placement: &policyv1alpha1.Placement{ReplicaScheduling: w111}},
				Clusters: clusters("member1", "member2", "member3")},
			want: targets("member1", 1, "member2", 3, "member3", 3),
		},
		{
			name: "static: a cluster added to the placement does not take replicas from the others",
			in: Input{Spec: &workv1alpha1.ResourceBindingSpec{Replicas: 6, Clusters: targets("member1", 3, "member2", 3),
				Placement: &policyv1alpha1.Placement{ReplicaScheduling: w111}},
				Clusters: clusters("member1", "member2", "member3")},
			want: targets("member1", 3, "member2", 3),
		},
		{
			name: "static: a reschedule a person asked for divides afresh",
			in: Input{Fresh: true, Spec: &workv1alpha1.ResourceBindingSpec{Replicas: 6, Clusters: targets("member1", 3, "member2", 3),
				Placement: &policyv1alpha1.Placement{ReplicaScheduling: w111}},
				Clusters: clusters("member1", "member2", "member3")},
			want: targets("member1", 2, "member2", 2, "member3", 2),
		},
		{
			name: "static: new weights alone do not move what runs",
			in: Input{Spec: &workv1alpha1.ResourceBindingSpec{Replicas: 3, Clusters: targets("member1", 1, "member2", 2),
				Placement: &policyv1alpha1.Placement{ReplicaScheduling: weighted(map[string]int64{"member1": 2, "member2": 1})}},
				Clusters: clusters("member1", "member2")},
			want: targets("member1", 1, "member2", 2),
		},
		{
			name: "static: a changed replica scheduling rebalances",
			in: Input{Rebalance: true, Spec: &workv1alpha1.ResourceBindingSpec{Replicas: 3, Clusters: targets("member1", 1, "member2", 2),
				Placement: &policyv1alpha1.Placement{ReplicaScheduling: weighted(map[string]int64{"member1": 2, "member2": 1})}},
				Clusters: clusters("member1", "member2")},
			want: targets("member1", 2, "member2", 1),
		},
		{
			name: "clusterAffinities: a rebalance keeps the observed term",
			in: Input{Rebalance: true, ObservedAffinityName: "backup", Spec: &workv1alpha1.ResourceBindingSpec{Replicas: 2, Clusters: targets("member2", 2),
				Placement: &policyv1alpha1.Placement{ReplicaScheduling: duplicated, ClusterAffinities: affinities("primary", "member1", "backup", "member2")}},
				Clusters: clusters("member1", "member2")},
			want: targets("member2", 2), affinity: "backup",
		},
		{
			name: "static scale-down takes from where the result exceeds the weighted ideal",
			in: Input{Spec: &workv1alpha1.ResourceBindingSpec{Replicas: 4, Clusters: targets("member1", 5, "member2", 1),
				Placement: &policyv1alpha1.Placement{ReplicaScheduling: weighted(map[string]int64{"member1": 1, "member2": 1})}},
				Clusters: clusters("member1", "member2")},
			want: targets("member1", 3, "member2", 1),
		},
		{
			name: "static scale-down from the ideal is the ideal",
			in: Input{Spec: &workv1alpha1.ResourceBindingSpec{Replicas: 3, Clusters: targets("member1", 2, "member2", 4),
				Placement: &policyv1alpha1.Placement{ReplicaScheduling: weighted(map[string]int64{"member1": 1, "member2": 2})}},
				Clusters: clusters("member1", "member2")},
			want: targets("member1", 1, "member2", 2),
		},
		{
			name: "dynamic scale-down in proportion to what runs",
			in: Input{Spec: &workv1alpha1.ResourceBindingSpec{Replicas: 3, Clusters: targets("member1", 4, "member2", 2),
				Placement: &policyv1alpha1.Placement{ReplicaScheduling: dynamic()}},
				Clusters: []*clusterv1alpha1.Cluster{cluster("member1", capacity("110", "100")), cluster("member2", capacity("110", "100"))}},
			want: targets("member1", 2, "member2", 1),
		},
		{
			name: "aggregated failover packs the missing onto the cluster running it, then the roomiest",
			in: Input{Spec: &workv1alpha1.ResourceBindingSpec{Replicas: 6, Clusters: targets("member2", 2),
				Placement: &policyv1alpha1.Placement{ReplicaScheduling: aggregatedStrategy}},
				Clusters: []*clusterv1alpha1.Cluster{cluster("member1", capacity("3", "100")), cluster("member2", capacity("1", "100")), cluster("member3", capacity("10", "100"))}},
			want: targets("member2", 3, "member3", 3),
		},
		{
			name: "aggregated: unknown capacity is no room (not infinite)",
			in: Input{Spec: &workv1alpha1.ResourceBindingSpec{Replicas: 4,
				Placement: &policyv1alpha1.Placement{ReplicaScheduling: aggregatedStrategy}},
				Clusters: []*clusterv1alpha1.Cluster{cluster("member1"), cluster("member2", capacity("3", "100"))}},
			wantErr: "2/2 clusters are available, but the selected clusters have room for 3 of 4 replicas.",
		},
		{
			name: "aggregated scale-down keeps the largest",
			in: Input{Spec: &workv1alpha1.ResourceBindingSpec{Replicas: 4, Clusters: targets("member1", 1, "member2", 4),
				Placement: &policyv1alpha1.Placement{ReplicaScheduling: aggregatedStrategy}},
				Clusters: clusters("member1", "member2")},
			want: targets("member2", 4),
		},
		{
			name: "clusterAffinities resume from the observed term even when the primary fits again",
			in: Input{ObservedAffinityName: "backup", Spec: &workv1alpha1.ResourceBindingSpec{Replicas: 2, Clusters: targets("member2", 2),
				Placement: &policyv1alpha1.Placement{ReplicaScheduling: duplicated, ClusterAffinities: affinities("primary", "member1", "backup", "member2")}},
				Clusters: clusters("member1", "member2")},
			want: targets("member2", 2), affinity: "backup",
		},
		{
			name: "clusterAffinities: a reschedule asked for starts from the first term",
			in: Input{Fresh: true, ObservedAffinityName: "backup", Spec: &workv1alpha1.ResourceBindingSpec{Replicas: 2, Clusters: targets("member2", 2),
				Placement: &policyv1alpha1.Placement{ReplicaScheduling: duplicated, ClusterAffinities: affinities("primary", "member1", "backup", "member2")}},
				Clusters: clusters("member1", "member2")},
			want: targets("member1", 2), affinity: "primary",
		},
		{
			name: "clusterAffinities: later terms before earlier ones",
			in: Input{ObservedAffinityName: "second", Spec: &workv1alpha1.ResourceBindingSpec{Replicas: 1, Clusters: targets("member2", 1),
				Placement: &policyv1alpha1.Placement{ReplicaScheduling: duplicated, ClusterAffinities: affinities("first", "member1", "second", "member2", "third", "member3")}},
				Clusters: []*clusterv1alpha1.Cluster{cluster("member1"), cluster("member2", func(c *clusterv1alpha1.Cluster) { c.DeletionTimestamp = &metav1.Time{Time: now} }), cluster("member3")}},
			want: targets("member3", 1), affinity: "third",
		},
		{
			name: "clusterAffinities: earlier terms only when no later one fits (else it runs nowhere)",
			in: Input{ObservedAffinityName: "backup", Spec: &workv1alpha1.ResourceBindingSpec{Replicas: 2, Clusters: targets("member2", 2),
				GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{failureTask("member2")},
				Placement:             &policyv1alpha1.Placement{ReplicaScheduling: duplicated, ClusterAffinities: affinities("primary", "member1", "backup", "member2")}},
				Clusters: []*clusterv1alpha1.Cluster{cluster("member1"), cluster("member2", func(c *clusterv1alpha1.Cluster) { c.DeletionTimestamp = &metav1.Time{Time: now} })}},
			want: targets("member1", 2), affinity: "primary",
		},
		{
			name: "eviction history is a preference: the only healthy cluster is taken back",
			in: Input{Spec: &workv1alpha1.ResourceBindingSpec{Replicas: 2, EvictionHistory: []workv1alpha1.EvictionHistoryEntry{recentlyEvicted("member1")},
				Placement: &policyv1alpha1.Placement{ReplicaScheduling: duplicated, ClusterAffinity: names("member1")}},
				Clusters: clusters("member1", "member2")},
			want: targets("member1", 2),
		},
		{
			name: "eviction history: taken back only if it passes the taint filters",
			in: Input{Spec: &workv1alpha1.ResourceBindingSpec{Replicas: 2, EvictionHistory: []workv1alpha1.EvictionHistoryEntry{recentlyEvicted("member1")},
				Placement: &policyv1alpha1.Placement{ReplicaScheduling: duplicated, ClusterAffinity: names("member1")}},
				Clusters: []*clusterv1alpha1.Cluster{cluster("member1", noExecute)}},
			wantErr: "0/1 clusters are available: 1 cluster(s) had untolerated taint {cluster.flotilla.io/unreachable: }.",
		},
		{
			name: "eviction history: a spread minimum is met with a recently evicted cluster rather than not at all",
			in: Input{Spec: &workv1alpha1.ResourceBindingSpec{Replicas: 1, Clusters: targets("member2", 1),
				EvictionHistory: []workv1alpha1.EvictionHistoryEntry{recentlyEvicted("member1")},
				Placement: &policyv1alpha1.Placement{ReplicaScheduling: duplicated,
					SpreadConstraints: []policyv1alpha1.SpreadConstraint{{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MinGroups: 2, MaxGroups: 2}}}},
				Clusters: clusters("member1", "member2")},
			want: targets("member1", 1, "member2", 1),
		},
		{
			name: "eviction history: avoided while another term fits",
			in: Input{Spec: &workv1alpha1.ResourceBindingSpec{Replicas: 2, EvictionHistory: []workv1alpha1.EvictionHistoryEntry{recentlyEvicted("member1")},
				Placement: &policyv1alpha1.Placement{ReplicaScheduling: duplicated, ClusterAffinities: affinities("primary", "member1", "backup", "member2")}},
				Clusters: clusters("member1", "member2")},
			want: targets("member2", 2), affinity: "backup",
		},
		{
			name: "a cluster the scheduler took out is placed again while its task is open",
			in: Input{Spec: &workv1alpha1.ResourceBindingSpec{Replicas: 2, Clusters: targets("member2", 2),
				GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{{FromCluster: "member1", Reason: workv1alpha1.EvictionReasonRescheduled,
					Producer: workv1alpha1.EvictionProducerScheduler}},
				Placement: &policyv1alpha1.Placement{ReplicaScheduling: duplicated, ClusterAffinity: names("member1", "member2")}},
				Clusters: clusters("member1", "member2")},
			want: targets("member1", 2, "member2", 2),
		},
		{
			name: "a cluster the scheduler took out does not displace a current one",
			in: Input{Spec: &workv1alpha1.ResourceBindingSpec{Replicas: 1, Clusters: targets("member2", 1),
				GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{{FromCluster: "member1", Reason: workv1alpha1.EvictionReasonRescheduled,
					Producer: workv1alpha1.EvictionProducerScheduler}},
				Placement: &policyv1alpha1.Placement{ReplicaScheduling: duplicated,
					SpreadConstraints: []policyv1alpha1.SpreadConstraint{{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MaxGroups: 1}}}},
				Clusters: clusters("member1", "member2")},
			want: targets("member2", 1),
		},
		{
			name: "a cluster the scheduler took out is preferred over a new one",
			in: Input{Spec: &workv1alpha1.ResourceBindingSpec{Replicas: 1, Clusters: targets("member3", 1),
				GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{{FromCluster: "member2", Reason: workv1alpha1.EvictionReasonRescheduled,
					Producer: workv1alpha1.EvictionProducerScheduler}},
				Placement: &policyv1alpha1.Placement{ReplicaScheduling: duplicated,
					SpreadConstraints: []policyv1alpha1.SpreadConstraint{{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MinGroups: 2, MaxGroups: 2}}}},
				Clusters: clusters("member1", "member2", "member3")},
			want: targets("member2", 1, "member3", 1),
		},
		{
			name: "divided: a placement changed back while the scheduler's task is open restores the old division",
			in: Input{RestoreRemoved: true, Spec: &workv1alpha1.ResourceBindingSpec{Replicas: 4, Clusters: targets("member2", 4),
				GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{{FromCluster: "member1", Reason: workv1alpha1.EvictionReasonRescheduled,
					Producer: workv1alpha1.EvictionProducerScheduler, Replicas: ptr(int32(2))}},
				Placement: &policyv1alpha1.Placement{ClusterAffinity: names("member1", "member2"),
					ReplicaScheduling: weighted(map[string]int64{"member1": 1, "member2": 1})}},
				Clusters: clusters("member1", "member2")},
			want: targets("member1", 2, "member2", 2),
		},
		{
			name: "divided: on other triggers a removed cluster's open task moves nothing back",
			in: Input{Spec: &workv1alpha1.ResourceBindingSpec{Replicas: 4, Clusters: targets("member2", 4),
				GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{{FromCluster: "member1", Reason: workv1alpha1.EvictionReasonRescheduled,
					Producer: workv1alpha1.EvictionProducerScheduler, Replicas: ptr(int32(2))}},
				Placement: &policyv1alpha1.Placement{ClusterAffinity: names("member1", "member2"),
					ReplicaScheduling: weighted(map[string]int64{"member1": 1, "member2": 1})}},
				Clusters: clusters("member1", "member2")},
			want: targets("member2", 4),
		},
		{
			name: "a cluster with a failure's task stays out",
			in: Input{Spec: &workv1alpha1.ResourceBindingSpec{Replicas: 2, Clusters: targets("member2", 2),
				GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{failureTask("member1")},
				Placement:             &policyv1alpha1.Placement{ReplicaScheduling: duplicated, ClusterAffinity: names("member1", "member2")}},
				Clusters: clusters("member1", "member2")},
			want: targets("member2", 2),
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := c.in
			in.Key, in.Now, in.EvictionHistoryTTL = "default/nginx-deployment", now, 10*time.Minute
			in.Spec.Resource = workv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "nginx"}
			got, err := Schedule(in)
			if c.wantErr != "" {
				var fit *FitError
				if !errors.As(err, &fit) || err.Error() != c.wantErr {
					t.Fatalf("error = %v, want FitError %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if !reflect.DeepEqual(got.Clusters, c.want) || got.AffinityName != c.affinity {
				t.Errorf("got %v (term %q), want %v (term %q)", got.Clusters, got.AffinityName, c.want, c.affinity)
			}
		})
	}
}

// Property: for random fleets, weights, strategies and current placements,
// a schedule that wants at least what the kept clusters run never lowers a
// kept feasible cluster nor drops it, and one that wants less never raises
// any; the sum is always the desired count.
func TestScheduleMonotoneProperty(t *testing.T) {
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewSource(seed))
	for iter := range 3000 {
		n := 1 + rng.Intn(8)
		var fleet []*clusterv1alpha1.Cluster
		weights := map[string]int64{}
		current := map[string]int32{}
		var spec workv1alpha1.ResourceBindingSpec
		var keptSum int32
		for i := range n {
			name := fmt.Sprintf("member%d", i)
			c := cluster(name, capacity(fmt.Sprint(rng.Intn(300)), "1000"))
			infeasible := rng.Intn(5) == 0
			if infeasible {
				c.DeletionTimestamp = &metav1.Time{Time: now}
			}
			if rng.Intn(4) == 0 {
				c.Spec.Taints = []corev1.Taint{{Key: clusterv1alpha1.TaintClusterUnreachable, Effect: corev1.TaintEffectNoExecute}}
			}
			fleet = append(fleet, c)
			weights[name] = int64(rng.Intn(5))
			if rng.Intn(2) == 0 {
				r := int32(1 + rng.Intn(20))
				spec.Clusters = append(spec.Clusters, workv1alpha1.TargetCluster{Name: name, Replicas: r})
				if !infeasible {
					current[name] = r
					keptSum += r
				}
			}
		}
		var strategy *policyv1alpha1.ReplicaSchedulingStrategy
		switch rng.Intn(3) {
		case 0:
			strategy = weighted(weights)
		case 1:
			strategy = dynamic()
		default:
			strategy = aggregatedStrategy
		}
		scaleUp := rng.Intn(3) > 0
		if scaleUp {
			spec.Replicas = keptSum + int32(rng.Intn(30))
		} else if keptSum > 1 {
			spec.Replicas = 1 + int32(rng.Intn(int(keptSum-1)))
		} else {
			continue
		}
		if spec.Replicas == 0 {
			continue
		}
		spec.Placement = &policyv1alpha1.Placement{ReplicaScheduling: strategy}
		got, err := Schedule(Input{Key: fmt.Sprintf("ns/w%d", iter), Spec: &spec, Clusters: fleet, Now: now})
		var fit *FitError
		if errors.As(err, &fit) {
			continue // the caller keeps the current result: nobody shrinks
		}
		if err != nil {
			t.Fatalf("seed %d iteration %d: %v", seed, iter, err)
		}
		result := map[string]int32{}
		var sum int32
		for _, tc := range got.Clusters {
			result[tc.Name] = tc.Replicas
			sum += tc.Replicas
		}
		if sum != spec.Replicas {
			t.Fatalf("seed %d iteration %d: sum %d != %d: %v from %v", seed, iter, sum, spec.Replicas, got.Clusters, spec.Clusters)
		}
		for name, r := range current {
			if scaleUp && result[name] < r {
				t.Fatalf("seed %d iteration %d (%d replicas, kept %d): %s lowered %d -> %d: %v from %v",
					seed, iter, spec.Replicas, keptSum, name, r, result[name], got.Clusters, spec.Clusters)
			}
		}
		if !scaleUp {
			for name, r := range result {
				if r > current[name] {
					t.Fatalf("seed %d iteration %d: scale-down raised %s %d -> %d: %v from %v", seed, iter, name, current[name], r, got.Clusters, spec.Clusters)
				}
			}
		}
	}
}

func ptr[T any](v T) *T { return &v }
