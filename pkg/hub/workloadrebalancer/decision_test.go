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

package workloadrebalancer

import (
	"testing"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/apps/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

func ref(name string) appsv1alpha1.ObjectReference {
	return appsv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: name}
}

func observed(name string, result appsv1alpha1.RebalanceResult) appsv1alpha1.ObservedWorkload {
	o := appsv1alpha1.ObservedWorkload{Workload: ref(name), Result: result}
	if result == appsv1alpha1.RebalanceFailed {
		o.Reason = appsv1alpha1.RebalanceObjectNotFound
	}
	return o
}

func TestObserve(t *testing.T) {
	for _, c := range []struct {
		name   string
		spec   []appsv1alpha1.ObjectReference
		status []appsv1alpha1.ObservedWorkload
		want   []appsv1alpha1.ObservedWorkload
	}{
		{"new: every workload pending, sorted", []appsv1alpha1.ObjectReference{ref("b"), ref("a")}, nil,
			[]appsv1alpha1.ObservedWorkload{observed("a", ""), observed("b", "")}},
		{"results are kept (a requeue or a restart triggers nothing again)", []appsv1alpha1.ObjectReference{ref("a"), ref("b")},
			[]appsv1alpha1.ObservedWorkload{observed("a", appsv1alpha1.RebalanceSuccessful), observed("b", appsv1alpha1.RebalanceFailed)},
			[]appsv1alpha1.ObservedWorkload{observed("a", appsv1alpha1.RebalanceSuccessful), observed("b", appsv1alpha1.RebalanceFailed)}},
		{"a workload added later is pending", []appsv1alpha1.ObjectReference{ref("a"), ref("c")},
			[]appsv1alpha1.ObservedWorkload{observed("a", appsv1alpha1.RebalanceSuccessful)},
			[]appsv1alpha1.ObservedWorkload{observed("a", appsv1alpha1.RebalanceSuccessful), observed("c", "")}},
		{"a removed workload stays only if it was rescheduled", []appsv1alpha1.ObjectReference{ref("c")},
			[]appsv1alpha1.ObservedWorkload{observed("a", appsv1alpha1.RebalanceSuccessful), observed("b", appsv1alpha1.RebalanceFailed), observed("d", "")},
			[]appsv1alpha1.ObservedWorkload{observed("a", appsv1alpha1.RebalanceSuccessful), observed("c", "")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &appsv1alpha1.WorkloadRebalancer{Spec: appsv1alpha1.WorkloadRebalancerSpec{Workloads: c.spec},
				Status: appsv1alpha1.WorkloadRebalancerStatus{ObservedWorkloads: c.status}}
			if got := Observe(r); !apiequality.Semantic.DeepEqual(got, c.want) {
				t.Errorf("Observe = %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestRecord(t *testing.T) {
	for _, c := range []struct {
		outcome Outcome
		result  appsv1alpha1.RebalanceResult
		reason  appsv1alpha1.RebalanceFailedReason
		done    bool
	}{
		{OutcomeTriggered, appsv1alpha1.RebalanceSuccessful, "", true},
		{OutcomeNotFound, appsv1alpha1.RebalanceFailed, appsv1alpha1.RebalanceObjectNotFound, true},
		{OutcomeRetry, "", "", false},
	} {
		o := observed("a", "")
		if done := Record(&o, c.outcome); done != c.done || o.Result != c.result || o.Reason != c.reason {
			t.Errorf("Record(%d) = %v %+v", c.outcome, done, o)
		}
	}
}

func TestMatches(t *testing.T) {
	b := &workv1alpha1.ResourceBinding{Spec: workv1alpha1.ResourceBindingSpec{Resource: workv1alpha1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment"}}}
	for _, c := range []struct {
		apiVersion, kind string
		want             bool
	}{
		{"apps/v1", "Deployment", true},
		{"apps/v1beta2", "Deployment", true}, // same group, another version
		{"example.com/v1", "Deployment", false},
		{"apps/v1", "StatefulSet", false},
		{"a/b/c", "Deployment", false},
	} {
		w := ref("nginx")
		w.APIVersion, w.Kind = c.apiVersion, c.kind
		if got := Matches(w, b); got != c.want {
			t.Errorf("Matches(%s %s) = %v, want %v", c.apiVersion, c.kind, got, c.want)
		}
	}
}

func TestTrigger(t *testing.T) {
	now := time.Date(2026, 11, 24, 4, 30, 0, 700_000_000, time.UTC)
	binding := func(lastScheduled time.Time) *workv1alpha1.ResourceBinding {
		last := metav1.NewTime(lastScheduled)
		return &workv1alpha1.ResourceBinding{
			Spec: workv1alpha1.ResourceBindingSpec{EvictionHistory: []workv1alpha1.EvictionHistoryEntry{{ClusterName: "member1"}},
				GracefulEvictionTasks: []workv1alpha1.GracefulEvictionTask{{FromCluster: "member3"}}},
			Status: workv1alpha1.ResourceBindingStatus{LastScheduledTime: &last}}
	}

	b := binding(now.Add(-time.Minute))
	if !Trigger(b, "uid-1", now) {
		t.Fatal("not triggered")
	}
	if want := now.Truncate(time.Second); !b.Spec.RescheduleTriggeredAt.Time.Equal(want) || b.Spec.RescheduleReason != workv1alpha1.EvictionReasonRebalance ||
		len(b.Spec.EvictionHistory) != 0 || b.Annotations[AnnotationRebalancedBy] != "uid-1" {
		t.Errorf("binding after the trigger: %+v %+v", b.ObjectMeta, b.Spec)
	}
	if len(b.Spec.GracefulEvictionTasks) != 1 {
		t.Error("open tasks must stay: their copies still run")
	}
	if Trigger(b, "uid-1", now.Add(time.Hour)) {
		t.Error("the same rebalancer triggered the binding twice")
	}
	if !Trigger(b, "uid-2", now.Add(time.Hour)) {
		t.Error("another rebalancer must trigger it again")
	}

	// Scheduled within the same second: the trigger must still be after it.
	b = binding(now.Add(-100 * time.Millisecond))
	Trigger(b, "uid-1", now)
	if !b.Spec.RescheduleTriggeredAt.After(b.Status.LastScheduledTime.Truncate(time.Second)) {
		t.Errorf("rescheduleTriggeredAt %s is not after the last schedule %s (stored to the second)", b.Spec.RescheduleTriggeredAt, b.Status.LastScheduledTime)
	}
}

func TestFinishTimeAndDeleteAt(t *testing.T) {
	now := time.Date(2026, 11, 24, 4, 30, 0, 0, time.UTC)
	before := metav1.NewTime(now.Add(-time.Hour))
	done := []appsv1alpha1.ObservedWorkload{observed("a", appsv1alpha1.RebalanceSuccessful), observed("b", appsv1alpha1.RebalanceFailed)}
	pending := []appsv1alpha1.ObservedWorkload{observed("a", appsv1alpha1.RebalanceSuccessful), observed("c", "")}

	if got := FinishTime(&appsv1alpha1.WorkloadRebalancerStatus{}, pending, now); got != nil {
		t.Errorf("finished with a workload pending: %s", got)
	}
	if got := FinishTime(&appsv1alpha1.WorkloadRebalancerStatus{}, done, now); got == nil || !got.Time.Equal(now) {
		t.Errorf("FinishTime = %v, want now", got)
	}
	same := &appsv1alpha1.WorkloadRebalancerStatus{ObservedWorkloads: done, FinishTime: &before}
	if got := FinishTime(same, done, now); got == nil || !got.Equal(&before) {
		t.Errorf("FinishTime = %v, want the previous one (nothing changed)", got)
	}
	added := append(done[:1:1], observed("c", appsv1alpha1.RebalanceSuccessful))
	if got := FinishTime(same, added, now); got == nil || !got.Time.Equal(now) {
		t.Errorf("FinishTime = %v, want now (a workload added later finished)", got)
	}

	ttl := int32(30)
	r := &appsv1alpha1.WorkloadRebalancer{Spec: appsv1alpha1.WorkloadRebalancerSpec{TTLSecondsAfterFinished: &ttl}}
	if _, ok := DeleteAt(r); ok {
		t.Error("an unfinished rebalancer is deleted")
	}
	r.Status.FinishTime = &before
	if at, ok := DeleteAt(r); !ok || !at.Equal(before.Add(30*time.Second)) {
		t.Errorf("DeleteAt = %s %v", at, ok)
	}
	r.Spec.TTLSecondsAfterFinished = nil
	if _, ok := DeleteAt(r); ok {
		t.Error("a rebalancer without a TTL is deleted")
	}
}
