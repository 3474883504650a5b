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

package failoverhistory

import (
	"fmt"
	"testing"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

var t0 = time.Date(2026, 11, 24, 4, 0, 0, 0, time.UTC)

func at(s int) metav1.Time { return metav1.NewTime(t0.Add(time.Duration(s) * time.Second)) }
func atp(s int) *metav1.Time {
	t := at(s)
	return &t
}

// status is a Deployment's reported status with avail available replicas,
// for the binding's generation gen, with health h.
func status(cluster string, avail int, gen int64, h workv1alpha1.ResourceHealth) workv1alpha1.AggregatedStatusItem {
	return workv1alpha1.AggregatedStatusItem{ClusterName: cluster, Applied: true, ObservedGeneration: gen, Health: h,
		Status: &runtime.RawExtension{Raw: []byte(fmt.Sprintf(`{"replicas":%d,"availableReplicas":%d}`, avail, avail))}}
}

type bindingOpt func(*workv1alpha1.ResourceBinding)

// nginx is a Deployment of 3 replicas at generation 5 with the given
// options; placed says whether the scheduler has placed generation 5.
func nginx(placed bool, opts ...bindingOpt) *workv1alpha1.ResourceBinding {
	b := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "nginx-deployment", Generation: 5},
		Spec: workv1alpha1.ResourceBindingSpec{Resource: workv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "nginx"},
			Replicas: 3}}
	b.Status.SchedulerObservedGeneration = 4
	if placed {
		b.Status.SchedulerObservedGeneration = 5
		b.Status.Conditions = []metav1.Condition{{Type: workv1alpha1.BindingConditionScheduled, Status: metav1.ConditionTrue}}
	}
	for _, o := range opts {
		o(b)
	}
	return b
}

func on(clusters map[string]int32) bindingOpt {
	return func(b *workv1alpha1.ResourceBinding) {
		for _, name := range []string{"member1", "member2", "member3"} {
			if n, ok := clusters[name]; ok {
				b.Spec.Clusters = append(b.Spec.Clusters, workv1alpha1.TargetCluster{Name: name, Replicas: n})
			}
		}
	}
}

func reported(items ...workv1alpha1.AggregatedStatusItem) bindingOpt {
	return func(b *workv1alpha1.ResourceBinding) { b.Status.AggregatedStatus = items }
}

func task(from, reason string, created int) bindingOpt {
	return func(b *workv1alpha1.ResourceBinding) {
		b.Spec.GracefulEvictionTasks = append(b.Spec.GracefulEvictionTasks, workv1alpha1.GracefulEvictionTask{
			FromCluster: from, Reason: reason, Message: "taint cluster.flotilla.io/not-ready:NoExecute", Producer: "TaintManager",
			PurgeMode: policyv1alpha1.PurgeModeGracefully, ClustersBeforeFailover: []string{"member1", "member2"},
			CreationTimestamp: atp(created)})
	}
}

// evicted records an eviction-history entry (the task may be gone).
func evicted(cluster string, at_ int) bindingOpt {
	return func(b *workv1alpha1.ResourceBinding) {
		b.Spec.EvictionHistory = append(b.Spec.EvictionHistory, workv1alpha1.EvictionHistoryEntry{
			ClusterName: cluster, Reason: workv1alpha1.EvictionReasonTaintUntolerated, EvictedAt: at(at_)})
	}
}

// opened is the item a TaintUntolerated task from member1 at 10 s opens.
// withTaskReplicas gives the last task of opt replicas.
func withTaskReplicas(opt bindingOpt, replicas int32) bindingOpt {
	return func(b *workv1alpha1.ResourceBinding) {
		opt(b)
		b.Spec.GracefulEvictionTasks[len(b.Spec.GracefulEvictionTasks)-1].Replicas = &replicas
	}
}

func opened() workv1alpha1.FailoverHistoryItem {
	return workv1alpha1.FailoverHistoryItem{Reason: workv1alpha1.EvictionReasonTaintUntolerated,
		Message: "taint cluster.flotilla.io/not-ready:NoExecute", OriginCluster: "member1",
		ClustersBeforeFailover: []string{"member1", "member2"}, PurgeMode: policyv1alpha1.PurgeModeGracefully, StartTime: at(10)}
}

