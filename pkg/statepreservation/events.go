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

package statepreservation

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// Event reasons, on the binding and its template.
const (
	// EventStatePreserved: a failover read the state it carries.
	EventStatePreserved = "StatePreserved"
	// EventStatePreservationFailed: some rule carried nothing (the
	// failover went ahead without that label).
	EventStatePreservationFailed = "StatePreservationFailed"
)

// Report records what an eviction from cluster carries on the binding and
// on the template that owns it: a Normal event with the labels, and a
// Warning naming every rule that carried nothing. Called once per
// eviction, so a bad rule is reported once, never in a loop.
func Report(rec record.EventRecorder, binding *workv1alpha1.ResourceBinding, cluster string, labels map[string]string, err error) {
	if rec == nil || (err == nil && len(labels) == 0) {
		return
	}
	targets := []runtime.Object{binding}
	if ref := metav1.GetControllerOf(binding); ref != nil {
		targets = append(targets, &corev1.ObjectReference{APIVersion: ref.APIVersion, Kind: ref.Kind,
			Namespace: binding.Namespace, Name: ref.Name, UID: ref.UID})
	}
	for _, target := range targets {
		if len(labels) > 0 {
			rec.Eventf(target, corev1.EventTypeNormal, EventStatePreserved,
				"Eviction from cluster %s carries %s to the replacement copies", cluster, Describe(labels))
		}
		if err != nil {
			rec.Eventf(target, corev1.EventTypeWarning, EventStatePreservationFailed,
				"Eviction from cluster %s carries no value for: %v (the failover goes ahead without those labels)", cluster, oneLine(err))
		}
	}
}

// oneLine joins a joined error's lines.
func oneLine(err error) string {
	return strings.ReplaceAll(err.Error(), "\n", "; ")
}

// Carry is what an eviction of binding from cluster carries to the copies
// that replace it under the policy's rules sp (nil: none), read from the
// last status the hub saw of the copy there. What it carries, and each
// rule it could not read, is reported on the binding and its template; a
// rule that cannot be read is skipped: a failover never waits for state.
func Carry(rec record.EventRecorder, binding *workv1alpha1.ResourceBinding, sp *policyv1alpha1.StatePreservation, cluster string) (map[string]string, string) {
	labels, err := ForEviction(sp, binding.Status.AggregatedStatus, cluster)
	Report(rec, binding, cluster, labels, err)
	return labels, Note(err)
}

// maxNote bounds what Note adds to an eviction task's message (at most
// 1024 characters in all).
const maxNote = 512

// Note is what an eviction task's message says about state that was not
// carried ("" when all was): it stays on the binding, in the task and then
// in status.failoverHistory, after the event has gone.
func Note(err error) string {
	if err == nil {
		return ""
	}
	return truncate("; state not carried: "+oneLine(err), maxNote)
}
