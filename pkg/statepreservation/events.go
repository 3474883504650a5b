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
