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

package applicationfailover

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

func TestDecidePreConditions(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(-d)} }
	unhealthy := func(since, first time.Duration, ever bool) *workv1alpha1.AggregatedStatusItem {
		it := &workv1alpha1.AggregatedStatusItem{ClusterName: "m1", Applied: true, Health: workv1alpha1.ResourceUnhealthy,
			UnhealthySince: ago(since), ObservedGeneration: 3, EverHealthy: ever}
		if first >= 0 {
			it.FirstReportedTime = ago(first)
		}
		return it
	}
	delay := func(s int32) *policyv1alpha1.PreConditions {
		return &policyv1alpha1.PreConditions{DelaySeconds: ptr.To(s)}
	}
	healthyOnce := &policyv1alpha1.PreConditions{HealthyState: policyv1alpha1.HealthyStateHealthy}
	for _, c := range []struct {
		name    string
		item    *workv1alpha1.AggregatedStatusItem
		pre     *policyv1alpha1.PreConditions
		due     bool
		after   time.Duration
		waiting string // substring; "" wants none
	}{
		{name: "no preConditions: toleration from unhealthySince", item: unhealthy(time.Minute, time.Hour, false), due: true},
		{name: "healthy: nothing to decide", item: &workv1alpha1.AggregatedStatusItem{ClusterName: "m1", Health: workv1alpha1.ResourceHealthy, ObservedGeneration: 3},
			pre: delay(600)},
		// Unknown (a kind nothing can judge, a rule failing on the
		// object) never starts application failover by itself, however
		// long it lasts.
		{name: "unknown: nothing to decide", item: &workv1alpha1.AggregatedStatusItem{ClusterName: "m1", Applied: true, Health: workv1alpha1.ResourceUnknown,
			UnhealthySince: ago(time.Hour), FirstReportedTime: ago(time.Hour), ObservedGeneration: 3}},
		// delaySeconds: unhealthy since its first report, 100 s ago; the
		// delay of 600 s holds the toleration (30 s) back until 530 s
		// from now.
		{name: "delay not over: counting starts at its end", item: unhealthy(100*time.Second, 100*time.Second, false), pre: delay(600),
			after: 530 * time.Second, waiting: "preConditions.delaySeconds: 600"},
		{name: "delay over, toleration still running", item: unhealthy(700*time.Second, 700*time.Second, false), pre: delay(680),
			after: 10 * time.Second},
		{name: "delay over, toleration over", item: unhealthy(700*time.Second, 700*time.Second, false), pre: delay(600), due: true},
		{name: "turned unhealthy after the delay: toleration from unhealthySince", item: unhealthy(20*time.Second, time.Hour, false), pre: delay(600),
			after: 10 * time.Second},
		{name: "delay 0 is no delay", item: unhealthy(time.Minute, time.Minute, false), pre: delay(0), due: true},
		{name: "no first report yet: wait", item: unhealthy(time.Hour, -1, false), pre: delay(60), waiting: "first status report"},
		{name: "never healthy: never counts", item: unhealthy(time.Hour, time.Hour, false), pre: healthyOnce, waiting: "never been Healthy"},
		{name: "healthy once: counts", item: unhealthy(time.Hour, time.Hour, true), pre: healthyOnce, due: true},
		{name: "both: healthy once but in the delay", item: unhealthy(time.Minute, time.Minute, true),
			pre:   &policyv1alpha1.PreConditions{DelaySeconds: ptr.To[int32](120), HealthyState: policyv1alpha1.HealthyStateHealthy},
			after: 90 * time.Second, waiting: "delaySeconds"},
		{name: "both: never healthy wins over an elapsed delay", item: unhealthy(time.Hour, time.Hour, false),
			pre: &policyv1alpha1.PreConditions{DelaySeconds: ptr.To[int32](1), HealthyState: policyv1alpha1.HealthyStateHealthy}, waiting: "never been Healthy"},
		{name: "older generation does not count, even with preConditions", item: func() *workv1alpha1.AggregatedStatusItem {
			it := unhealthy(time.Hour, time.Hour, true)
			it.ObservedGeneration = 2
			return it
		}(), pre: healthyOnce},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := Decide(c.item, 3, 30, c.pre, now)
			if v.Due != c.due || v.After != c.after {
				t.Errorf("Decide = due %v after %s, want due %v after %s", v.Due, v.After, c.due, c.after)
			}
			if c.waiting == "" && v.Waiting != "" || c.waiting != "" && !strings.Contains(v.Waiting, c.waiting) {
				t.Errorf("Waiting = %q, want it to contain %q", v.Waiting, c.waiting)
			}
		})
	}
}

// A cluster blockPredecessorSeconds keeps the workload off counts as one
// it failed on, however old its history entry: the scheduler will not
// take it back there, so a failure on the next cluster is the second.
func TestUnhealthyEverywhereCountsBlockedClusters(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	old := []workv1alpha1.EvictionHistoryEntry{{ClusterName: "z", Reason: workv1alpha1.EvictionReasonApplicationFailure, EvictedAt: metav1.NewTime(now.Add(-time.Hour))}}
	status := []workv1alpha1.AggregatedStatusItem{{ClusterName: "a", Health: workv1alpha1.ResourceUnhealthy, ObservedGeneration: 3}}
	for _, tc := range []struct {
		name  string
		block *int32
		want  bool
	}{
		{name: "no block: the old entry is past the TTL"},
		{name: "blocked for good", block: ptr.To[int32](0), want: true},
		{name: "blocked for two hours", block: ptr.To[int32](7200), want: true},
		{name: "block ended", block: ptr.To[int32](60)},
	} {
		spec := workv1alpha1.ResourceBindingSpec{Clusters: []workv1alpha1.TargetCluster{{Name: "a"}}, EvictionHistory: old,
			Failover: &policyv1alpha1.FailoverBehavior{Application: &policyv1alpha1.ApplicationFailoverBehavior{BlockPredecessorSeconds: tc.block}}}
		if got := UnhealthyEverywhere(&spec, status, 3, now, 10*time.Minute); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
