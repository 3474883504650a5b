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
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/quantities"
	"github.com/flotilla-io/flotilla/pkg/statuslimits"
)

// replicaField is where a kind keeps its replica count, and where its pod
// template is.
type replicaField struct {
	path        []string
	podTemplate []string
}

var replicaKinds = map[schema.GroupKind]replicaField{
	{Group: "apps", Kind: "Deployment"}:  {[]string{"spec", "replicas"}, []string{"spec", "template", "spec"}},
	{Group: "apps", Kind: "StatefulSet"}: {[]string{"spec", "replicas"}, []string{"spec", "template", "spec"}},
	{Group: "apps", Kind: "ReplicaSet"}:  {[]string{"spec", "replicas"}, []string{"spec", "template", "spec"}},
	{Group: "batch", Kind: "Job"}:        {[]string{"spec", "parallelism"}, []string{"spec", "template", "spec"}},
}

// GetReplicas returns the replicas obj asks for (the apiserver's default, 1,
// when unset) and what each replica requests. Kinds without replicas
// return 0 and nil.
func GetReplicas(obj *unstructured.Unstructured) (int32, *workv1alpha1.ReplicaRequirements, error) {
	field, ok := replicaKinds[obj.GroupVersionKind().GroupKind()]
	if !ok {
		return 0, nil, nil
	}
	replicas := int64(1)
	if v, found, err := unstructured.NestedFieldNoCopy(obj.Object, field.path...); err != nil {
		return 0, nil, err
	} else if found && v != nil {
		n, ok := asInt64(v)
		if !ok || n < 0 || n > math.MaxInt32 {
			return 0, nil, fmt.Errorf("%s: %v is not a replica count", joinPath(field.path), v)
		}
		replicas = n
	}
	podSpec, found, err := unstructured.NestedMap(obj.Object, field.podTemplate...)
	if err != nil {
		return 0, nil, fmt.Errorf("%s: %w", joinPath(field.podTemplate), err)
	}
	if !found {
		return int32(replicas), nil, nil
	}
	// A tenant's manifest is never schema-checked: its quantities are
	// bounded before the conversion parses them.
	specPath := strings.Join(field.podTemplate, ".")
	if err := quantities.PodSpec.Check(podSpec, specPath); err != nil {
		return 0, nil, err
	}
	var spec corev1.PodSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(podSpec, &spec); err != nil {
		return 0, nil, fmt.Errorf("%s: %w", joinPath(field.podTemplate), err)
	}
	requests, err := podRequests(&spec, specPath)
	if err != nil {
		return 0, nil, err
	}
	if len(requests) == 0 {
		return int32(replicas), nil, nil
	}
	return int32(replicas), &workv1alpha1.ReplicaRequirements{ResourceRequest: requests}, nil
}

// podRequests is what one pod requests: its containers' sum, or the
// largest init container when that is more (the kube-scheduler's rule).
// spec's quantities are bounded (quantities.PodSpec.Check); a request
// must also not be negative (the apiserver refuses one, and a binding's
// CRD admits none) and a sum must stay within quantities.Max, else the
// error (a *quantities.Error under specPath) says which.
func podRequests(spec *corev1.PodSpec, specPath string) (corev1.ResourceList, error) {
	sum := corev1.ResourceList{}
	for i, c := range spec.Containers {
		for name, q := range c.Resources.Requests {
			if _, err := quantities.NonNegativeMilli(&q); err != nil {
				return nil, requestError(err, fmt.Sprintf("%s.containers[%d].resources.requests.%s", specPath, i, name))
			}
			cur := sum[name]
			cur.Add(q)
			if _, err := quantities.Milli(&cur); err != nil {
				e := requestError(err, fmt.Sprintf("%s.containers[*].resources.requests.%s", specPath, name))
				e.Reason = "the sum of the containers' requests is " + e.Reason
				return nil, e
			}
			sum[name] = cur
		}
	}
	for i, c := range spec.InitContainers {
		for name, q := range c.Resources.Requests {
			if _, err := quantities.NonNegativeMilli(&q); err != nil {
				return nil, requestError(err, fmt.Sprintf("%s.initContainers[%d].resources.requests.%s", specPath, i, name))
			}
			if cur, ok := sum[name]; !ok || q.Cmp(cur) > 0 {
				sum[name] = q.DeepCopy()
			}
		}
	}
	for name, q := range sum {
		if q.IsZero() {
			delete(sum, name)
		}
	}
	return sum, nil
}

// requestError is err, a *quantities.Error, at path.
func requestError(err error, path string) *quantities.Error {
	e := err.(*quantities.Error)
	e.Path = path
	return e
}

// ReviseReplica sets obj's replica count to n, for kinds that have one.
func ReviseReplica(obj *unstructured.Unstructured, n int32) error {
	field, ok := replicaKinds[obj.GroupVersionKind().GroupKind()]
	if !ok {
		return nil
	}
	return unstructured.SetNestedField(obj.Object, int64(n), field.path...)
}

