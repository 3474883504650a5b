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

package quantities

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
)

// The places found by reflection include the ones a hand-written list
// would miss (downward API divisors, ephemeral volume claims, pod-level
// resources, inlined ephemeral container fields).
func TestPodSpecPaths(t *testing.T) {
	got := PodSpec.Paths()
	for _, want := range []string{
		"containers[].resources.requests.*",
		"containers[].resources.limits.*",
		"initContainers[].resources.requests.*",
		"ephemeralContainers[].resources.requests.*",
		"containers[].env[].valueFrom.resourceFieldRef.divisor",
		"overhead.*",
		"resources.requests.*",
		"volumes[].emptyDir.sizeLimit",
		"volumes[].downwardAPI.items[].resourceFieldRef.divisor",
		"volumes[].projected.sources[].downwardAPI.items[].resourceFieldRef.divisor",
		"volumes[].ephemeral.volumeClaimTemplate.spec.resources.requests.*",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("PodSpec.Paths() lacks %s; has %v", want, got)
		}
	}
	for _, p := range PodTemplateSpec.Paths() {
		if !slices.Contains(got, p[len("spec."):]) {
			t.Errorf("PodTemplateSpec path %s is not spec. and a PodSpec path", p)
		}
	}
}

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		name, spec, want string // want: the error, "" for none
	}{
		{"in range", `{"containers":[{"name":"a","resources":{"requests":{"cpu":"100m","memory":"1Gi"},"limits":{"cpu":2}}}]}`, ""},
		{"request", `{"containers":[{"name":"a"},{"name":"b","resources":{"requests":{"cpu":"1e-10000000"}}}]}`,
			`spec.containers[1].resources.requests.cpu: "1e-10000000": out of range: the exponent is beyond ±99`},
		{"spaces are trimmed, as Quantity.UnmarshalJSON does", `{"containers":[{"resources":{"limits":{"cpu":" 1e10000000 "}}}]}`,
			`spec.containers[0].resources.limits.cpu: "1e10000000": out of range: the exponent is beyond ±99`},
		{"first by key in a map", `{"overhead":{"zz":"1e100","aa":"1e200","mm":"1"}}`,
			`spec.overhead.aa: "1e200": out of range: the exponent is beyond ±99`},
		{"a number beyond range", `{"overhead":{"cpu":1e300}}`, `spec.overhead.cpu: "1e+300": out of range: the exponent is beyond ±99`},
		{"a large integer", `{"overhead":{"cpu":9223372036854775807}}`,
			`spec.overhead.cpu: "9223372036854776000": out of range: the magnitude is above 9P (9000000000000000)`},
		{"divisor", `{"volumes":[{"name":"v","downwardAPI":{"items":[{"path":"p","resourceFieldRef":{"resource":"limits.cpu","divisor":"1e-10000000"}}]}}]}`,
			`spec.volumes[0].downwardAPI.items[0].resourceFieldRef.divisor: "1e-10000000": out of range: the exponent is beyond ±99`},
		{"emptyDir", `{"volumes":[{"name":"v","emptyDir":{"sizeLimit":"99999999999999999999"}}]}`,
			`spec.volumes[0].emptyDir.sizeLimit: "99999999999999999999": out of range: the magnitude is above 9P (9000000000000000)`},
		{"not a quantity", `{"containers":[{"resources":{"requests":{"cpu":"lots"}}}]}`,
			`spec.containers[0].resources.requests.cpu: "lots": not a quantity`},
		{"a long key is cut in the path", `{"overhead":{"` + strings.Repeat("é", 100) + `":"1e100"}}`,
			`spec.overhead.` + strings.Repeat("é", 32) + `…: "1e100": out of range: the exponent is beyond ±99`},
		{"wrong JSON types are the conversion's", `{"containers":{"a":1},"overhead":[1],"volumes":[{"emptyDir":{"sizeLimit":true}}]}`, ""},
	} {
		err := PodSpec.Check(decode(t, c.spec), "spec")
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("%s: Check = %q, want %q", c.name, got, c.want)
		}
	}
}

// Check passes exactly what the conversion then parses cheaply: a spec
// it passes converts at once.
func TestCheckBoundsTheConversion(t *testing.T) {
	spec := decode(t, `{"containers":[{"name":"a","resources":{"requests":{"cpu":"1e10000000"}}}]}`)
	if PodSpec.Check(spec, "") == nil {
		t.Fatal("Check passed 1e10000000")
	}
	ok := decode(t, `{"containers":[{"name":"a","resources":{"requests":{"cpu":"1e-99","memory":"9P"}}}],"overhead":{"cpu":0.5}}`)
	if err := PodSpec.Check(ok, ""); err != nil {
		t.Fatal(err)
	}
	var s corev1.PodSpec
	if err := withinDeadline(t, 5*time.Second, "FromUnstructured", func() error {
		return runtime.DefaultUnstructuredConverter.FromUnstructured(ok, &s)
	}); err != nil {
		t.Fatal(err)
	}
	if q := s.Overhead[corev1.ResourceCPU]; q.MilliValue() != 500 {
		t.Errorf("overhead cpu %s, want 500m", q.String())
	}
}

func TestSameSummary(t *testing.T) {
	s := func(cpu string) *clusterv1alpha1.ResourceSummary {
		return &clusterv1alpha1.ResourceSummary{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}
	}
	for _, c := range []struct {
		a, b *clusterv1alpha1.ResourceSummary
		want bool
	}{
		{s("1"), s("1000m"), true},
		{s("1"), s("2"), false},
		{s("1e10000000"), s("1"), false},
		{s("1e10000000"), s("2e10000000"), true}, // unused either way
		{s("1"), nil, false},
		{nil, nil, true},
		{s("1"), &clusterv1alpha1.ResourceSummary{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"),
			corev1.ResourceMemory: resource.MustParse("1")}}, false},
	} {
		var got bool
		if err := withinDeadline(t, 5*time.Second, "SameSummary", func() error { got = SameSummary(c.a, c.b); return nil }); err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("SameSummary(%v, %v) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}
