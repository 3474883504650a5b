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

package interpreters

import (
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
)

// cloneSetSpec is a CloneSet of 5 replicas with a partitioned in-place
// update (metadata.generation 4).
const cloneSetSpec = `apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata:
  name: api
  namespace: shop
  generation: 4
spec:
  replicas: 5
  selector:
    matchLabels: {app: api}
  template:
    metadata:
      labels: {app: api}
    spec:
      containers:
      - name: api
        image: api:2.1
        resources:
          requests: {cpu: 500m, memory: 256Mi}
  updateStrategy:
    type: InPlaceIfPossible
    partition: 2
    maxUnavailable: 1
`

func cloneSetStatus(observed, available, updated int) string {
	return `
status:
  observedGeneration: ` + strconv.Itoa(observed) + `
  replicas: 5
  readyReplicas: ` + strconv.Itoa(available) + `
  availableReplicas: ` + strconv.Itoa(available) + `
  updatedReplicas: ` + strconv.Itoa(updated) + `
  updatedReadyReplicas: ` + strconv.Itoa(updated) + `
  updatedAvailableReplicas: ` + strconv.Itoa(updated) + `
  expectedUpdatedReplicas: 3
  updateRevision: api-6d8f9c7b5
  currentRevision: api-5c7d8b9f4
  labelSelector: app=api
`
}

func TestCloneSetHealth(t *testing.T) {
	s := load(t, "CloneSet")
	for _, tc := range []struct {
		name, status, want string
	}{
		{"all available, the partition holding 2 on the old revision", cloneSetStatus(4, 5, 3), "Healthy"},
		{"replicas missing", cloneSetStatus(4, 3, 3), "Unhealthy"},
		{"the controller has not seen the current spec", cloneSetStatus(3, 5, 5), "Unhealthy"},
		{"no status: no Kruise controller has reported", ``, "Unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := s.health(t, s.object(t, cloneSetSpec+tc.status)); got != tc.want {
				t.Errorf("health = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestCloneSetReplicas(t *testing.T) {
	s := load(t, "CloneSet")
	s.mark(s.rules.Replicas)
	s.mark(s.rules.PodTemplate)
	exercise(s.ric.Name, "spec.customizations.replicaRevision.replicasPath")
	obj := s.object(t, cloneSetSpec)
	if n, err := s.rules.Replicas.EvalInt(obj); err != nil || n != 5 {
		t.Errorf("replicas = %d, %v; want 5", n, err)
	}
	tmpl, err := s.rules.PodTemplate.EvalPodTemplate(obj)
	if err != nil {
		t.Fatal(err)
	}
	if r := tmpl.Spec.Containers[0].Resources.Requests; !r.Cpu().Equal(resource.MustParse("500m")) || !r.Memory().Equal(resource.MustParse("256Mi")) {
		t.Errorf("requests = %v", r)
	}
	if err := s.rules.ReplicasPath.Set(obj, int64(2)); err != nil {
		t.Fatal(err)
	}
	obj = s.object(t, string(mustYAML(t, obj)))
	if n, err := s.rules.Replicas.EvalInt(obj); err != nil || n != 2 {
		t.Errorf("revised replicas = %d, %v; want 2", n, err)
	}
	if s.rules.Retention != nil {
		t.Errorf("retains %v; want nothing by default", s.rules.Retention)
	}
}

func TestCloneSetStatus(t *testing.T) {
	s := load(t, "CloneSet")
	got := s.reflect(t, s.object(t, cloneSetSpec+cloneSetStatus(4, 5, 3)+`  collisionCount: 0
  conditions:
  - type: FailedScale
    status: "False"
`))
	want := map[string]any{"observedGeneration": int64(4), "generation": int64(4), "replicas": int64(5), "readyReplicas": int64(5),
		"availableReplicas": int64(5), "updatedReplicas": int64(3), "updatedReadyReplicas": int64(3), "updatedAvailableReplicas": int64(3),
		"expectedUpdatedReplicas": int64(3), "updateRevision": "api-6d8f9c7b5", "currentRevision": "api-5c7d8b9f4", "labelSelector": "app=api"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("reflected (-want +got):\n%s", diff)
	}
	if got := s.reflect(t, s.object(t, cloneSetSpec)); len(got) != 0 {
		t.Errorf("no status reflects %v", got)
	}

	agg := s.aggregate(t, "member1", got, "member2", map[string]any{"replicas": int64(2), "availableReplicas": int64(1)})
	wantAgg := map[string]any{"replicas": int64(7), "readyReplicas": int64(5), "availableReplicas": int64(6), "updatedReplicas": int64(3),
		"updatedReadyReplicas": int64(3), "expectedUpdatedReplicas": int64(3)}
	if diff := cmp.Diff(wantAgg, agg); diff != "" {
		t.Errorf("aggregated (-want +got):\n%s", diff)
	}
	if got := s.aggregate(t); len(got) != 0 {
		t.Errorf("nothing reported aggregates to %v", got)
	}
}