func with(it workv1alpha1.FailoverHistoryItem, f func(*workv1alpha1.FailoverHistoryItem)) workv1alpha1.FailoverHistoryItem {
	f(&it)
	return it
}

func closedItems(n int) []workv1alpha1.FailoverHistoryItem {
	var out []workv1alpha1.FailoverHistoryItem
	for i := range n {
		out = append(out, workv1alpha1.FailoverHistoryItem{Reason: "TaintUntolerated", OriginCluster: fmt.Sprintf("old%d", i),
			StartTime: at(-1000 + i), EndTime: atp(-900 + i)})
	}
	return out
}

func TestNext(t *testing.T) {
	healthy, unhealthy := workv1alpha1.ResourceHealthy, workv1alpha1.ResourceUnhealthy
	tests := []struct {
		name      string
		history   []workv1alpha1.FailoverHistoryItem
		binding   *workv1alpha1.ResourceBinding
		oldCopies []workv1alpha1.AggregatedStatusItem
		outages   map[string]time.Time
		now       int
		want      []workv1alpha1.FailoverHistoryItem
	}{{
		name:    "no task, no history: nothing",
		binding: nginx(true, on(map[string]int32{"member1": 1, "member2": 2})),
		now:     11,
	}, {
		name: "a failure eviction whose task ended before it was seen (a Healthy survivor): its eviction-history entry opens the item, closed at once",
		binding: nginx(true, on(map[string]int32{"member2": 3}), evicted("member1", 10),
			reported(status("member2", 3, 5, healthy))),
		now: 12,
		want: []workv1alpha1.FailoverHistoryItem{{Reason: workv1alpha1.EvictionReasonTaintUntolerated, OriginCluster: "member1",
			Message:   "the eviction's graceful task ended before its item was recorded",
			StartTime: at(10), ClustersAfterFailover: []string{"member2"}, EndTime: atp(12)}},
	}, {
		name: "an eviction-history entry whose item exists opens nothing",
		history: []workv1alpha1.FailoverHistoryItem{with(opened(), func(it *workv1alpha1.FailoverHistoryItem) {
			it.ClustersAfterFailover, it.EndTime = []string{"member2"}, atp(22)
		})},
		binding: nginx(true, on(map[string]int32{"member2": 3}), evicted("member1", 10), reported(status("member2", 3, 5, healthy))),
		now:     30,
		want: []workv1alpha1.FailoverHistoryItem{with(opened(), func(it *workv1alpha1.FailoverHistoryItem) {
			it.ClustersAfterFailover, it.EndTime = []string{"member2"}, atp(22)
		})},
	}, {
		name:    "a full history does not reopen an entry older than its oldest item (dropped on purpose)",
		history: closedItems(workv1alpha1.FailoverHistoryLimit),
		binding: nginx(true, on(map[string]int32{"member2": 3}), evicted("member1", -2000), reported(status("member2", 3, 5, healthy))),
		now:     30,
		want:    closedItems(workv1alpha1.FailoverHistoryLimit),
	}, {
		name: "a cluster failover opens an item; 2 of 3 available (member1 is dead) is degraded from the start",
		binding: nginx(false, on(map[string]int32{"member2": 2}), task("member1", "TaintUntolerated", 10),
			reported(status("member1", 1, 4, healthy), status("member2", 2, 4, healthy))),
		now:  11,
		want: []workv1alpha1.FailoverHistoryItem{with(opened(), func(it *workv1alpha1.FailoverHistoryItem) { it.DegradedSince = atp(10) })},
	}, {
		name: "the failed cluster's outage before the eviction is degraded time already: the hub tainted member1 at 2, evicted at 10",
		binding: nginx(false, on(map[string]int32{"member2": 2}), withTaskReplicas(task("member1", "TaintUntolerated", 10), 1),
			reported(status("member2", 2, 4, healthy))),
		outages: map[string]time.Time{"member1": t0.Add(2*time.Second + 700*time.Millisecond)},
		now:     11,
		want: []workv1alpha1.FailoverHistoryItem{with(opened(), func(it *workv1alpha1.FailoverHistoryItem) {
			it.DegradedSince, it.DegradedSeconds = atp(10), 8
		})},
	}, {
		name: "an outage on a cluster that held no replicas is not degraded time",
		binding: nginx(false, on(map[string]int32{"member2": 2}), task("member1", "TaintUntolerated", 10),
			reported(status("member2", 2, 4, healthy))),
		outages: map[string]time.Time{"member1": t0.Add(2 * time.Second)},
		now:     11,
		want:    []workv1alpha1.FailoverHistoryItem{with(opened(), func(it *workv1alpha1.FailoverHistoryItem) { it.DegradedSince = atp(10) })},
	}, {
		name:    "the scheduler placed the binding after the task: clustersAfterFailover, still degraded",
		history: []workv1alpha1.FailoverHistoryItem{with(opened(), func(it *workv1alpha1.FailoverHistoryItem) { it.DegradedSince = atp(10) })},
		binding: nginx(true, on(map[string]int32{"member2": 3}), task("member1", "TaintUntolerated", 10),
			reported(status("member2", 2, 4, healthy))),
		now: 12,
		want: []workv1alpha1.FailoverHistoryItem{with(opened(), func(it *workv1alpha1.FailoverHistoryItem) {
			it.DegradedSince, it.ClustersAfterFailover = atp(10), []string{"member2"}
		})},
	}, {
		name: "every wanted replica available on the current generation: closed, degraded time added",
		history: []workv1alpha1.FailoverHistoryItem{with(opened(), func(it *workv1alpha1.FailoverHistoryItem) {
			it.DegradedSince, it.ClustersAfterFailover = atp(10), []string{"member2"}
		})},
		binding: nginx(true, on(map[string]int32{"member2": 3}), reported(status("member2", 3, 5, healthy))),
		now:     22,
		want: []workv1alpha1.FailoverHistoryItem{with(opened(), func(it *workv1alpha1.FailoverHistoryItem) {
			it.ClustersAfterFailover, it.EndTime, it.DegradedSeconds = []string{"member2"}, atp(22), 12
		})},
	}, {
		name: "Healthy but for an older generation does not close it",
		history: []workv1alpha1.FailoverHistoryItem{with(opened(), func(it *workv1alpha1.FailoverHistoryItem) {
			it.DegradedSince, it.ClustersAfterFailover = atp(10), []string{"member2"}
		})},
		binding: nginx(true, on(map[string]int32{"member2": 3}), reported(status("member2", 3, 4, healthy))),
		now:     22,
		// 3 of 3 available (old generation): no longer degraded.
		want: []workv1alpha1.FailoverHistoryItem{with(opened(), func(it *workv1alpha1.FailoverHistoryItem) {
			it.ClustersAfterFailover, it.DegradedSeconds = []string{"member2"}, 12
		})},
	}, {
		name: "the old copy on a Ready cluster serves while the new one comes up: not degraded (application failover, rebalance, failback)",
		binding: nginx(true, on(map[string]int32{"member2": 1, "member3": 2}), task("member1", "Failback", 10),
			reported(status("member2", 1, 5, healthy), status("member3", 0, 5, unhealthy))),
		oldCopies: []workv1alpha1.AggregatedStatusItem{status("member1", 2, 4, healthy)},
		now:       11,
		want: []workv1alpha1.FailoverHistoryItem{with(opened(), func(it *workv1alpha1.FailoverHistoryItem) {
			it.Reason, it.ClustersAfterFailover = "Failback", []string{"member2", "member3"}
		})},
	}, {
		name: "an eviction cancelled (nothing replaced it, the cluster recovered): the item follows the placement back",
		history: []workv1alpha1.FailoverHistoryItem{with(opened(), func(it *workv1alpha1.FailoverHistoryItem) {
			it.DegradedSince, it.ClustersAfterFailover = atp(10), []string{"member2"}
		})},
		binding: nginx(true, on(map[string]int32{"member1": 1, "member2": 2}),
			reported(status("member1", 1, 4, healthy), status("member2", 2, 5, healthy))),
		now: 70,
		want: []workv1alpha1.FailoverHistoryItem{with(opened(), func(it *workv1alpha1.FailoverHistoryItem) {
			it.ClustersAfterFailover, it.DegradedSeconds = []string{"member1", "member2"}, 60
		})},
	}, {
		name: "a closed item never changes",
		history: []workv1alpha1.FailoverHistoryItem{with(opened(), func(it *workv1alpha1.FailoverHistoryItem) {
			it.ClustersAfterFailover, it.EndTime, it.DegradedSeconds = []string{"member2"}, atp(22), 12
		})},
		binding: nginx(true, on(map[string]int32{"member2": 3}), task("member1", "TaintUntolerated", 10),
			reported(status("member2", 0, 5, unhealthy))),
		now: 40,
		want: []workv1alpha1.FailoverHistoryItem{with(opened(), func(it *workv1alpha1.FailoverHistoryItem) {
			it.ClustersAfterFailover, it.EndTime, it.DegradedSeconds = []string{"member2"}, atp(22), 12
		})},
	}, {
		name: "degraded again later in the same failover: counted from when it was seen",
		history: []workv1alpha1.FailoverHistoryItem{with(opened(), func(it *workv1alpha1.FailoverHistoryItem) {
			it.ClustersAfterFailover, it.DegradedSeconds = []string{"member2"}, 5
		})},
		binding: nginx(true, on(map[string]int32{"member2": 3}), reported(status("member2", 1, 5, unhealthy))),
		now:     30,
		want: []workv1alpha1.FailoverHistoryItem{with(opened(), func(it *workv1alpha1.FailoverHistoryItem) {
			it.ClustersAfterFailover, it.DegradedSeconds, it.DegradedSince = []string{"member2"}, 5, atp(30)
		})},
	}, {
		name: "a task without reason is Rescheduled; the purge mode is spelled as Karmada does now",
		binding: nginx(false, on(map[string]int32{"member2": 3}), task("member1", "", 10), func(b *workv1alpha1.ResourceBinding) {
			b.Spec.GracefulEvictionTasks[0].PurgeMode = policyv1alpha1.PurgeModeImmediately
		}, reported(status("member2", 3, 4, healthy))),
		now: 11,
		want: []workv1alpha1.FailoverHistoryItem{with(opened(), func(it *workv1alpha1.FailoverHistoryItem) {
			it.Reason, it.PurgeMode = ReasonRescheduled, policyv1alpha1.PurgeModeDirectly
		})},
	}, {
		name:    "state preservation filling the task later reaches the open item",
		history: []workv1alpha1.FailoverHistoryItem{opened()},
		binding: nginx(false, on(map[string]int32{"member2": 3}), task("member1", "TaintUntolerated", 10), func(b *workv1alpha1.ResourceBinding) {
			b.Spec.GracefulEvictionTasks[0].PreservedLabelState = map[string]string{"checkpoint": "s3://a/b"}
		}, reported(status("member2", 3, 4, healthy))),
		now: 12,
		want: []workv1alpha1.FailoverHistoryItem{with(opened(), func(it *workv1alpha1.FailoverHistoryItem) {
			it.PreservedLabelState = map[string]string{"checkpoint": "s3://a/b"}
		})},
	}, {
		name:    "bounded: the oldest item goes",
		history: closedItems(workv1alpha1.FailoverHistoryLimit),
		binding: nginx(false, on(map[string]int32{"member2": 3}), task("member1", "TaintUntolerated", 10), reported(status("member2", 3, 4, healthy))),
		now:     11,
		want:    append(closedItems(workv1alpha1.FailoverHistoryLimit)[1:], opened()),
	}, {
		name:    "bounded: a task older than every kept item is not opened again and again",
		history: closedItems(workv1alpha1.FailoverHistoryLimit),
		binding: nginx(false, on(map[string]int32{"member2": 3}), task("member1", "TaintUntolerated", -2000), reported(status("member2", 3, 4, healthy))),
		now:     11,
		want:    closedItems(workv1alpha1.FailoverHistoryLimit),
	}, {
		name: "two clusters fail: one item each, both closed by one restored placement",
		history: []workv1alpha1.FailoverHistoryItem{opened(), with(opened(), func(it *workv1alpha1.FailoverHistoryItem) {
			it.OriginCluster, it.StartTime = "member2", at(15)
		})},
		binding: nginx(true, on(map[string]int32{"member3": 3}), reported(status("member3", 3, 5, healthy))),
		now:     30,
		want: []workv1alpha1.FailoverHistoryItem{
			with(opened(), func(it *workv1alpha1.FailoverHistoryItem) {
				it.ClustersAfterFailover, it.EndTime = []string{"member3"}, atp(30)
			}),
			with(opened(), func(it *workv1alpha1.FailoverHistoryItem) {
				it.OriginCluster, it.StartTime, it.ClustersAfterFailover, it.EndTime = "member2", at(15), []string{"member3"}, atp(30)
			}),
		},
	}, {
		name: "a kind without replicas is judged by health",
		binding: func() *workv1alpha1.ResourceBinding {
			b := nginx(true, on(map[string]int32{"member2": 0}), task("member1", "ApplicationFailure", 10),
				reported(workv1alpha1.AggregatedStatusItem{ClusterName: "member2", Applied: true, ObservedGeneration: 5, Health: unhealthy}))
			b.Spec.Resource, b.Spec.Replicas = workv1alpha1.ObjectReference{APIVersion: "v1", Kind: "Service", Name: "web"}, 0
			return b
		}(),
		now: 11,
		want: []workv1alpha1.FailoverHistoryItem{with(opened(), func(it *workv1alpha1.FailoverHistoryItem) {
			it.Reason, it.ClustersAfterFailover, it.DegradedSince = "ApplicationFailure", []string{"member2"}, atp(10)
		})},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Next(tt.history, tt.binding, tt.oldCopies, tt.outages, t0.Add(time.Duration(tt.now)*time.Second+300*time.Millisecond))
			if !apiequality.Semantic.DeepEqual(got, tt.want) {
				t.Fatalf("Next:\n got %+v\nwant %+v", got, tt.want)
			}
			// Its own output, observed again at the same moment, changes
			// nothing: no second status write.
			again := Next(got, tt.binding, tt.oldCopies, tt.outages, t0.Add(time.Duration(tt.now)*time.Second+300*time.Millisecond))
			if !apiequality.Semantic.DeepEqual(again, got) {
				t.Fatalf("Next is not idempotent:\n first %+v\nsecond %+v", got, again)
			}
		})
	}
}

