// Package resourceinterpreter holds Flotilla's knowledge of kinds: whether
// an object on a member is healthy, which part of its status travels back
// to the hub, its replicas and dependencies. The free functions are the
// built-in interpreter of Kubernetes' kinds (with a generic health
// judgement for the others); an Interpreter puts the
// ResourceInterpreterCustomizations it is fed first. The agent uses it to
// report each manifest; the hub to divide, render and aggregate.
//
// Health is generation-aware: a workload's status counts only once its
// controller has observed the current generation, so a status written for
// the previous spec never reads as healthy (Karmada issue #7455's cousin).
package resourceinterpreter

import (
	"encoding/json"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/statuslimits"
)

// maxReflectedStatus bounds the status of kinds without a built-in
// interpreter that is copied to the hub; the largest fields of a larger one
// (or of one with more than statuslimits.MaxStatusProperties fields, which
// the Work CRD refuses) are left out.
const maxReflectedStatus = statuslimits.MaxReflectedStatus

// Health judges obj, which was applied successfully, with the built-in
// interpreter of its kind, or the generic judgement from status
// conventions for other kinds (genericHealth: Unknown when there is
// nothing to judge). Interpreter.Health puts customizations first.
func Health(obj *unstructured.Unstructured) workv1alpha1.ResourceHealth {
	if obj == nil {
		return workv1alpha1.ResourceUnknown
	}
	o := obj.Object
	switch gk := obj.GroupVersionKind().GroupKind(); gk {
	case schema.GroupKind{Group: "apps", Kind: "Deployment"}, schema.GroupKind{Group: "apps", Kind: "StatefulSet"}:
		desired := replicas(o)
		available := num(o, "status", "availableReplicas")
		if gk.Kind == "StatefulSet" {
			available = num(o, "status", "readyReplicas")
		}
		return healthy(observedCurrent(obj) && num(o, "status", "updatedReplicas") == desired && available == desired &&
			num(o, "status", "replicas") == desired)
	case schema.GroupKind{Group: "apps", Kind: "ReplicaSet"}:
		return healthy(observedCurrent(obj) && num(o, "status", "availableReplicas") == replicas(o))
	case schema.GroupKind{Group: "apps", Kind: "DaemonSet"}:
		desired := num(o, "status", "desiredNumberScheduled")
		return healthy(observedCurrent(obj) && num(o, "status", "updatedNumberScheduled") == desired &&
			num(o, "status", "numberAvailable") == desired)
	case schema.GroupKind{Group: "batch", Kind: "Job"}:
		// A running or completed Job is healthy; a failed one is not.
		return healthy(!conditionTrue(o, "Failed"))
	case schema.GroupKind{Kind: "Pod"}:
		phase, _, _ := unstructured.NestedString(o, "status", "phase")
		return healthy(phase == "Succeeded" || phase == "Running" && conditionTrue(o, "Ready"))
	case schema.GroupKind{Kind: "Service"}:
		typ, _, _ := unstructured.NestedString(o, "spec", "type")
		if typ != "LoadBalancer" {
			return workv1alpha1.ResourceHealthy
		}
		return healthy(hasIngress(o))
	case schema.GroupKind{Group: "networking.k8s.io", Kind: "Ingress"}:
		return healthy(hasIngress(o))
	case schema.GroupKind{Kind: "PersistentVolumeClaim"}:
		phase, _, _ := unstructured.NestedString(o, "status", "phase")
		return healthy(phase == "Bound")
	case schema.GroupKind{Group: "policy", Kind: "PodDisruptionBudget"}:
		return healthy(observedCurrent(obj) && num(o, "status", "currentHealthy") >= num(o, "status", "desiredHealthy"))
	default:
		return genericHealth(obj)
	}
}

