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
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// verdicts renders a decision's clusters as "name Reason replicas/score",
// score "-" when absent, in the decision's order.
func verdicts(d *workv1alpha1.SchedulingDecision) []string {
	var out []string
	for _, c := range d.Clusters {
		s := "-"
		if c.Score != nil {
			s = fmt.Sprint(*c.Score)
		}
		out = append(out, fmt.Sprintf("%s %s %d/%s", c.ClusterName, c.Reason, c.Replicas, s))
	}
	return out
}

func schedulerTask(cluster string, replicas int32) workv1alpha1.GracefulEvictionTask {
	return workv1alpha1.GracefulEvictionTask{FromCluster: cluster, Replicas: &replicas, Reason: workv1alpha1.EvictionReasonRescheduled,
		Producer: workv1alpha1.EvictionProducerScheduler}
}

func TestScheduleDecision(t *testing.T) {
	deployment := workv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "nginx"}
	serves := func(gv, kind string) func(*clusterv1alpha1.Cluster) {
		return func(c *clusterv1alpha1.Cluster) {
			c.Status.APIEnablements = []clusterv1alpha1.APIEnablement{{GroupVersion: gv, Resources: []clusterv1alpha1.APIResource{{Kind: kind}}}}
		}
	}
	deleting := func(c *clusterv1alpha1.Cluster) { c.DeletionTimestamp = &metav1.Time{Time: now} }
	taintedValue := func(c *clusterv1alpha1.Cluster) {
		c.Spec.Taints = append(c.Spec.Taints, corev1.Taint{Key: "maintenance", Value: "kernel", Effect: corev1.TaintEffectNoSchedule})
	}
	appFailure := workv1alpha1.EvictionHistoryEntry{ClusterName: "blocked", Reason: workv1alpha1.EvictionReasonApplicationFailure,
		EvictedAt: metav1.NewTime(now.Add(-time.Minute))}
	for _, c := range []struct {
		name     string
		spec     workv1alpha1.ResourceBindingSpec
		clusters []*clusterv1alpha1.Cluster
		wantErr  bool
		want     []string          // verdicts, in order
		messages map[string]string // cluster -> substring of its message
		affinity string
		counts   []workv1alpha1.FilterCount
	}{
		{
			name: "each filter's code, and the message names what filtered",
			spec: workv1alpha1.ResourceBindingSpec{Replicas: 2,
				Placement: &policyv1alpha1.Placement{ReplicaScheduling: duplicated,
					ClusterAffinity: &policyv1alpha1.ClusterAffinity{ExcludeClusters: []string{"elsewhere"}}},
				Failover:              &policyv1alpha1.FailoverBehavior{Application: &policyv1alpha1.ApplicationFailoverBehavior{BlockPredecessorSeconds: ptr[int32](120)}},
				GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{failureTask("evicting")},
				EvictionHistory:       []workv1alpha1.EvictionHistoryEntry{appFailure, recentlyEvicted("evicted")}},
			clusters: []*clusterv1alpha1.Cluster{cluster("ok"), cluster("deleting", deleting), cluster("elsewhere"),
				cluster("tainted", taintedValue), cluster("notready", readyIs(metav1.ConditionFalse)), cluster("blocked"),
				cluster("evicting"), cluster("evicted"), cluster("noapi", serves("v1", "Pod"))},
			want: []string{"ok Selected 2/0",
				"blocked Blocked 0/-", "deleting ClusterDeleting 0/-", "elsewhere ClusterAffinityMismatch 0/-",
				"evicted RecentlyEvicted 0/-", "evicting Evicting 0/-", "noapi APINotServed 0/-",
				"notready TaintUntolerated 0/-", "tainted TaintUntolerated 0/-"},
			messages: map[string]string{
				"ok":        "new",
				"deleting":  "being deleted",
				"elsewhere": "does not match the placement's cluster affinity",
				"tainted":   "untolerated taint maintenance=kernel:NoSchedule",
				"notready":  "untolerated taint cluster.flotilla.io/not-ready:NoSchedule (from its Ready condition",
				"blocked":   "blocked after an application failover until 2026-11-23T12:01:00Z",
				"evicting":  "graceful eviction task for this workload is open (reason TaintUntolerated, producer TaintManager)",
				"evicted":   "evicted from it at 2026-11-23T11:59:00Z; avoided until 2026-11-23T12:09:00Z",
				"noapi":     "does not serve apps/v1 Deployment",
			},
			counts: []workv1alpha1.FilterCount{{Reason: "ClusterDeleting", Count: 1}, {Reason: "ClusterAffinityMismatch", Count: 1},
				{Reason: "TaintUntolerated", Count: 2}, {Reason: "Blocked", Count: 1}, {Reason: "Evicting", Count: 1},
				{Reason: "RecentlyEvicted", Count: 1}, {Reason: "APINotServed", Count: 1}},
		},
		{
			name: "locality scores: 100 kept, 50 returning, 0 new",
			spec: workv1alpha1.ResourceBindingSpec{Replicas: 2, Clusters: targets("kept", 2),
				GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{schedulerTask("returning", 2)},
				Placement:             &policyv1alpha1.Placement{ReplicaScheduling: duplicated}},
			clusters: clusters("new", "kept", "returning"),
			want:     []string{"kept Selected 2/100", "new Selected 2/0", "returning Selected 2/50"},
			messages: map[string]string{"kept": "kept: already ran 2 replicas", "returning": "returning:", "new": "new"},
		},
		{
			name: "the cluster spread constraint picks the best scores; the others say the constraint, best score first",
			spec: workv1alpha1.ResourceBindingSpec{Replicas: 1, Clusters: targets("c", 1),
				GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{schedulerTask("d", 1)},
				Placement: &policyv1alpha1.Placement{ReplicaScheduling: duplicated,
					SpreadConstraints: []policyv1alpha1.SpreadConstraint{{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MaxGroups: 1}}}},
			clusters: clusters("a", "b", "c", "d"),
			want:     []string{"c Selected 1/100", "d NotSelectedBySpread 0/50", "a NotSelectedBySpread 0/0", "b NotSelectedBySpread 0/0"},
			messages: map[string]string{"a": "the spread constraint by cluster takes at most 1 clusters"},
		},
		{
			name: "region spread: the region not picked is named",
			spec: workv1alpha1.ResourceBindingSpec{Replicas: 1, Placement: &policyv1alpha1.Placement{ReplicaScheduling: duplicated,
				SpreadConstraints: []policyv1alpha1.SpreadConstraint{{SpreadByField: policyv1alpha1.SpreadByFieldRegion, MaxGroups: 1}}}},
			clusters: []*clusterv1alpha1.Cluster{cluster("a1", region("a")), cluster("a2", region("a")), cluster("b1", region("b")), cluster("none")},
			want:     []string{"a1 Selected 1/0", "a2 Selected 1/0", "b1 NotSelectedBySpread 0/0", "none NotSelectedBySpread 0/0"},
			messages: map[string]string{"b1": `the spread constraint by region (maxGroups 1) picked other groups than "b"`,
				"none": "has no region"},
		},
		{
			name: "a spread that cannot be met: the feasible clusters carry the failure",
			spec: workv1alpha1.ResourceBindingSpec{Replicas: 1, Placement: &policyv1alpha1.Placement{ReplicaScheduling: duplicated,
				SpreadConstraints: []policyv1alpha1.SpreadConstraint{{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MinGroups: 2}}}},
			clusters: []*clusterv1alpha1.Cluster{cluster("a"), cluster("b", tainted("maintenance", corev1.TaintEffectNoSchedule))},
			wantErr:  true,
			want:     []string{"a NotSelectedBySpread 0/0", "b TaintUntolerated 0/-"},
			messages: map[string]string{"a": "needs at least 2 clusters and 1 are available"},
		},
		{
			name: "Divided: static weights, and a weight of 0 gets no replicas",
			spec: workv1alpha1.ResourceBindingSpec{Replicas: 3, Clusters: targets("member2", 2),
				Placement: &policyv1alpha1.Placement{ReplicaScheduling: weighted(map[string]int64{"member1": 1, "member2": 2})}},
			clusters: clusters("member1", "member2", "member3"),
			want:     []string{"member1 Selected 1/0", "member2 Selected 2/100", "member3 NoReplicasAssigned 0/0"},
			messages: map[string]string{"member1": "new; static weight 1", "member2": "kept: already ran 2 replicas; static weight 2",
				"member3": "Divided gave it no replicas (static weight 0)"},
		},
		{
			name: "Duplicated: every selected cluster gets all replicas",
			spec: workv1alpha1.ResourceBindingSpec{Replicas: 3,
				Placement: &policyv1alpha1.Placement{ReplicaScheduling: duplicated}},
			clusters: clusters("member1", "member2"),
			want:     []string{"member1 Selected 3/0", "member2 Selected 3/0"},
			messages: map[string]string{"member1": "new"},
		},
		{
			name:     "dynamic weights: the room is said; too little room fails on the replicas",
			spec:     workv1alpha1.ResourceBindingSpec{Replicas: 40, Placement: &policyv1alpha1.Placement{ReplicaScheduling: dynamic()}},
			clusters: []*clusterv1alpha1.Cluster{cluster("member1", capacity("10", "8")), cluster("member2", full)},
			wantErr:  true,
			want:     []string{"member1 NoReplicasAssigned 0/0", "member2 NoReplicasAssigned 0/0"},
			messages: map[string]string{"member1": "the selected clusters have room for 10 of 40 replicas"},
		},
		{
			name: "several affinity terms: the decision is the used term's, a cluster of the skipped term says why it was skipped",
			spec: workv1alpha1.ResourceBindingSpec{Replicas: 2, Placement: &policyv1alpha1.Placement{ReplicaScheduling: duplicated,
				ClusterAffinities: []policyv1alpha1.ClusterAffinityTerm{
					{AffinityName: "primary", ClusterAffinity: *names("member1")},
					{AffinityName: "backup", ClusterAffinity: *names("member2")}}}},
			clusters: []*clusterv1alpha1.Cluster{cluster("member1", tainted(clusterv1alpha1.TaintClusterNotReady, corev1.TaintEffectNoSchedule)),
				cluster("member2"), cluster("member3")},
			affinity: "backup",
			want:     []string{"member2 Selected 2/0", "member1 ClusterAffinityMismatch 0/-", "member3 ClusterAffinityMismatch 0/-"},
			messages: map[string]string{
				"member1": `not in clusterAffinities term "backup"; clusterAffinities term "primary", tried before, did not fit: untolerated taint cluster.flotilla.io/not-ready:NoSchedule`,
				"member3": `not in clusterAffinities term "backup"`,
			},
		},
		{
			name: "several affinity terms, none fits: the first term's decision (its failure is reported)",
			spec: workv1alpha1.ResourceBindingSpec{Replicas: 2, Placement: &policyv1alpha1.Placement{ReplicaScheduling: duplicated,
				ClusterAffinities: []policyv1alpha1.ClusterAffinityTerm{
					{AffinityName: "primary", ClusterAffinity: *names("member1")},
					{AffinityName: "backup", ClusterAffinity: *names("member2")}}}},
			clusters: []*clusterv1alpha1.Cluster{cluster("member1", tainted(clusterv1alpha1.TaintClusterNotReady, corev1.TaintEffectNoSchedule)),
				cluster("member2", tainted(clusterv1alpha1.TaintClusterNotReady, corev1.TaintEffectNoSchedule))},
			wantErr:  true,
			affinity: "primary",
			want:     []string{"member1 TaintUntolerated 0/-", "member2 ClusterAffinityMismatch 0/-"},
		},
		{
			name: "eviction history gives way when nothing else fits: the second pass's decision",
			spec: workv1alpha1.ResourceBindingSpec{Replicas: 2, Placement: &policyv1alpha1.Placement{ReplicaScheduling: duplicated},
				EvictionHistory: []workv1alpha1.EvictionHistoryEntry{recentlyEvicted("member1")}},
			clusters: []*clusterv1alpha1.Cluster{cluster("member1"), cluster("member2", tainted("maintenance", corev1.TaintEffectNoSchedule))},
			want:     []string{"member1 Selected 2/0", "member2 TaintUntolerated 0/-"},
			messages: map[string]string{"member1": "new; recently evicted, taken because no other cluster fit"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec := c.spec
			spec.Resource = deployment
			in := Input{Key: "default/nginx", Spec: &spec, Clusters: c.clusters, Now: now, EvictionHistoryTTL: 10 * time.Minute, RecordDecision: true}
			got, err := Schedule(in)
			d := got.Decision
			if c.wantErr {
				var fit *FitError
				if !errors.As(err, &fit) {
					t.Fatalf("error = %v, want a FitError", err)
				}
				d = fit.Decision
			} else if err != nil {
				t.Fatal(err)
			}
			if d == nil {
				t.Fatal("no decision recorded")
			}
			if !d.DecidedTime.Time.Equal(now) || d.AffinityName != c.affinity || d.OmittedClusters != 0 {
				t.Errorf("decidedTime %v affinityName %q omitted %d, want %v %q 0", d.DecidedTime, d.AffinityName, d.OmittedClusters, now, c.affinity)
			}
			if v := verdicts(d); !reflect.DeepEqual(v, c.want) {
				t.Errorf("verdicts:\n got %q\nwant %q", v, c.want)
			}
			for _, cd := range d.Clusters {
				if want, ok := c.messages[cd.ClusterName]; ok && !strings.Contains(cd.Message, want) {
					t.Errorf("%s: message %q, want it to contain %q", cd.ClusterName, cd.Message, want)
				}
				if cd.Message == "" {
					t.Errorf("%s: no message", cd.ClusterName)
				}
			}
			if c.counts != nil && !reflect.DeepEqual(d.FilteredCounts, c.counts) {
				t.Errorf("filteredCounts = %v, want %v", d.FilteredCounts, c.counts)
			}
			// The decision agrees with the result, and asking for it changes nothing.
			if err == nil {
				var sel []workv1alpha1.TargetCluster
				for _, cd := range d.Clusters {
					if cd.Selected {
						sel = append(sel, workv1alpha1.TargetCluster{Name: cd.ClusterName, Replicas: cd.Replicas})
					}
				}
				if !reflect.DeepEqual(sel, got.Clusters) {
					t.Errorf("selected %v, result %v", sel, got.Clusters)
				}
			}
			in.RecordDecision = false
			plain, plainErr := Schedule(in)
			if plain.Decision != nil || !reflect.DeepEqual(plain.Clusters, got.Clusters) || fmt.Sprint(plainErr) != fmt.Sprint(err) {
				t.Errorf("without RecordDecision: %v %v (decision %v), with: %v %v", plain.Clusters, plainErr, plain.Decision, got.Clusters, err)
			}
		})
	}
}

