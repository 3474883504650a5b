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
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/workobjects"
)

func antiGroup(g string) *workv1alpha1.WorkloadAffinityGroups {
	return &workv1alpha1.WorkloadAffinityGroups{AntiAffinityGroup: g}
}

func affGroup(g string) *workv1alpha1.WorkloadAffinityGroups {
	return &workv1alpha1.WorkloadAffinityGroups{AffinityGroup: g}
}

func peer(ns, name string, groups *workv1alpha1.WorkloadAffinityGroups, clusters ...string) WorkloadPeer {
	return WorkloadPeer{Namespace: ns, Name: name, Groups: groups, Clusters: clusters}
}

// oneCluster is Karmada's e2e placement: one cluster per workload.
func oneCluster(clusterNames ...string) *policyv1alpha1.Placement {
	p := &policyv1alpha1.Placement{SpreadConstraints: []policyv1alpha1.SpreadConstraint{
		{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MinGroups: 1, MaxGroups: 1}}}
	if len(clusterNames) > 0 {
		p.ClusterAffinity = names(clusterNames...)
	}
	return p
}

func clusterNames(ts []workv1alpha1.TargetCluster) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return out
}

func TestWorkloadAffinityFilter(t *testing.T) {
	fleet := clusters("member1", "member2", "member3")
	g := "app.group=db"
	cases := []struct {
		name    string
		ns      string
		groups  *workv1alpha1.WorkloadAffinityGroups
		current []workv1alpha1.TargetCluster
		peers   []WorkloadPeer
		want    []string // the clusters that pass, of fleet
	}{
		{name: "no groups filter nothing", ns: "a", peers: []WorkloadPeer{peer("a", "x", antiGroup(g), "member1")},
			want: []string{"member1", "member2", "member3"}},
		{name: "anti-affinity: never where a peer runs", ns: "a", groups: antiGroup(g),
			peers: []WorkloadPeer{peer("a", "primary", antiGroup(g), "member1")}, want: []string{"member2", "member3"}},
		{name: "anti-affinity: nor where a peer's evicted copy still runs", ns: "a", groups: antiGroup(g),
			peers: []WorkloadPeer{{Namespace: "a", Name: "primary", Groups: antiGroup(g), Clusters: []string{"member1"}, Evicting: []string{"member2"}}},
			want:  []string{"member3"}},
		{name: "anti-affinity: an unplaced peer blocks nothing", ns: "a", groups: antiGroup(g),
			peers: []WorkloadPeer{peer("a", "primary", antiGroup(g))}, want: []string{"member1", "member2", "member3"}},
		{name: "anti-affinity: a cluster it runs on stays", ns: "a", groups: antiGroup(g), current: targets("member1", 1),
			peers: []WorkloadPeer{peer("a", "primary", antiGroup(g), "member1")}, want: []string{"member1", "member2", "member3"}},
		{name: "anti-affinity: another group's workload is no peer", ns: "a", groups: antiGroup(g),
			peers: []WorkloadPeer{peer("a", "other", antiGroup("app.group=web"), "member1")}, want: []string{"member1", "member2", "member3"}},
		{name: "anti-affinity: the same string as an affinity group is no peer", ns: "a", groups: antiGroup(g),
			peers: []WorkloadPeer{peer("a", "other", affGroup(g), "member1")}, want: []string{"member1", "member2", "member3"}},
		{name: "anti-affinity: itself is no peer", ns: "a", groups: antiGroup(g),
			peers: []WorkloadPeer{peer("a", "self", antiGroup(g), "member1")}, want: []string{"member1", "member2", "member3"}},
		{name: "affinity: the first of a group goes anywhere", ns: "a", groups: affGroup(g),
			peers: []WorkloadPeer{peer("a", "cache", affGroup(g))}, want: []string{"member1", "member2", "member3"}},
		{name: "affinity: only where the placed peers run", ns: "a", groups: affGroup(g),
			peers: []WorkloadPeer{peer("a", "cache", affGroup(g), "member2", "member3"), peer("a", "queue", affGroup(g), "member3")},
			want:  []string{"member3"}},
		{name: "affinity: a peer's evicted copy is not where it runs", ns: "a", groups: affGroup(g),
			peers: []WorkloadPeer{{Namespace: "a", Name: "cache", Groups: affGroup(g), Clusters: []string{"member2"}, Evicting: []string{"member1"}}},
			want:  []string{"member2"}},
		{name: "affinity: peers apart leave no cluster", ns: "a", groups: affGroup(g),
			peers: []WorkloadPeer{peer("a", "cache", affGroup(g), "member1"), peer("a", "queue", affGroup(g), "member2")}},
		{name: "affinity: a cluster it runs on stays", ns: "a", groups: affGroup(g), current: targets("member1", 1),
			peers: []WorkloadPeer{peer("a", "cache", affGroup(g), "member2")}, want: []string{"member1", "member2"}},
		{name: "both: together with one group, apart from the other", ns: "a",
			groups: &workv1alpha1.WorkloadAffinityGroups{AffinityGroup: "stack=shop", AntiAffinityGroup: "instance=1"},
			peers: []WorkloadPeer{peer("a", "front", affGroup("stack=shop"), "member1", "member2"),
				peer("a", "twin", antiGroup("instance=1"), "member1")},
			want: []string{"member2"}},
		// A tenant of namespace b labels its workloads like namespace a's:
		// neither placed nor unplaced, they steer or block nothing of a's.
		{name: "tenant: another namespace's anti-affine workload blocks nothing", ns: "a", groups: antiGroup(g),
			peers: []WorkloadPeer{peer("b", "squatter-1", antiGroup(g), "member1"), peer("b", "squatter-2", antiGroup(g), "member2")},
			want:  []string{"member1", "member2", "member3"}},
		{name: "tenant: another namespace's affine workload steers nothing", ns: "a", groups: affGroup(g),
			peers: []WorkloadPeer{peer("b", "lure", affGroup(g), "member3"), peer("a", "cache", affGroup(g), "member1", "member2")},
			want:  []string{"member1", "member2"}},
		{name: "tenant: a same-named binding of another namespace is a stranger, not itself", ns: "a", groups: antiGroup(g),
			peers: []WorkloadPeer{peer("b", "self", antiGroup(g), "member1"), peer("a", "twin", antiGroup(g), "member2")},
			want:  []string{"member1", "member3"}},
		{name: "cluster-scoped bindings are never grouped", ns: "", groups: antiGroup(g),
			peers: []WorkloadPeer{peer("", "other", antiGroup(g), "member1")}, want: []string{"member1", "member2", "member3"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := NewWorkloadAffinity(tc.ns, "self", tc.groups, tc.peers)
			current := map[string]int32{}
			for _, c := range tc.current {
				current[c.Name] = c.Replicas
			}
			var got []string
			for _, c := range fleet {
				if workloadAffinityFilter(Input{WorkloadAffinity: w}, c.Name, current) == "" {
					got = append(got, c.Name)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("passing clusters %v, want %v", got, tc.want)
			}
		})
	}
}

// Karmada's e2e cases (test/e2e/suites/base/workloadaffinity_test.go), on
// the decision alone.
func TestScheduleWorkloadAffinity(t *testing.T) {
	fleet := clusters("member1", "member2", "member3")
	schedule := func(ns, name string, placement *policyv1alpha1.Placement, groups *workv1alpha1.WorkloadAffinityGroups,
		current []workv1alpha1.TargetCluster, peers ...WorkloadPeer) (Result, error) {
		spec := &workv1alpha1.ResourceBindingSpec{Replicas: 1, Placement: placement, Clusters: current, WorkloadAffinityGroups: groups,
			Resource: workv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: name}}
		return Schedule(Input{Key: ns + "/" + name, Spec: spec, Clusters: fleet, Now: now, RecordDecision: true,
			WorkloadAffinity: NewWorkloadAffinity(ns, name, groups, peers)})
	}
	t.Run("same anti-affinity group lands on different clusters", func(t *testing.T) {
		first, err := schedule("a", "dep1", oneCluster(), antiGroup("g=ha"), nil)
		if err != nil {
			t.Fatal(err)
		}
		second, err := schedule("a", "dep2", oneCluster(), antiGroup("g=ha"), nil, peer("a", "dep1", antiGroup("g=ha"), clusterNames(first.Clusters)...))
		if err != nil {
			t.Fatal(err)
		}
		if len(first.Clusters) != 1 || len(second.Clusters) != 1 || first.Clusters[0].Name == second.Clusters[0].Name {
			t.Errorf("dep1 %v, dep2 %v: want one cluster each, not the same", first.Clusters, second.Clusters)
		}
		for _, c := range second.Decision.Clusters {
			if c.ClusterName == first.Clusters[0].Name && (c.Reason != workv1alpha1.DecisionWorkloadAntiAffinity || c.Message != `anti-affinity group "g=ha" already runs here (dep1)`) {
				t.Errorf("dep2's decision for %s: %s %q, want %s naming the group and dep1", c.ClusterName, c.Reason, c.Message, workv1alpha1.DecisionWorkloadAntiAffinity)
			}
		}
	})
	t.Run("same affinity group co-locates", func(t *testing.T) {
		// The first is placed where the scheduler likes (member3 only to
		// show the second follows it, not the name order).
		first, err := schedule("a", "dep1", oneCluster("member3"), affGroup("g=train"), nil)
		if err != nil {
			t.Fatal(err)
		}
		second, err := schedule("a", "dep2", oneCluster(), affGroup("g=train"), nil, peer("a", "dep1", affGroup("g=train"), clusterNames(first.Clusters)...))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(clusterNames(second.Clusters), []string{"member3"}) {
			t.Errorf("dep2 %v, want member3 with dep1", second.Clusters)
		}
	})
	t.Run("same label across namespaces can co-locate", func(t *testing.T) {
		_, err := schedule("b", "dep2", oneCluster("member1"), antiGroup("g=svc"), nil, peer("a", "dep1", antiGroup("g=svc"), "member1"))
		if err != nil {
			t.Errorf("dep2 of another namespace: %v, want member1 (groups are per namespace)", err)
		}
	})
	t.Run("affinity and anti-affinity on one cluster: only one of the two fits", func(t *testing.T) {
		// dep1 (affinity) on member1; dep2 (anti-affinity) on member1;
		// dep3 (both) must be with dep1 and away from dep2: nowhere.
		_, err := schedule("a", "dep3", oneCluster("member1"),
			&workv1alpha1.WorkloadAffinityGroups{AffinityGroup: "aff=mix", AntiAffinityGroup: "anti=mix"}, nil,
			peer("a", "dep1", affGroup("aff=mix"), "member1"), peer("a", "dep2", antiGroup("anti=mix"), "member1"))
		var fit *FitError
		if !errors.As(err, &fit) {
			t.Fatalf("dep3: %v, want a FitError", err)
		}
		for _, want := range []string{reasonWorkloadAntiAffinity, `anti-affinity group "anti=mix" runs on member1 (dep2)`} {
			if !strings.Contains(fit.Message, want) {
				t.Errorf("message %q lacks %q", fit.Message, want)
			}
		}
	})
	t.Run("failover: the evicted one never lands on its peer's cluster", func(t *testing.T) {
		spec := workv1alpha1.ResourceBindingSpec{Replicas: 1, Placement: oneCluster(), Clusters: targets("member1", 1), WorkloadAffinityGroups: antiGroup("g=db")}
		workobjects.EvictCluster(&spec, workv1alpha1.GracefulEvictionTask{FromCluster: "member1", Reason: workv1alpha1.EvictionReasonTaintUntolerated,
			Producer: workv1alpha1.EvictionProducerTaintManager, PurgeMode: policyv1alpha1.PurgeModeGracefully}, metav1.NewTime(now))
		down := []*clusterv1alpha1.Cluster{cluster("member1", readyIs(metav1.ConditionFalse)), cluster("member2"), cluster("member3")}
		peers := []WorkloadPeer{peer("a", "replica", antiGroup("g=db"), "member2")}
		res, err := Schedule(Input{Key: "a/primary", Spec: &spec, Clusters: down, Now: now, EvictionHistoryTTL: time.Hour,
			WorkloadAffinity: NewWorkloadAffinity("a", "primary", spec.WorkloadAffinityGroups, peers)})
		if err != nil || !reflect.DeepEqual(clusterNames(res.Clusters), []string{"member3"}) {
			t.Errorf("primary after member1 failed: %v %v, want member3", res.Clusters, err)
		}
		// No third cluster: a FitError, which the controller records
		// without touching spec.clusters (the evicted copy stays by its task).
		_, err = Schedule(Input{Key: "a/primary", Spec: &spec, Clusters: down[:2], Now: now, EvictionHistoryTTL: time.Hour,
			WorkloadAffinity: NewWorkloadAffinity("a", "primary", spec.WorkloadAffinityGroups, peers)})
		var fit *FitError
		if !errors.As(err, &fit) || fit.Reasons["member2"] != reasonWorkloadAntiAffinity {
			t.Errorf("primary with no third cluster: %v, want a FitError naming member2's anti-affinity", err)
		}
	})
	t.Run("first of an affinity group is never blocked: same result as without the rule", func(t *testing.T) {
		placement := &policyv1alpha1.Placement{ReplicaScheduling: weighted(map[string]int64{"member1": 1, "member2": 2, "member3": 1})}
		spec := workv1alpha1.ResourceBindingSpec{Replicas: 8, Placement: placement}
		plain, err := Schedule(Input{Key: "a/x", Spec: &spec, Clusters: fleet, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		spec.WorkloadAffinityGroups = affGroup("g=new")
		grouped, err := Schedule(Input{Key: "a/x", Spec: &spec, Clusters: fleet, Now: now,
			WorkloadAffinity: NewWorkloadAffinity("a", "x", spec.WorkloadAffinityGroups, []WorkloadPeer{peer("a", "pending", affGroup("g=new"))})})
		if err != nil || !reflect.DeepEqual(plain.Clusters, grouped.Clusters) {
			t.Errorf("first of its group: %v %v, want %v as without workloadAffinity", grouped.Clusters, err, plain.Clusters)
		}
	})
}

// TestWorkloadAntiAffinityProperty: over seeded random fleets, workloads,
// placements, cluster failures (eviction as the taint manager does it) and
// recoveries, scheduled one at a time in random order until nothing
// changes, two workloads of one namespace's anti-affinity group never share
// a cluster (one's placement never meets the other's placement or evicted
// copy), and workloads of another namespace with the same labels change no
// decision. Replay: WORKLOAD_AFFINITY_SEED=n.
func TestWorkloadAntiAffinityProperty(t *testing.T) {
	seed := time.Now().UnixNano()
	if s := os.Getenv("WORKLOAD_AFFINITY_SEED"); s != "" {
		seed, _ = strconv.ParseInt(s, 10, 64)
	}
	t.Logf("seed %d (replay with WORKLOAD_AFFINITY_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewSource(seed))
	type binding struct {
		ns, name string
		spec     workv1alpha1.ResourceBindingSpec
	}
	groups := []string{"pipeline.id=payments", "pipeline.id=search"}
	for iter := range 300 {
		var fleet []*clusterv1alpha1.Cluster
		for i := range 2 + rng.Intn(5) {
			fleet = append(fleet, cluster(fmt.Sprintf("member%d", i)))
		}
		var bindings []*binding
		for i := range 2 + rng.Intn(6) {
			ns := "tenant-a"
			if rng.Intn(4) == 0 {
				ns = "tenant-b" // same labels, another namespace
			}
			b := &binding{ns: ns, name: fmt.Sprintf("w%d", i)}
			b.spec.Resource = workv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: b.name}
			b.spec.WorkloadAffinityGroups = antiGroup(groups[rng.Intn(len(groups))])
			placement := &policyv1alpha1.Placement{}
			switch rng.Intn(3) {
			case 0: // Duplicated to every cluster that fits
			case 1:
				b.spec.Replicas = int32(1 + rng.Intn(4))
				placement.SpreadConstraints = []policyv1alpha1.SpreadConstraint{{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MinGroups: 1, MaxGroups: int32(1 + rng.Intn(2))}}
				placement.ReplicaScheduling = &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided,
					ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceAggregated}
			case 2:
				b.spec.Replicas = int32(1 + rng.Intn(4))
				placement.SpreadConstraints = []policyv1alpha1.SpreadConstraint{{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MinGroups: 1, MaxGroups: 1}}
			}
			if rng.Intn(3) == 0 {
				var some []string
				for _, c := range fleet {
					if rng.Intn(2) == 0 {
						some = append(some, c.Name)
					}
				}
				placement.ClusterAffinity = names(some...)
			}
			b.spec.Placement = placement
			bindings = append(bindings, b)
		}
		peersOf := func(self *binding, sameNamespaceOnly bool) []WorkloadPeer {
			var out []WorkloadPeer
			for _, o := range bindings {
				if o == self || sameNamespaceOnly && o.ns != self.ns {
					continue
				}
				rb := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: o.ns, Name: o.name}, Spec: o.spec}
				out = append(out, PeerOf(rb))
			}
			return out
		}
		scheduleOne := func(b *binding) bool {
			in := Input{Key: b.ns + "/" + b.name, Spec: &b.spec, Clusters: fleet, Now: now, EvictionHistoryTTL: time.Minute,
				WorkloadAffinity: NewWorkloadAffinity(b.ns, b.name, b.spec.WorkloadAffinityGroups, peersOf(b, false))}
			res, err := Schedule(in)
			// Adversarial: the other namespace's same-labelled workloads
			// (which a careless index would return) change nothing.
			in.WorkloadAffinity = NewWorkloadAffinity(b.ns, b.name, b.spec.WorkloadAffinityGroups, peersOf(b, true))
			scoped, scopedErr := Schedule(in)
			if !reflect.DeepEqual(res.Clusters, scoped.Clusters) || (err == nil) != (scopedErr == nil) {
				t.Fatalf("iter %d (seed %d): %s/%s decided %v (%v) with other namespaces' workloads, %v (%v) without", iter, seed,
					b.ns, b.name, res.Clusters, err, scoped.Clusters, scopedErr)
			}
			if err != nil || reflect.DeepEqual(res.Clusters, b.spec.Clusters) {
				return false // a FitError keeps what runs, as the controller does
			}
			b.spec.Clusters = res.Clusters
			return true
		}
		settle := func() {
			// As the controller requeues a group's peers on each change:
			// until nothing changes (bounded; each pass is a random order).
			for range 20 {
				changed := false
				for _, i := range rng.Perm(len(bindings)) {
					changed = scheduleOne(bindings[i]) || changed
				}
				if !changed {
					return
				}
			}
		}
		check := func(step string) {
			for _, a := range bindings {
				for _, b := range bindings {
					if a == b || a.ns != b.ns || a.spec.WorkloadAffinityGroups.AntiAffinityGroup != b.spec.WorkloadAffinityGroups.AntiAffinityGroup {
						continue
					}
					occupied := clusterNames(b.spec.Clusters)
					for _, task := range b.spec.GracefulEvictionTasks {
						occupied = append(occupied, task.FromCluster)
					}
					for _, c := range a.spec.Clusters {
						if slices.Contains(occupied, c.Name) {
							t.Fatalf("iter %d (seed %d) after %s: %s/%s and %s of anti-affinity group %q share %s (%v; %v, tasks %v)", iter, seed, step,
								a.ns, a.name, b.name, a.spec.WorkloadAffinityGroups.AntiAffinityGroup, c.Name, a.spec.Clusters, b.spec.Clusters, b.spec.GracefulEvictionTasks)
						}
					}
				}
			}
		}
		settle()
		check("first schedule")
		for step := range 6 {
			c := fleet[rng.Intn(len(fleet))]
			if rng.Intn(3) > 0 {
				// The cluster fails: NoExecute, and every workload on it is
				// evicted gracefully (its copy stays until the task ends).
				c.Status.Conditions = []metav1.Condition{{Type: clusterv1alpha1.ClusterConditionReady, Status: metav1.ConditionFalse}}
				c.Spec.Taints = []corev1.Taint{{Key: clusterv1alpha1.TaintClusterNotReady, Effect: corev1.TaintEffectNoExecute}}
				for _, b := range bindings {
					workobjects.EvictCluster(&b.spec, workv1alpha1.GracefulEvictionTask{FromCluster: c.Name, Reason: workv1alpha1.EvictionReasonTaintUntolerated,
						Producer: workv1alpha1.EvictionProducerTaintManager, PurgeMode: policyv1alpha1.PurgeModeGracefully}, metav1.NewTime(now))
				}
			} else {
				// It recovers and the tasks on it end.
				c.Status.Conditions = []metav1.Condition{{Type: clusterv1alpha1.ClusterConditionReady, Status: metav1.ConditionTrue}}
				c.Spec.Taints = nil
				for _, b := range bindings {
					b.spec.GracefulEvictionTasks = slices.DeleteFunc(b.spec.GracefulEvictionTasks, func(t workv1alpha1.GracefulEvictionTask) bool { return t.FromCluster == c.Name })
				}
			}
			settle()
			check(fmt.Sprintf("step %d (%s)", step, c.Name))
		}
	}
}

