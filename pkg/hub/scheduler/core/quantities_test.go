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
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/quantities"
)

var nginx = workv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "nginx"}

// lying is a member reporting room for 100 cpus and 110 pods, with one
// value of its summary set by set.
func lying(set func(s *clusterv1alpha1.ResourceSummary)) func(*clusterv1alpha1.Cluster) {
	return func(c *clusterv1alpha1.Cluster) {
		capacity("110", "100")(c)
		set(c.Status.ResourceSummary)
	}
}

func allocated(name corev1.ResourceName, q string) func(s *clusterv1alpha1.ResourceSummary) {
	return func(s *clusterv1alpha1.ResourceSummary) {
		if s.Allocated == nil {
			s.Allocated = corev1.ResourceList{}
		}
		s.Allocated[name] = resource.MustParse(q)
	}
}

// scheduleWithin is Schedule, failing t at once when it has not returned
// within 5 s: a hang detector (a schedule takes microseconds; one
// MilliValue of 1e10000000 about a second), not a speed assertion.
func scheduleWithin(t *testing.T, in Input) (Result, error) {
	t.Helper()
	type result struct {
		r   Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := Schedule(in)
		done <- result{r, err}
	}()
	select {
	case r := <-done:
		return r.r, r.err
	case <-time.After(5 * time.Second):
		t.Fatal("Schedule not returned within 5s")
		return Result{}, nil
	}
}

// A member whose resource summary is out of range — absurd, negative, or
// wrapping the capacity arithmetic — gets no replicas divided by room
// (not full room), and the honest members get theirs (issue 36). On
// c1a0803 the wrapping and negative ones took most of the replicas and
// the 1e10000000 ones stalled the schedule.
func TestOutOfRangeSummaryGetsNoReplicas(t *testing.T) {
	for _, c := range []struct {
		name string
		set  func(s *clusterv1alpha1.ResourceSummary)
	}{
		// 100 cpus − this wraps MilliValue's int64 to +5·10^17 milli.
		{"allocated that wraps", allocated(corev1.ResourceCPU, "17946744073709651616m")},
		{"negative allocated", allocated(corev1.ResourceCPU, "-1000")},
		{"negative allocating", func(s *clusterv1alpha1.ResourceSummary) {
			s.Allocating = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("-1000")}
		}},
		{"allocated 9e18", allocated(corev1.ResourceCPU, "9e18")},
		{"allocated 1e10000000", allocated(corev1.ResourceCPU, "1e10000000")},
		{"allocatable 1e10000000", func(s *clusterv1alpha1.ResourceSummary) {
			s.Allocatable[corev1.ResourceCPU] = resource.MustParse("1e10000000")
		}},
		{"an unrelated resource out of range", func(s *clusterv1alpha1.ResourceSummary) {
			s.Allocatable[corev1.ResourceMemory] = resource.MustParse("1e10000000")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := &workv1alpha1.ReplicaRequirements{ResourceRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}
			fleet := []*clusterv1alpha1.Cluster{cluster("honest1", capacity("110", "4")), cluster("liar", lying(c.set)), cluster("honest2", capacity("110", "4"))}
			for _, strategy := range []*policyv1alpha1.ReplicaSchedulingStrategy{dynamic(), aggregatedStrategy} {
				spec := &workv1alpha1.ResourceBindingSpec{Resource: nginx, Replicas: 6, ReplicaRequirements: req,
					Placement: &policyv1alpha1.Placement{ReplicaScheduling: strategy}}
				got, err := scheduleWithin(t, Input{Key: "default/nginx-deployment", Spec: spec, Clusters: fleet, Now: now, Fresh: true, RecordDecision: true})
				if err != nil {
					t.Fatalf("%s: %v", strategy.ReplicaDivisionPreference, err)
				}
				var sum int32
				for _, tc := range got.Clusters {
					if tc.Name == "liar" {
						t.Fatalf("%s: the liar got %d replicas: %v", strategy.ReplicaDivisionPreference, tc.Replicas, got.Clusters)
					}
					sum += tc.Replicas
				}
				if sum != 6 {
					t.Fatalf("%s: %v, want the 6 replicas on the honest clusters", strategy.ReplicaDivisionPreference, got.Clusters)
				}
				if strategy == aggregatedStrategy {
					continue
				}
				if !strings.Contains(decisionOf(got.Decision, "liar"), "resource summary out of range") {
					t.Errorf("decision for the liar: %q; want it to say its summary is out of range", decisionOf(got.Decision, "liar"))
				}
			}
			// Scaling up: what the liar runs stays, the missing replicas go
			// to the others.
			spec := &workv1alpha1.ResourceBindingSpec{Resource: nginx, Replicas: 8, ReplicaRequirements: req,
				Clusters: targets("liar", 2), Placement: &policyv1alpha1.Placement{ReplicaScheduling: dynamic()}}
			got, err := scheduleWithin(t, Input{Key: "default/nginx-deployment", Spec: spec, Clusters: fleet, Now: now})
			if err != nil {
				t.Fatal(err)
			}
			for _, tc := range got.Clusters {
				if tc.Name == "liar" && tc.Replicas != 2 {
					t.Fatalf("scale-up: %v; want the liar to keep its 2 and get no more", got.Clusters)
				}
			}
		})
	}
}

