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
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
)

// BenchmarkCheckSummary: a member's summary as the agent writes it, on
// every use by the scheduler.
func BenchmarkCheckSummary(b *testing.B) {
	l := func(kv ...string) corev1.ResourceList {
		out := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return out
	}
	s := &clusterv1alpha1.ResourceSummary{
		Allocatable: l("cpu", "15800m", "memory", "64300Mi", "pods", "330", "ephemeral-storage", "1843Gi"),
		Allocated:   l("cpu", "9350m", "memory", "31Gi", "pods", "97"),
		Allocating:  l("cpu", "500m"),
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := CheckSummary(s); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParse: one quantity of a tenant's pod template.
func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse("250m"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckPodSpec: the pod spec of a two-container Deployment with
// an emptyDir size limit, as GetReplicas checks it before converting it.
func BenchmarkCheckPodSpec(b *testing.B) {
	var spec map[string]any
	if err := json.Unmarshal([]byte(`{"containers":[{"name":"a","image":"i","resources":{"requests":{"cpu":"250m","memory":"64Mi"}}},`+
		`{"name":"sidecar","image":"s","resources":{"requests":{"cpu":"50m","memory":"32Mi"},"limits":{"memory":"64Mi"}}}],`+
		`"volumes":[{"name":"tmp","emptyDir":{"sizeLimit":"1Gi"}}]}`), &spec); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := PodSpec.Check(spec, "spec.template.spec"); err != nil {
			b.Fatal(err)
		}
	}
}
