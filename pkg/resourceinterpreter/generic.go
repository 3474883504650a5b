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

package resourceinterpreter

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
)

// kubernetesGroups are the API groups Kubernetes itself serves. A kind of
// one of them that Health does not know (ConfigMap, Secret, a Role, a
// NetworkPolicy...) has nothing to wait for once applied.
var kubernetesGroups = map[string]bool{
	"": true, "apps": true, "batch": true, "autoscaling": true, "policy": true, "extensions": true,
	"admissionregistration.k8s.io": true, "apiextensions.k8s.io": true, "apiregistration.k8s.io": true,
	"certificates.k8s.io": true, "coordination.k8s.io": true, "discovery.k8s.io": true, "events.k8s.io": true,
	"flowcontrol.apiserver.k8s.io": true, "internal.apiserver.k8s.io": true, "networking.k8s.io": true,
	"node.k8s.io": true, "rbac.authorization.k8s.io": true, "resource.k8s.io": true, "scheduling.k8s.io": true,
	"storage.k8s.io": true, "storagemigration.k8s.io": true,
}

// genericHealth judges a kind Health has no interpreter for.
//
// A Kubernetes kind is Healthy once applied unless its status says it
// failed (kstatus: Stalled=True, or a Failed condition).
//
// Any other kind (a custom resource) is judged from the status
// conventions, with sigs.k8s.io/cli-utils' kstatus for the generation and
// the Reconciling/Stalled conditions, and the Ready, Available and Failed
// conditions most controllers set:
//
//   - being deleted, or no status at all: Unknown;
//   - kstatus Failed (Stalled=True), or Failed=True: Unhealthy;
//   - kstatus InProgress (status.observedGeneration behind
//     metadata.generation, or Reconciling=True): Unknown — the controller
//     has not judged the current spec yet, so the copy is neither healthy
//     (graceful eviction and failback wait) nor unhealthy (application
//     failover does not start on a rollout in progress);
//   - a Ready or Available condition: Healthy when every one of them is
//     True, Unhealthy when one is False (kstatus reads Ready=False as
//     InProgress; Flotilla judges it as it judges a built-in kind that is
//     not ready, and application failover's tolerationSeconds absorbs a
//     start or a rollout), Unknown when one is Unknown;
//   - neither, but status.observedGeneration equals metadata.generation
//     (kstatus Current): Healthy — the controller has seen the spec and
//     signals no trouble;
//   - otherwise (a status without conditions or observedGeneration, e.g.
//     only a phase): Unknown — there is nothing to judge; a
//     ResourceInterpreterCustomization can say what the phase means.
func genericHealth(obj *unstructured.Unstructured) workv1alpha1.ResourceHealth {
	res, err := status.Compute(obj)
	if kubernetesGroups[obj.GroupVersionKind().Group] {
		if err == nil && res.Status == status.FailedStatus || conditionTrue(obj.Object, "Failed") {
			return workv1alpha1.ResourceUnhealthy
		}
		return workv1alpha1.ResourceHealthy
	}
	st, ok, _ := unstructured.NestedMap(obj.Object, "status")
	if obj.GetDeletionTimestamp() != nil || !ok || len(st) == 0 || err != nil {
		return workv1alpha1.ResourceUnknown
	}
	if res.Status == status.FailedStatus || conditionTrue(obj.Object, "Failed") {
		return workv1alpha1.ResourceUnhealthy
	}
	// kstatus's InProgress, less its reading of Ready=False (below, where
	// this judgement differs from kstatus: not ready is Unhealthy, as
	// for the built-in kinds; application failover's tolerationSeconds
	// absorbs a start or a rollout).
	observed, hasObserved, _ := unstructured.NestedInt64(obj.Object, "status", "observedGeneration")
	if hasObserved && observed != obj.GetGeneration() || conditionTrue(obj.Object, "Reconciling") {
		return workv1alpha1.ResourceUnknown
	}
	seen := false
	health := workv1alpha1.ResourceHealthy
	for _, c := range []string{"Ready", "Available"} {
		s, found := conditionStatus(obj.Object, c)
		if !found {
			continue
		}
		seen = true
		switch s {
		case "True":
		case "False":
			return workv1alpha1.ResourceUnhealthy
		default:
			health = workv1alpha1.ResourceUnknown
		}
	}
	if seen {
		return health
	}
	if hasObserved && res.Status == status.CurrentStatus {
		return workv1alpha1.ResourceHealthy
	}
	return workv1alpha1.ResourceUnknown
}

// conditionStatus returns the status of the condition of type condType.
func conditionStatus(o map[string]any, condType string) (string, bool) {
	conds, _, _ := unstructured.NestedSlice(o, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == condType {
			s, _ := m["status"].(string)
			return s, true
		}
	}
	return "", false
}