func TestCompletedMessage(t *testing.T) {
	it := with(opened(), func(it *workv1alpha1.FailoverHistoryItem) {
		it.ClustersAfterFailover, it.EndTime, it.DegradedSeconds = []string{"member2"}, atp(22), 4
	})
	got := CompletedMessage(&it, Availability{ReplicaKind: true, Available: 3, Wanted: 3})
	if want := "Failed over from member1 to member2 (TaintUntolerated); 3/3 available after 12s, degraded 4s"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestCompletedMessageCancelled(t *testing.T) {
	it := with(opened(), func(it *workv1alpha1.FailoverHistoryItem) {
		it.ClustersAfterFailover, it.EndTime, it.DegradedSeconds = []string{"member1", "member2"}, atp(70), 60
	})
	got := CompletedMessage(&it, Availability{ReplicaKind: true, Available: 3, Wanted: 3})
	if want := "Failed over from member1 back on member1,member2 (TaintUntolerated); 3/3 available after 1m0s, degraded 60s"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestSchedulerBehind(t *testing.T) {
	placed := &workv1alpha1.ResourceBinding{ObjectMeta: metav1.ObjectMeta{Generation: 3},
		Spec:   workv1alpha1.ResourceBindingSpec{Placement: &policyv1alpha1.Placement{}},
		Status: workv1alpha1.ResourceBindingStatus{SchedulerObservedGeneration: 3}}
	evicted := placed.DeepCopy()
	evicted.Generation = 4 // the taint manager's eviction, not scheduled yet
	noPlacement := evicted.DeepCopy()
	noPlacement.Spec.Placement = nil // a dependency's binding: never scheduled
	for name, tc := range map[string]struct {
		b    *workv1alpha1.ResourceBinding
		want bool
	}{"placed": {placed, false}, "evicted, not yet placed": {evicted, true}, "no placement": {noPlacement, false}} {
		if got := SchedulerBehind(tc.b); got != tc.want {
			t.Errorf("%s: SchedulerBehind = %v, want %v", name, got, tc.want)
		}
	}
}
