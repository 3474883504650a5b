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
	"flag"
	"fmt"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// benchFleet is 100 clusters in 5 regions, every tenth one tainted, each
// reporting capacity.
func benchFleet() []*clusterv1alpha1.Cluster {
	var cs []*clusterv1alpha1.Cluster
	for i := range 100 {
		c := cluster(fmt.Sprintf("member%03d", i), region(fmt.Sprintf("region-%d", i%5)), capacity("110", fmt.Sprint(8+i%8)))
		c.Labels = map[string]string{"tier": fmt.Sprint(i % 2)}
		if i%10 == 9 {
			c.Spec.Taints = []corev1.Taint{{Key: clusterv1alpha1.TaintClusterNotReady, Effect: corev1.TaintEffectNoSchedule}}
		}
		cs = append(cs, c)
	}
	return cs
}

// benchSpecs are the placements a fleet of 10,000 bindings mixes: the
// seed's static weights, Duplicated with a spread constraint, dynamic
// weights, Aggregated, and region spread.
func benchSpecs() []workv1alpha1.ResourceBindingSpec {
	req := &workv1alpha1.ReplicaRequirements{ResourceRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}}
	divided := func(pref policyv1alpha1.ReplicaDivisionPreference, wp *policyv1alpha1.ClusterPreferences) *policyv1alpha1.ReplicaSchedulingStrategy {
		return &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided,
			ReplicaDivisionPreference: pref, WeightPreference: wp}
	}
	deploy := workv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "bench", Name: "app"}
	return []workv1alpha1.ResourceBindingSpec{
		{Resource: deploy, Replicas: 3, Placement: &policyv1alpha1.Placement{ClusterAffinity: names("member001", "member002"),
			ReplicaScheduling: weighted(map[string]int64{"member001": 1, "member002": 2})}},
		{Resource: deploy, Replicas: 2, Placement: &policyv1alpha1.Placement{
			ClusterAffinity:   &policyv1alpha1.ClusterAffinity{LabelSelector: nil},
			SpreadConstraints: []policyv1alpha1.SpreadConstraint{{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MinGroups: 2, MaxGroups: 3}},
			ReplicaScheduling: duplicated}},
		{Resource: deploy, Replicas: 50, ReplicaRequirements: req, Placement: &policyv1alpha1.Placement{
			ReplicaScheduling: divided(policyv1alpha1.ReplicaDivisionPreferenceWeighted,
				&policyv1alpha1.ClusterPreferences{DynamicWeight: policyv1alpha1.DynamicWeightByAvailableReplicas})}},
		{Resource: deploy, Replicas: 20, ReplicaRequirements: req, Placement: &policyv1alpha1.Placement{
			ReplicaScheduling: divided(policyv1alpha1.ReplicaDivisionPreferenceAggregated, nil)}},
		{Resource: deploy, Replicas: 10, Placement: &policyv1alpha1.Placement{
			SpreadConstraints: []policyv1alpha1.SpreadConstraint{{SpreadByField: policyv1alpha1.SpreadByFieldRegion, MinGroups: 2, MaxGroups: 3},
				{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MaxGroups: 6}},
			ReplicaScheduling: divided(policyv1alpha1.ReplicaDivisionPreferenceWeighted, nil)}},
	}
}

// BenchmarkSchedule is one scheduling decision over 100 clusters, cycling
// through the placements of benchSpecs, as the controller makes it (the
// clusters' summary verdicts remembered across schedules).
func BenchmarkSchedule(b *testing.B) {
	fleet, specs := benchFleet(), benchSpecs()
	var summaries SummaryVerdicts
	check := summaries.Check
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		spec := specs[i%len(specs)]
		if _, err := Schedule(Input{Key: fmt.Sprintf("bench/app-%d", i), Spec: &spec, Clusters: fleet, Now: now, SummaryProblem: check}); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkScheduleRecordDecision is BenchmarkSchedule with the decision
// recorded, as the controller asks when it writes status.
func BenchmarkScheduleRecordDecision(b *testing.B) {
	fleet, specs := benchFleet(), benchSpecs()
	var summaries SummaryVerdicts
	check := summaries.Check
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		spec := specs[i%len(specs)]
		res, err := Schedule(Input{Key: fmt.Sprintf("bench/app-%d", i), Spec: &spec, Clusters: fleet, Now: now, RecordDecision: true, SummaryProblem: check})
		if err != nil || res.Decision == nil {
			b.Fatal(err)
		}
		i++
	}
}

// TestScheduleLatencyReport prints the latency distribution of 10,000
// scheduling decisions over 100 clusters (go test -run ScheduleLatencyReport
// -v -latency-report). It asserts nothing about time: the numbers go in
// docs/benchmarks.md.
func TestScheduleLatencyReport(t *testing.T) {
	if !*latencyReport {
		t.Skip("run with -latency-report")
	}
	fleet, specs := benchFleet(), benchSpecs()
	lat := make([]time.Duration, 10000)
	start := time.Now()
	for i := range lat {
		spec := specs[i%len(specs)]
		t0 := time.Now()
		if _, err := Schedule(Input{Key: fmt.Sprintf("bench/app-%d", i), Spec: &spec, Clusters: fleet, Now: now}); err != nil {
			t.Fatal(err)
		}
		lat[i] = time.Since(t0)
	}
	total := time.Since(start)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	t.Logf("10000 decisions over 100 clusters in %s (%.0f/s): p50 %s p99 %s max %s", total, 10000/total.Seconds(),
		lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1])
}

var latencyReport = flag.Bool("latency-report", false, "print the scheduling latency report")