func decisionOf(d *workv1alpha1.SchedulingDecision, cluster string) string {
	if d == nil {
		return ""
	}
	for _, c := range d.Clusters {
		if c.ClusterName == cluster {
			return c.Message
		}
	}
	return ""
}

// A binding stored with an out-of-range requirement (before the CRD
// bounded it): no cluster has room for it, at once.
func TestOutOfRangeRequirementHasNoRoom(t *testing.T) {
	for _, q := range []string{"1e10000000", "9e18", "-1"} {
		req := &workv1alpha1.ReplicaRequirements{ResourceRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}}
		spec := &workv1alpha1.ResourceBindingSpec{Resource: nginx, Replicas: 2, ReplicaRequirements: req,
			Placement: &policyv1alpha1.Placement{ReplicaScheduling: dynamic()}}
		_, err := scheduleWithin(t, Input{Key: "k", Spec: spec, Clusters: []*clusterv1alpha1.Cluster{cluster("a", capacity("110", "4"))}, Now: now, Fresh: true})
		if err == nil || !strings.Contains(err.Error(), "room for 0 of 2") {
			t.Errorf("request %s: %v; want no room", q, err)
		}
	}
}

var (
	crdPattern = regexp.MustCompile(quantities.CRDPattern)
	// cheapToParse are strings ParseQuantity decodes at once into a
	// value whose arithmetic is not cheap: what a Cluster stored before
	// the CRD's pattern may hold.
	cheapToParse = regexp.MustCompile(`^-?[0-9]{1,18}[eE]\+?[0-9]{1,9}$`)
)

// FuzzAvailableReplicas: any strings in a summary (the allocatable,
// allocated and allocating cpu and pods) and any request: the room is
// computed within a bound, without a panic, and is never more than the
// allocatable cpu and pods hold; an out-of-range summary has none.
func FuzzAvailableReplicas(f *testing.F) {
	f.Add("100", "110", "17946744073709651616m", "0", "0", "0", "500m")
	f.Add("100", "110", "-1000", "0", "0", "0", "500m")
	f.Add("1e10000000", "110", "0", "0", "0", "0", "1")
	f.Add("4", "110", "1", "10", "1", "10", "1e10000000")
	f.Add("9P", "9P", "0", "0", "0", "0", "1n")
	f.Add("8", "8", "9e18", "0", "0", "-9e18", "1")
	f.Fuzz(func(t *testing.T, allocCPU, allocPods, usedCPU, usedPods, pendingCPU, pendingPods, request string) {
		parse := func(s string) (resource.Quantity, bool) {
			if len(s) > 64 || !crdPattern.MatchString(s) && !cheapToParse.MatchString(s) && !(strings.HasPrefix(s, "-") && crdPattern.MatchString(s[1:])) {
				return resource.Quantity{}, false // the CRD refuses it, and ParseQuantity may take seconds
			}
			q, err := resource.ParseQuantity(s)
			return q, err == nil
		}
		list := func(cpu, pods string) corev1.ResourceList {
			l := corev1.ResourceList{}
			if q, ok := parse(cpu); ok {
				l[corev1.ResourceCPU] = q
			}
			if q, ok := parse(pods); ok {
				l[corev1.ResourcePods] = q
			}
			return l
		}
		c := cluster("c")
		c.Status.ResourceSummary = &clusterv1alpha1.ResourceSummary{Allocatable: list(allocCPU, allocPods),
			Allocated: list(usedCPU, usedPods), Allocating: list(pendingCPU, pendingPods)}
		var req *workv1alpha1.ReplicaRequirements
		if q, ok := parse(request); ok {
			req = &workv1alpha1.ReplicaRequirements{ResourceRequest: corev1.ResourceList{corev1.ResourceCPU: q}}
		}
		var room int64
		var known bool
		// The shortest of up to three runs: slow by its input every time,
		// slowed by the machine (GC, other processes) once.
		d := time.Duration(1<<63 - 1)
		for i := 0; i < 3 && d > 10*time.Millisecond; i++ {
			start := time.Now()
			room, known = availableReplicas(c, req, nil)
			d = min(d, time.Since(start))
		}
		if d > 100*time.Millisecond {
			t.Fatalf("availableReplicas took %s", d)
		}
		if room < 0 {
			t.Fatalf("room %d < 0", room)
		}
		if !known || room == 0 {
			return
		}
		if quantities.CheckSummary(c.Status.ResourceSummary) != nil {
			t.Fatalf("room %d from a summary out of range", room)
		}
		s := c.Status.ResourceSummary
		if pods, ok := s.Allocatable[corev1.ResourcePods]; ok && room > pods.Value() {
			t.Fatalf("room %d > allocatable pods %s", room, pods.String())
		}
		if req != nil {
			per := req.ResourceRequest[corev1.ResourceCPU]
			cpu, ok := s.Allocatable[corev1.ResourceCPU]
			if per.Sign() > 0 && (!ok || float64(room)*per.AsApproximateFloat64() > cpu.AsApproximateFloat64()*(1+1e-9)+1e-3) {
				t.Fatalf("room %d × %s > allocatable cpu %s", room, per.String(), cpu.String())
			}
		}
	})
}