// ReflectStatus returns the part of obj's status reported to the hub: the
// replica counts of workloads (with generation and observedGeneration), the
// load balancer of Services and Ingresses, the phase of Pods and PVCs, the
// whole status of other kinds (custom resources: stateful failover reads
// any field of it) less its largest fields if it is too large, nil when
// there is none.
func ReflectStatus(obj *unstructured.Unstructured) *runtime.RawExtension {
	if obj == nil {
		return nil
	}
	status, ok, _ := unstructured.NestedMap(obj.Object, "status")
	if !ok || len(status) == 0 {
		return nil
	}
	var keep []string
	switch obj.GroupVersionKind().GroupKind() {
	case schema.GroupKind{Group: "apps", Kind: "Deployment"}:
		keep = []string{"replicas", "updatedReplicas", "readyReplicas", "availableReplicas", "unavailableReplicas", "observedGeneration"}
	case schema.GroupKind{Group: "apps", Kind: "StatefulSet"}:
		keep = []string{"replicas", "updatedReplicas", "readyReplicas", "availableReplicas", "currentReplicas", "observedGeneration"}
	case schema.GroupKind{Group: "apps", Kind: "ReplicaSet"}:
		keep = []string{"replicas", "readyReplicas", "availableReplicas", "fullyLabeledReplicas", "observedGeneration"}
	case schema.GroupKind{Group: "apps", Kind: "DaemonSet"}:
		keep = []string{"currentNumberScheduled", "desiredNumberScheduled", "numberAvailable", "numberMisscheduled",
			"numberReady", "updatedNumberScheduled", "numberUnavailable", "observedGeneration"}
	case schema.GroupKind{Group: "batch", Kind: "Job"}:
		keep = []string{"active", "succeeded", "failed", "ready", "startTime", "completionTime", "conditions"}
	case schema.GroupKind{Kind: "Pod"}, schema.GroupKind{Kind: "PersistentVolumeClaim"}:
		keep = []string{"phase", "conditions"}
	case schema.GroupKind{Kind: "Service"}, schema.GroupKind{Group: "networking.k8s.io", Kind: "Ingress"}:
		keep = []string{"loadBalancer"}
	case schema.GroupKind{Group: "policy", Kind: "PodDisruptionBudget"}:
		keep = []string{"currentHealthy", "desiredHealthy", "disruptionsAllowed", "expectedPods", "observedGeneration"}
	}
	if keep != nil {
		trimmed := map[string]any{}
		for _, k := range keep {
			if v, ok := status[k]; ok {
				trimmed[k] = v
			}
		}
		if _, ok := status["observedGeneration"]; ok {
			trimmed["generation"] = obj.GetGeneration()
		}
		status = trimmed
	}
	raw, err := json.Marshal(status)
	if err == nil && (len(raw) > maxReflectedStatus || len(status) > statuslimits.MaxStatusProperties) && keep == nil {
		// A custom resource's status may hold something large (a Flink
		// job's last reconciled spec) next to what matters (its
		// checkpoint path, read by stateful failover): leave out the
		// largest fields rather than the whole status.
		raw, err = json.Marshal(withoutLargest(status, maxReflectedStatus))
	}
	if err != nil || len(raw) > maxReflectedStatus || len(status) == 0 || string(raw) == "{}" {
		return nil
	}
	return &runtime.RawExtension{Raw: raw}
}

// withoutLargest returns status without its largest top-level fields, as
// few as it takes for the rest to fit in limit bytes of JSON and
// statuslimits.MaxStatusProperties fields.
func withoutLargest(status map[string]any, limit int) map[string]any {
	type field struct {
		key  string
		size int
	}
	fields := make([]field, 0, len(status))
	total := 2 // {}
	for k, v := range status {
		b, err := json.Marshal(v)
		if err != nil {
			continue
		}
		f := field{k, len(k) + 4 + len(b)} // "k": v,
		fields = append(fields, f)
		total += f.size
	}
	sort.Slice(fields, func(i, j int) bool {
		if fields[i].size != fields[j].size {
			return fields[i].size > fields[j].size
		}
		return fields[i].key < fields[j].key
	})
	out := map[string]any{}
	for i, f := range fields {
		if total <= limit && len(fields)-i <= statuslimits.MaxStatusProperties {
			out[f.key] = status[f.key]
			continue
		}
		total -= f.size
	}
	return out
}

func healthy(ok bool) workv1alpha1.ResourceHealth {
	if ok {
		return workv1alpha1.ResourceHealthy
	}
	return workv1alpha1.ResourceUnhealthy
}

// observedCurrent: the object's controller has seen its current spec.
func observedCurrent(obj *unstructured.Unstructured) bool {
	observed, found, _ := unstructured.NestedInt64(obj.Object, "status", "observedGeneration")
	return found && observed >= obj.GetGeneration()
}

// replicas is spec.replicas, 1 when unset (the apiserver's default).
func replicas(o map[string]any) int64 {
	v, found, _ := unstructured.NestedInt64(o, "spec", "replicas")
	if !found {
		return 1
	}
	return v
}

func num(o map[string]any, path ...string) int64 {
	v, _, _ := unstructured.NestedInt64(o, path...)
	return v
}

func conditionTrue(o map[string]any, condType string) bool {
	conds, _, _ := unstructured.NestedSlice(o, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == condType {
			return m["status"] == "True"
		}
	}
	return false
}

func hasIngress(o map[string]any) bool {
	ing, _, _ := unstructured.NestedSlice(o, "status", "loadBalancer", "ingress")
	return len(ing) > 0
}