// BenchmarkWorkloadAffinity1000Peers: a decision of a binding whose
// anti-affinity group has 1,000 placed members on a 100-cluster fleet
// (the filter's set is built once per decision).
func BenchmarkWorkloadAffinity1000Peers(b *testing.B) {
	var fleet []*clusterv1alpha1.Cluster
	for i := range 100 {
		fleet = append(fleet, cluster(fmt.Sprintf("member%03d", i)))
	}
	var peers []WorkloadPeer
	for i := range 1000 {
		peers = append(peers, peer("a", fmt.Sprintf("w%d", i), antiGroup("g=big"), fmt.Sprintf("member%03d", i%99)))
	}
	spec := &workv1alpha1.ResourceBindingSpec{Replicas: 1, Placement: oneCluster(), WorkloadAffinityGroups: antiGroup("g=big")}
	b.ReportAllocs()
	for b.Loop() {
		res, err := Schedule(Input{Key: "a/x", Spec: spec, Clusters: fleet, Now: now,
			WorkloadAffinity: NewWorkloadAffinity("a", "x", spec.WorkloadAffinityGroups, peers)})
		if err != nil || len(res.Clusters) != 1 || res.Clusters[0].Name != "member099" {
			b.Fatalf("%v %v, want member099 (the one cluster no member runs on)", res.Clusters, err)
		}
	}
}
