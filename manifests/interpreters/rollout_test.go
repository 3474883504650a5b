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
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// rolloutSpec is a canary Rollout of 4 replicas (metadata.generation 3),
// as a user writes it; the samples add a status as Argo Rollouts'
// controller writes it.
const rolloutSpec = `apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata:
  name: web
  namespace: shop
  generation: 3
spec:
  replicas: 4
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx:1.27
        resources:
          requests: {cpu: 250m, memory: 128Mi}
  strategy:
    canary:
      canaryService: web-canary
      stableService: web-stable
      steps:
      - setWeight: 25
      - pause: {}
      - setWeight: 50
      - analysis:
          templates:
          - templateName: success-rate
`

func TestRolloutHealth(t *testing.T) {
	s := load(t, "Rollout")
	for _, tc := range []struct {
		name, status, want string
	}{
		{"healthy: every replica updated and available", `
status:
  phase: Healthy
  observedGeneration: "3"
  replicas: 4
  updatedReplicas: 4
  readyReplicas: 4
  availableReplicas: 4
  stableRS: 7d9c6f
  currentPodHash: 7d9c6f
`, "Healthy"},
		{"progressing below strength: new pods not yet available", `
status:
  phase: Progressing
  message: more replicas need to be updated
  observedGeneration: "3"
  replicas: 4
  updatedReplicas: 1
  readyReplicas: 2
  availableReplicas: 2
`, "Unhealthy"},
		{"progressing at full strength: an analysis step of a canary", `
status:
  phase: Progressing
  message: waiting for all steps to complete
  observedGeneration: "3"
  replicas: 4
  updatedReplicas: 2
  readyReplicas: 4
  availableReplicas: 4
  currentStepIndex: 3
`, "Healthy"},
		{"paused at a canary step, stable replicas serving", `
status:
  phase: Paused
  message: CanaryPauseStep
  observedGeneration: "3"
  replicas: 4
  updatedReplicas: 1
  readyReplicas: 4
  availableReplicas: 4
  currentStepIndex: 1
  pauseConditions:
  - reason: CanaryPauseStep
    startTime: "2026-11-27T08:00:00Z"
  controllerPause: true
`, "Healthy"},
		{"paused with replicas missing", `
status:
  phase: Paused
  observedGeneration: "3"
  replicas: 4
  availableReplicas: 1
`, "Unhealthy"},
		{"degraded: aborted", `
status:
  phase: Degraded
  message: "RolloutAborted: Rollout aborted update to revision 2"
  observedGeneration: "3"
  abort: true
  replicas: 4
  availableReplicas: 4
  conditions:
  - type: Progressing
    status: "False"
    reason: RolloutAborted
    message: Rollout aborted update to revision 2
    lastTransitionTime: "2026-11-27T08:00:00Z"
    lastUpdateTime: "2026-11-27T08:00:00Z"
`, "Unhealthy"},
		{"degraded: progress deadline exceeded", `
status:
  phase: Degraded
  message: "ProgressDeadlineExceeded: ReplicaSet web-7d9c6f has timed out progressing."
  observedGeneration: "3"
  availableReplicas: 0
`, "Unhealthy"},
		{"the controller has not seen the current spec", `
status:
  phase: Healthy
  observedGeneration: "2"
  replicas: 4
  availableReplicas: 4
`, "Unhealthy"},
		{"observedGeneration of an old controller (a hash) is not compared", `
status:
  phase: Healthy
  observedGeneration: 5c9f7d8b4
  availableReplicas: 4
`, "Healthy"},
		{"no status: no Rollouts controller has reported", ``, "Unknown"},
		{"a status without a phase", `
status:
  replicas: 4
`, "Unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := s.object(t, rolloutSpec+tc.status)
			if got := s.health(t, obj); got != tc.want {
				t.Errorf("health = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestRolloutReplicas(t *testing.T) {
	s := load(t, "Rollout")
	s.mark(s.rules.Replicas)
	s.mark(s.rules.PodTemplate)

	obj := s.object(t, rolloutSpec)
	n, err := s.rules.Replicas.EvalInt(obj)
	if err != nil || n != 4 {
		t.Errorf("replicas = %d, %v; want 4", n, err)
	}
	tmpl, err := s.rules.PodTemplate.EvalPodTemplate(obj)
	if err != nil {
		t.Fatal(err)
	}
	requests := tmpl.Spec.Containers[0].Resources.Requests
	if !requests.Cpu().Equal(resource.MustParse("250m")) || !requests.Memory().Equal(resource.MustParse("128Mi")) {
		t.Errorf("pod template requests = %v", requests)
	}

	// spec.replicas unset: Argo's default, 1.
	noReplicas := s.object(t, `apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: web, generation: 1}
spec:
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers: [{name: web, image: nginx}]
`)
	if n, err := s.rules.Replicas.EvalInt(noReplicas); err != nil || n != 1 {
		t.Errorf("replicas without spec.replicas = %d, %v; want 1", n, err)
	}

	// The workloadRef variant: the pod template is the referenced
	// Deployment's, which a rule cannot read: no requirements.
	ref := s.object(t, `apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: web, generation: 1}
spec:
  replicas: 6
  selector:
    matchLabels: {app: web}
  workloadRef:
    apiVersion: apps/v1
    kind: Deployment
    name: web
    scaleDown: progressively
  strategy:
    blueGreen:
      activeService: web-active
      previewService: web-preview
`)
	if n, err := s.rules.Replicas.EvalInt(ref); err != nil || n != 6 {
		t.Errorf("workloadRef replicas = %d, %v; want 6", n, err)
	}
	tmpl, err = s.rules.PodTemplate.EvalPodTemplate(ref)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&corev1.PodTemplateSpec{}, tmpl); diff != "" {
		t.Errorf("workloadRef pod template (-want +got):\n%s", diff)
	}
}

// TestRolloutRevision writes a cluster's share where the Rollout keeps its
// replicas, and the result is still a valid Rollout.
func TestRolloutRevision(t *testing.T) {
	s := load(t, "Rollout")
	exercise(s.ric.Name, "spec.customizations.replicaRevision.replicasPath")
	for _, src := range []string{rolloutSpec, `apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: web, generation: 1}
spec:
  selector:
    matchLabels: {app: web}
  workloadRef: {apiVersion: apps/v1, kind: Deployment, name: web}
`} {
		obj := s.object(t, src)
		if err := s.rules.ReplicasPath.Set(obj, int64(2)); err != nil {
			t.Fatal(err)
		}
		obj = s.object(t, string(mustYAML(t, obj)))
		if n, err := s.rules.Replicas.EvalInt(obj); err != nil || n != 2 {
			t.Errorf("revised replicas read back = %d, %v; want 2", n, err)
		}
	}
	if s.rules.Retention != nil {
		t.Errorf("the Rollout customization retains %v; it retains nothing unless an HPA is documented", s.rules.Retention)
	}
}

func TestRolloutStatusReflection(t *testing.T) {
	s := load(t, "Rollout")
	obj := s.object(t, rolloutSpec+`
status:
  phase: Paused
  message: CanaryPauseStep
  observedGeneration: "3"
  replicas: 5
  updatedReplicas: 1
  readyReplicas: 5
  availableReplicas: 4
  HPAReplicas: 5
  stableRS: 7d9c6f
  currentPodHash: 5b8f9c
  currentStepIndex: 1
  currentStepHash: 6c5d9f
  selector: app=web
  collisionCount: 0
  pauseConditions:
  - reason: CanaryPauseStep
    startTime: "2026-11-27T08:00:00Z"
  canary: {}
  blueGreen: {}
`)
	want := map[string]any{"phase": "Paused", "message": "CanaryPauseStep", "observedGeneration": "3", "generation": int64(3),
		"replicas": int64(5), "updatedReplicas": int64(1), "readyReplicas": int64(5), "availableReplicas": int64(4),
		"stableRS": "7d9c6f", "currentPodHash": "5b8f9c", "currentStepIndex": int64(1)}
	if diff := cmp.Diff(want, s.reflect(t, obj)); diff != "" {
		t.Errorf("reflected status (-want +got):\n%s", diff)
	}
	if got := s.reflect(t, s.object(t, rolloutSpec)); len(got) != 0 {
		t.Errorf("no status reflects %v, want nothing", got)
	}
}

func TestRolloutStatusAggregation(t *testing.T) {
	s := load(t, "Rollout")
	healthy := map[string]any{"phase": "Healthy", "replicas": int64(1), "updatedReplicas": int64(1), "readyReplicas": int64(1), "availableReplicas": int64(1)}
	paused := map[string]any{"phase": "Paused", "replicas": int64(2), "updatedReplicas": int64(1), "readyReplicas": int64(2), "availableReplicas": int64(2)}
	// JSON numbers as the hub may decode them.
	degraded := map[string]any{"phase": "Degraded", "replicas": float64(3), "availableReplicas": float64(0)}
	for _, tc := range []struct {
		name     string
		statuses []any
		want     map[string]any
	}{
		{"sums the counts; the worst phase", []any{"member1", healthy, "member2", paused},
			map[string]any{"replicas": int64(3), "updatedReplicas": int64(2), "readyReplicas": int64(3), "availableReplicas": int64(3), "phase": "Paused"}},
		{"degraded anywhere is degraded", []any{"member1", healthy, "member2", paused, "member3", degraded},
			map[string]any{"replicas": int64(6), "updatedReplicas": int64(2), "readyReplicas": int64(3), "availableReplicas": int64(3), "phase": "Degraded"}},
		{"a cluster that reported no phase yet is progressing", []any{"member1", healthy, "member2", map[string]any{}},
			map[string]any{"replicas": int64(1), "updatedReplicas": int64(1), "readyReplicas": int64(1), "availableReplicas": int64(1), "phase": "Progressing"}},
		{"all healthy", []any{"member1", healthy, "member2", healthy},
			map[string]any{"replicas": int64(2), "updatedReplicas": int64(2), "readyReplicas": int64(2), "availableReplicas": int64(2), "phase": "Healthy"}},
		{"nothing reported", nil, map[string]any{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, s.aggregate(t, tc.statuses...)); diff != "" {
				t.Errorf("aggregated (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRolloutDependencies(t *testing.T) {
	s := load(t, "Rollout")
	s.mark(s.rules.Dependencies)
	svc := func(name string) any { return map[string]any{"apiVersion": "v1", "kind": "Service", "name": name} }
	for _, tc := range []struct {
		name, src string
		want      []any
	}{
		{"canary services", rolloutSpec, []any{svc("web-canary"), svc("web-stable")}},
		{"workloadRef and blue-green services", `apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: web, generation: 1}
spec:
  selector:
    matchLabels: {app: web}
  workloadRef: {apiVersion: apps/v1, kind: Deployment, name: web-pods}
  strategy:
    blueGreen: {activeService: web-active, previewService: web-preview}
`, []any{map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web-pods"}, svc("web-active"), svc("web-preview")}},
		{"none", `apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: web, generation: 1}
spec:
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers: [{name: web, image: nginx}]
  strategy:
    canary:
      steps: [{setWeight: 50}]
`, []any{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.rules.Dependencies.EvalList(s.object(t, tc.src))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("dependencies (-want +got):\n%s", diff)
			}
		})
	}
}
