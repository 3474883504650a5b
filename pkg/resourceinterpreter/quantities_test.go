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
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/quantities"
)

// returnsWithin returns f's error, and fails t at once when f has not
// returned within d: a hang detector (the bounded calls take
// microseconds; the unbounded ones seconds, minutes for a longer
// exponent), not a speed assertion.
func returnsWithin(t testing.TB, d time.Duration, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("%s: not returned within %s", what, d)
		return nil
	}
}

func deploymentRequesting(cpu string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "app"},
		"spec": map[string]any{"replicas": int64(2), "template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "a", "image": "i",
				"resources": map[string]any{"requests": map[string]any{"cpu": cpu, "memory": "64Mi"}}}}}}}}}
}

// A tenant's manifest is never schema-checked: a quantity of a few bytes
// that every pattern admits must give a clear error at once, not a stall
// of the hub's detector (issue 36).
func TestGetReplicasBoundsQuantities(t *testing.T) {
	for _, cpu := range []string{"1e-10000000", "1e10000000", "0e10000000", "1e4294967296", "99999999999999999999", "-1", "-1e-10"} {
		obj := deploymentRequesting(cpu)
		err := returnsWithin(t, 5*time.Second, "GetReplicas(cpu "+cpu+")", func() error {
			_, _, err := GetReplicas(obj)
			return err
		})
		var qe *quantities.Error
		if !errors.As(err, &qe) {
			t.Errorf("cpu %s: GetReplicas: %v; want a *quantities.Error", cpu, err)
			continue
		}
		if want := "spec.template.spec.containers[0].resources.requests.cpu: "; !strings.HasPrefix(err.Error(), want) {
			t.Errorf("cpu %s: %v; want it to start with %q", cpu, err, want)
		}
	}
}

// Bounded values whose sum is not: a pod asking more than quantities.Max
// of a resource in all is refused, not wrapped.
func TestGetReplicasBoundsTheSum(t *testing.T) {
	obj := deploymentRequesting("5P")
	spec := obj.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	spec["containers"] = append(spec["containers"].([]any), map[string]any{"name": "b",
		"resources": map[string]any{"requests": map[string]any{"cpu": "5P"}}})
	_, _, err := GetReplicas(obj)
	var qe *quantities.Error
	if !errors.As(err, &qe) || !strings.Contains(err.Error(), "cpu") {
		t.Fatalf("GetReplicas of 5P + 5P cpu: %v; want a *quantities.Error on cpu", err)
	}
	if n, req, err := GetReplicas(deploymentRequesting("4P")); err != nil || n != 2 || req.ResourceRequest.Cpu().String() != "4P" {
		t.Fatalf("GetReplicas(4P) = %d %v %v", n, req, err)
	}
}

func TestGetDependenciesBoundsQuantities(t *testing.T) {
	obj := deploymentRequesting("1e-10000000")
	err := returnsWithin(t, 5*time.Second, "GetDependencies", func() error {
		_, err := New().GetDependencies(obj)
		return err
	})
	if qe := (*quantities.Error)(nil); !errors.As(err, &qe) {
		t.Errorf("GetDependencies: %v; want a *quantities.Error", err)
	}
}

// A customization's replicaResource.podTemplate: its output is converted
// into a PodTemplateSpec, so it is bounded the same way.
func TestCustomizedGetReplicasBoundsQuantities(t *testing.T) {
	i := New()
	i.Set(rolloutRIC("rollouts", rolloutRules))
	obj := u(t, strings.Replace(rollout, `"cpu":"100m"`, `"cpu":"1e-10000000"`, 1))
	err := returnsWithin(t, 5*time.Second, "customized GetReplicas", func() error {
		_, _, err := i.GetReplicas(obj)
		return err
	})
	if qe := (*quantities.Error)(nil); !errors.As(err, &qe) || !strings.Contains(err.Error(), "containers[0].resources.requests.cpu") {
		t.Errorf("GetReplicas: %v; want a *quantities.Error naming the field", err)
	}
}

var crdPattern = regexp.MustCompile(quantities.CRDPattern)

// FuzzGetReplicas: any quantity string, and any JSON at a pod template,
// in a Deployment: GetReplicas returns within a bound and never panics;
// requirements it returns are within quantities.Max and match the
// binding CRD's pattern.
func FuzzGetReplicas(f *testing.F) {
	for _, s := range []string{"100m", "1e-10000000", "1e10000000", "0e10000000", "9P", "5P", "-1", ""} {
		f.Add(s, `{"containers":[{"name":"b","resources":{"requests":{"cpu":"1"},"limits":{"memory":"1Gi"}}}]}`)
	}
	f.Add("1", `{"overhead":{"cpu":"1e-10000000"}}`)
	f.Add("1", `{"volumes":[{"name":"v","emptyDir":{"sizeLimit":"1e10000000"}}]}`)
	f.Add("1", `{"initContainers":[{"name":"i","resources":{"requests":{"cpu":1e300}}}]}`)
	f.Add("1", `{"containers":"no"}`)
	f.Fuzz(func(t *testing.T, cpu, extra string) {
		obj := deploymentRequesting(cpu)
		var m map[string]any
		if json.Unmarshal([]byte(extra), &m) == nil {
			spec := obj.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
			for k, v := range m {
				if k == "containers" {
					if l, ok := v.([]any); ok {
						v = append(l, spec["containers"].([]any)...)
					}
				}
				spec[k] = v
			}
		}
		var req *workv1alpha1.ReplicaRequirements
		var err error
		// The shortest of up to three runs: slow by its input every time,
		// slowed by the machine (GC, other processes) once.
		d := time.Duration(1<<63 - 1)
		for i := 0; i < 3 && d > 10*time.Millisecond; i++ {
			start := time.Now()
			_, req, err = GetReplicas(obj)
			d = min(d, time.Since(start))
		}
		if d > 100*time.Millisecond {
			t.Fatalf("GetReplicas took %s (cpu %.40q, extra %.80q)", d, cpu, extra)
		}
		if err != nil || req == nil {
			return
		}
		for name, q := range req.ResourceRequest {
			if _, err := quantities.Milli(&q); err != nil {
				t.Fatalf("requirement %s = %s out of range: %v", name, q.String(), err)
			}
		}
		for name, q := range req.ResourceRequest {
			// The binding's CRD admits it (else the binding write fails
			// on every sync).
			if s := q.String(); len(s) > quantities.MaxLength || !crdPattern.MatchString(s) {
				t.Fatalf("requirement %s = %q does not match the binding CRD's pattern", name, s)
			}
		}
	})
}

// BenchmarkGetReplicas: a Deployment's replicas and requirements (every
// detector sync of its template), the pod template's quantities bounded
// first.
func BenchmarkGetReplicas(b *testing.B) {
	obj := deploymentRequesting("250m")
	spec := obj.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	spec["containers"] = append(spec["containers"].([]any), map[string]any{"name": "sidecar", "image": "s",
		"resources": map[string]any{"requests": map[string]any{"cpu": "50m", "memory": "32Mi"}, "limits": map[string]any{"memory": "64Mi"}}})
	spec["volumes"] = []any{map[string]any{"name": "tmp", "emptyDir": map[string]any{"sizeLimit": "1Gi"}}}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := GetReplicas(obj); err != nil {
			b.Fatal(err)
		}
	}
}