// At fleet scale the decision stays bounded: every selected cluster (up
// to MaxClusterDecisions), then MaxUnselectedClusterDecisions others, the
// ones that passed the filters first; filteredCounts still count them all.
func TestScheduleDecisionCap(t *testing.T) {
	fleet := make([]*clusterv1alpha1.Cluster, 150)
	for i := range fleet {
		fleet[i] = cluster(fmt.Sprintf("c%03d", i))
		if i < 10 {
			tainted("maintenance", corev1.TaintEffectNoSchedule)(fleet[i])
		}
	}
	deployment := workv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "nginx"}
	run := func(t *testing.T, spec workv1alpha1.ResourceBindingSpec, wantCounts ...workv1alpha1.FilterCount) *workv1alpha1.SchedulingDecision {
		t.Helper()
		spec.Resource = deployment
		got, err := Schedule(Input{Key: "default/nginx", Spec: &spec, Clusters: fleet, Now: now, RecordDecision: true})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Decision.FilteredCounts, wantCounts) {
			t.Errorf("filteredCounts = %v, want %v", got.Decision.FilteredCounts, wantCounts)
		}
		return got.Decision
	}
	t.Run("few selected: they, then 20 others, the ones that passed the filters first by score", func(t *testing.T) {
		d := run(t, workv1alpha1.ResourceBindingSpec{Replicas: 1, Clusters: targets("c100", 1, "c101", 1),
			GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{schedulerTask("c149", 1)},
			Placement: &policyv1alpha1.Placement{ReplicaScheduling: duplicated,
				SpreadConstraints: []policyv1alpha1.SpreadConstraint{{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MaxGroups: 2}}}},
			workv1alpha1.FilterCount{Reason: workv1alpha1.DecisionTaintUntolerated, Count: 10})
		v := verdicts(d)
		want := []string{"c100 Selected 1/100", "c101 Selected 1/100", "c149 NotSelectedBySpread 0/50"}
		for i := 10; len(want) < 2+workv1alpha1.MaxUnselectedClusterDecisions; i++ {
			want = append(want, fmt.Sprintf("c%03d NotSelectedBySpread 0/0", i))
		}
		if !reflect.DeepEqual(v, want) {
			t.Errorf("verdicts:\n got %q\nwant %q", v, want)
		}
		if d.OmittedClusters != 150-22 {
			t.Errorf("omittedClusters = %d, want %d", d.OmittedClusters, 150-22)
		}
	})
	t.Run("filtered clusters follow the ones that passed, by name", func(t *testing.T) {
		d := run(t, workv1alpha1.ResourceBindingSpec{Replicas: 1, Placement: &policyv1alpha1.Placement{ReplicaScheduling: duplicated,
			ClusterAffinity: names("c000", "c001", "c002", "c140", "c141")}},
			workv1alpha1.FilterCount{Reason: workv1alpha1.DecisionClusterAffinityMismatch, Count: 145},
			workv1alpha1.FilterCount{Reason: workv1alpha1.DecisionTaintUntolerated, Count: 3})
		want := []string{"c140 Selected 1/0", "c141 Selected 1/0", "c000 TaintUntolerated 0/-", "c001 TaintUntolerated 0/-",
			"c002 TaintUntolerated 0/-"}
		// c003..c009 are tainted too, but the affinity filter runs first.
		for i := 3; len(want) < 2+workv1alpha1.MaxUnselectedClusterDecisions; i++ {
			want = append(want, fmt.Sprintf("c%03d ClusterAffinityMismatch 0/-", i))
		}
		if v := verdicts(d); !reflect.DeepEqual(v, want) {
			t.Errorf("verdicts:\n got %q\nwant %q", v, want)
		}
		if d.OmittedClusters != 150-22 {
			t.Errorf("omittedClusters = %d, want %d", d.OmittedClusters, 150-22)
		}
	})
	t.Run("150 selected: 128 listed, all selected, the rest omitted", func(t *testing.T) {
		d := run(t, workv1alpha1.ResourceBindingSpec{Replicas: 1, Placement: &policyv1alpha1.Placement{ReplicaScheduling: duplicated,
			ClusterTolerations: []corev1.Toleration{{Key: "maintenance", Operator: corev1.TolerationOpExists}}}})
		if len(d.Clusters) != workv1alpha1.MaxClusterDecisions || d.OmittedClusters != 150-workv1alpha1.MaxClusterDecisions {
			t.Fatalf("%d listed, %d omitted; want %d, %d", len(d.Clusters), d.OmittedClusters, workv1alpha1.MaxClusterDecisions, 150-workv1alpha1.MaxClusterDecisions)
		}
		for i, cd := range d.Clusters {
			if want := fmt.Sprintf("c%03d", i); cd.ClusterName != want || !cd.Selected {
				t.Fatalf("entry %d = %s selected=%v, want %s selected", i, cd.ClusterName, cd.Selected, want)
			}
		}
	})
}

// Every decision of the benchmark's fleet agrees with its result.
func TestScheduleDecisionMatchesResult(t *testing.T) {
	fleet, specs := benchFleet(), benchSpecs()
	for i, spec := range specs {
		got, err := Schedule(Input{Key: fmt.Sprintf("bench/app-%d", i), Spec: &spec, Clusters: fleet, Now: now, RecordDecision: true})
		if err != nil {
			t.Fatal(err)
		}
		var sel []workv1alpha1.TargetCluster
		for _, cd := range got.Decision.Clusters {
			if cd.Selected {
				sel = append(sel, workv1alpha1.TargetCluster{Name: cd.ClusterName, Replicas: cd.Replicas})
			}
		}
		if !reflect.DeepEqual(sel, got.Clusters) {
			t.Errorf("spec %d: selected %v, result %v", i, sel, got.Clusters)
		}
		if n := int32(len(got.Decision.Clusters)) + got.Decision.OmittedClusters; n != int32(len(fleet)) {
			t.Errorf("spec %d: %d listed + omitted, want %d", i, n, len(fleet))
		}
	}
}