// aggregatedFields are the status counters summed over the members.
var aggregatedFields = map[string][]string{
	"Deployment":  {"replicas", "updatedReplicas", "readyReplicas", "availableReplicas", "unavailableReplicas"},
	"StatefulSet": {"replicas", "updatedReplicas", "readyReplicas", "availableReplicas", "currentReplicas"},
	"ReplicaSet":  {"replicas", "readyReplicas", "availableReplicas", "fullyLabeledReplicas"},
	"DaemonSet": {"currentNumberScheduled", "desiredNumberScheduled", "numberAvailable", "numberMisscheduled",
		"numberReady", "updatedNumberScheduled", "numberUnavailable"},
	"Job": {"active", "succeeded", "failed", "ready"},
}

// AggregateStatus sums the members' reported statuses of a workload into
// one, as `kubectl get` on a single cluster would show it: replica counters
// for workloads, the load balancer ingress of Services and Ingresses. Other
// kinds (and no status at all) give nil. Statuses that are not JSON objects
// are skipped, and so is a counter that is not one (aggregateBuiltIn):
// Interpreter.AggregateStatus also says which cluster's was.
func AggregateStatus(kind string, statuses []*runtime.RawExtension) (*runtime.RawExtension, error) {
	decoded := make([]map[string]any, 0, len(statuses))
	for _, s := range statuses {
		if s == nil || len(s.Raw) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(s.Raw, &m); err != nil || m == nil {
			continue
		}
		decoded = append(decoded, m)
	}
	raw, _, err := aggregateBuiltIn(kind, decoded)
	return raw, err
}

// maxCounter is the largest value of a status counter of the built-in
// kinds: Kubernetes declares them int32, and none is negative.
const maxCounter = math.MaxInt32

// aggregateBuiltIn is AggregateStatus over decoded statuses. A member's
// counter outside 0 to maxCounter (or not an integer) is not a count its
// controller could have written: it is left out of the sum, and the note of
// the status it came from says so (leftOut, by index into statuses). So a
// lying member can neither wrap the sum (a sum of valid counters cannot
// overflow an int64 below 2^32 clusters) nor lower it with a negative count:
// the aggregate of every field is at least any one member's valid value.
func aggregateBuiltIn(kind string, statuses []map[string]any) (*runtime.RawExtension, map[int]string, error) {
	if len(statuses) == 0 {
		return nil, nil, nil
	}
	out := map[string]any{}
	var leftOut map[int]string
	if fields, ok := aggregatedFields[kind]; ok {
		var invalid map[int][]string // allocated for the first value left out
		for _, f := range fields {
			var sum int64
			seen := false
			for k, m := range statuses {
				v, present := m[f]
				if !present {
					continue
				}
				n, ok := asInt64(v)
				if !ok || n < 0 || n > maxCounter {
					if invalid == nil {
						invalid = map[int][]string{}
					}
					invalid[k] = append(invalid[k], fmt.Sprintf("status.%s: %s is not a counter (0 to %d)", f, valueText(v), maxCounter))
					continue
				}
				sum += n
				seen = true
			}
			if seen {
				out[f] = sum
			}
		}
		for k, notes := range invalid {
			if leftOut == nil {
				leftOut = map[int]string{}
			}
			leftOut[k] = notes[0]
			if len(notes) > 1 {
				leftOut[k] += fmt.Sprintf(" (and %d more fields)", len(notes)-1)
			}
		}
	} else if kind == "Service" || kind == "Ingress" {
		var ingress []any
		for _, m := range statuses {
			lb, _ := m["loadBalancer"].(map[string]any)
			if items, ok := lb["ingress"].([]any); ok {
				ingress = append(ingress, items...)
			}
		}
		if len(ingress) > 0 {
			out["loadBalancer"] = map[string]any{"ingress": ingress}
		}
	} else {
		return nil, nil, nil
	}
	if len(out) == 0 {
		return nil, leftOut, nil
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return nil, leftOut, err
	}
	return &runtime.RawExtension{Raw: raw}, leftOut, nil
}

// valueText names a reported value in a note: a number as it is, a
// string quoted and cut, anything else by its JSON type.
func valueText(v any) string {
	switch t := v.(type) {
	case float64, int64, json.Number:
		return fmt.Sprint(t)
	case string:
		return strconv.Quote(statuslimits.Text(t, 32))
	case nil:
		return "null"
	case bool:
		return "a bool"
	case []any:
		return "a list"
	default:
		return "a map"
	}
}

func asInt64(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int32:
		return int64(n), true
	case int:
		return int64(n), true
	case float64:
		if n != math.Trunc(n) || math.Abs(n) > 1<<53 {
			return 0, false
		}
		return int64(n), true
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
	default:
		return 0, false
	}
}

func joinPath(p []string) string {
	s := ""
	for _, e := range p {
		s += "." + e
	}
	return s
}
