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
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	appsv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/apps/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// AnnotationRebalancedBy on a binding is the UID of the WorkloadRebalancer
// that last asked for its reschedule. It is written in the same update as
// the request, so a rebalancer that crashed (or lost a status write) after
// triggering a workload finds it done and does not trigger it again.
const AnnotationRebalancedBy = "apps.flotilla.io/rebalanced-by"

// Observe returns status.observedWorkloads for the rebalancer's current
// spec (Karmada's rules): a workload of the spec keeps the result it has;
// one added to the spec starts without a result (and is triggered then);
// one removed from the spec stays only if it was rescheduled, which cannot
// be undone. Sorted, so the status does not churn.
func Observe(r *appsv1alpha1.WorkloadRebalancer) []appsv1alpha1.ObservedWorkload {
	inSpec := func(w appsv1alpha1.ObjectReference) bool { return slices.Contains(r.Spec.Workloads, w) }
	var out []appsv1alpha1.ObservedWorkload
	for _, o := range r.Status.ObservedWorkloads {
		if (inSpec(o.Workload) || o.Result == appsv1alpha1.RebalanceSuccessful) &&
			!slices.ContainsFunc(out, func(p appsv1alpha1.ObservedWorkload) bool { return p.Workload == o.Workload }) {
			out = append(out, o)
		}
	}
	for _, w := range r.Spec.Workloads {
		if !slices.ContainsFunc(out, func(o appsv1alpha1.ObservedWorkload) bool { return o.Workload == w }) {
			out = append(out, appsv1alpha1.ObservedWorkload{Workload: w})
		}
	}
	slices.SortFunc(out, func(a, b appsv1alpha1.ObservedWorkload) int {
		return strings.Compare(refKey(a.Workload), refKey(b.Workload))
	})
	return out
}

func refKey(w appsv1alpha1.ObjectReference) string {
	return w.APIVersion + " " + w.Kind + " " + w.Namespace + " " + w.Name
}

// Matches: binding is the workload's (same group and kind; the name and
// namespace already chose it). A binding of another group's kind of the
// same name (e.g. a CRD also called Deployment) is not the workload.
func Matches(w appsv1alpha1.ObjectReference, binding *workv1alpha1.ResourceBinding) bool {
	wantGV, err1 := schema.ParseGroupVersion(w.APIVersion)
	gotGV, err2 := schema.ParseGroupVersion(binding.Spec.Resource.APIVersion)
	return err1 == nil && err2 == nil && wantGV.Group == gotGV.Group && w.Kind == binding.Spec.Resource.Kind
}

// Outcome is what one sync did for one workload without a result.
type Outcome int

// Outcomes.
const (
	// OutcomeNotFound: no binding of the workload exists (a live read).
	OutcomeNotFound Outcome = iota
	// OutcomeTriggered: the binding was asked to reschedule (now, or by
	// an earlier sync of the same rebalancer).
	OutcomeTriggered
	// OutcomeRetry: a transient error; try again.
	OutcomeRetry
)

// Record writes a workload's outcome into observed and reports whether it
// now has a result. Not found is final, as in Karmada: a template created
// later does not count (create a new WorkloadRebalancer for it).
func Record(observed *appsv1alpha1.ObservedWorkload, outcome Outcome) bool {
	switch outcome {
	case OutcomeNotFound:
		observed.Result, observed.Reason = appsv1alpha1.RebalanceFailed, appsv1alpha1.RebalanceObjectNotFound
	case OutcomeTriggered:
		observed.Result, observed.Reason = appsv1alpha1.RebalanceSuccessful, ""
	default:
		return false
	}
	return true
}

// Trigger asks binding (a copy the caller will write) for a fresh
// schedule on behalf of the rebalancer with uid, at now: rescheduleTriggeredAt,
// rescheduleReason Rebalance, and no eviction history (the workload is
// placed as if new; open failure tasks still keep their clusters out while
// they last). It reports false, changing nothing, when this rebalancer has
// already triggered it.
//
// rescheduleTriggeredAt is stored to the second and the scheduler only
// acts on one after its last schedule: a "now" in the same second as that
// schedule is moved to the next second, or the request would be lost.
func Trigger(binding *workv1alpha1.ResourceBinding, uid types.UID, now time.Time) bool {
	if binding.Annotations[AnnotationRebalancedBy] == string(uid) {
		return false
	}
	at := metav1.NewTime(now.Truncate(time.Second))
	if last := binding.Status.LastScheduledTime; last != nil && !at.After(last.Time) {
		at = metav1.NewTime(last.Truncate(time.Second).Add(time.Second))
	}
	if binding.Annotations == nil {
		binding.Annotations = map[string]string{}
	}
	binding.Annotations[AnnotationRebalancedBy] = string(uid)
	binding.Spec.RescheduleTriggeredAt = &at
	binding.Spec.RescheduleReason = workv1alpha1.EvictionReasonRebalance
	binding.Spec.EvictionHistory = nil
	return true
}

// FinishTime is status.finishTime after a sync that produced observed:
// nil while a workload has no result; otherwise the previous finish time
// if nothing changed, else now (a workload added later finishes again).
func FinishTime(old *appsv1alpha1.WorkloadRebalancerStatus, observed []appsv1alpha1.ObservedWorkload, now time.Time) *metav1.Time {
	for _, o := range observed {
		if o.Result == "" {
			return nil
		}
	}
	if old.FinishTime != nil && slices.Equal(old.ObservedWorkloads, observed) {
		return old.FinishTime
	}
	t := metav1.NewTime(now)
	return &t
}

// DeleteAt is when a finished rebalancer with ttlSecondsAfterFinished is
// deleted; false when it is kept.
func DeleteAt(r *appsv1alpha1.WorkloadRebalancer) (time.Time, bool) {
	if r.Spec.TTLSecondsAfterFinished == nil || r.Status.FinishTime == nil {
		return time.Time{}, false
	}
	return r.Status.FinishTime.Add(time.Duration(*r.Spec.TTLSecondsAfterFinished) * time.Second), true
}

// describe names a workload for events and logs.
func describe(w appsv1alpha1.ObjectReference) string {
	if w.Namespace == "" {
		return fmt.Sprintf("%s %s %s", w.APIVersion, w.Kind, w.Name)
	}
	return fmt.Sprintf("%s %s %s/%s", w.APIVersion, w.Kind, w.Namespace, w.Name)
}
