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
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	workv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/work/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/resourceinterpreter"
)

// shippedInterpreter is the Interpreter the agent and hub run, fed every
// shipped customization.
func shippedInterpreter(t *testing.T) *resourceinterpreter.Interpreter {
	t.Helper()
	rics, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	in := resourceinterpreter.New()
	for _, ric := range rics {
		in.Set(ric)
	}
	if got := len(in.Kinds()); got != len(rics) {
		t.Fatalf("the interpreter took %d of %d shipped customizations", got, len(rics))
	}
	return in
}

// TestInterpreterRollout follows a Divided Rollout through the entry points
// the hub and agent call: replicas and requirements read from the
// template, a cluster's share revised into its copy, the copy's health and
// reported status on the member, the template's status summed from what
// the members reported (as JSON, as the hub reads it).
func TestInterpreterRollout(t *testing.T) {
	s := load(t, "Rollout")
	in := shippedInterpreter(t)
	template := &unstructured.Unstructured{Object: s.object(t, rolloutSpec)}

	n, req, err := in.GetReplicas(template)
	if err != nil || n != 4 {
		t.Fatalf("GetReplicas = %d, %v; want 4", n, err)
	}
	want := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("128Mi")}
	if req == nil || !equalResources(req.ResourceRequest, want) {
		t.Errorf("requirements = %v, want %v", req, want)
	}

	var statuses []resourceinterpreter.ClusterStatus
	for cluster, share := range map[string]int32{"member1": 1, "member2": 3} {
		copy := template.DeepCopy()
		if err := in.ReviseReplica(copy, share); err != nil {
			t.Fatal(err)
		}
		if got, _, _ := unstructured.NestedInt64(copy.Object, "spec", "replicas"); got != int64(share) {
			t.Errorf("%s: revised spec.replicas = %d, want %d", cluster, got, share)
		}
		if h := in.Health(copy); h != workv1alpha1.ResourceUnknown {
			t.Errorf("%s: health before any status = %s, want Unknown", cluster, h)
		}
		// Argo's controller rolls it out.
		copy.Object["status"] = map[string]any{"phase": "Healthy", "observedGeneration": "3", "replicas": int64(share),
			"updatedReplicas": int64(share), "readyReplicas": int64(share), "availableReplicas": int64(share)}
		if h := in.Health(copy); h != workv1alpha1.ResourceHealthy {
			t.Errorf("%s: health = %s, want Healthy", cluster, h)
		}
		statuses = append(statuses, resourceinterpreter.ClusterStatus{ClusterName: cluster, Status: in.ReflectStatus(copy)})
	}
	agg := in.AggregateStatus(template.GroupVersionKind(), statuses)
	if agg.Status == nil || len(agg.LeftOut) > 0 || agg.Failed != "" {
		t.Fatalf("aggregate %+v", agg)
	}
	var got map[string]any
	if err := json.Unmarshal(agg.Status.Raw, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]any{"replicas": 4.0, "updatedReplicas": 4.0, "readyReplicas": 4.0, "availableReplicas": 4.0, "phase": "Healthy"}, got); diff != "" {
		t.Errorf("aggregated status (-want +got):\n%s", diff)
	}

	deps, err := in.GetDependencies(template)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]workv1alpha1.DependencyReference{
		{APIVersion: "v1", Kind: "Service", Name: "web-canary"}, {APIVersion: "v1", Kind: "Service", Name: "web-stable"},
	}, deps); diff != "" {
		t.Errorf("dependencies (-want +got):\n%s", diff)
	}
}

// TestInterpreterFlinkDeployment: a FlinkDeployment has no replicas; its
// reported status keeps the job's state however large the operator's
// status grows, where the generic reflection (no customization) drops it.
func TestInterpreterFlinkDeployment(t *testing.T) {
	s := load(t, "FlinkDeployment")
	in := shippedInterpreter(t)
	obj := &unstructured.Unstructured{Object: s.object(t, flinkSpec+flinkStatus("RUNNING", "STABLE"))}
	if n, req, err := in.GetReplicas(obj); n != 0 || req != nil || err != nil {
		t.Errorf("GetReplicas = %d, %v, %v; want none", n, req, err)
	}
	if h := in.Health(obj); h != workv1alpha1.ResourceHealthy {
		t.Errorf("health = %s, want Healthy", h)
	}

	// A long-running job: a savepoint history of hundreds of entries and a
	// large last reconciled spec.
	jobStatus := obj.Object["status"].(map[string]any)["jobStatus"].(map[string]any)
	var history []any
	for i := 0; i < 400; i++ {
		history = append(history, map[string]any{"location": fmt.Sprintf("s3://flink/savepoints/wordcount/savepoint-6b1e0d-%012x", i),
			"timeStamp": int64(1795000000000 + i), "triggerType": "PERIODIC", "formatType": "CANONICAL"})
	}
	jobStatus["savepointInfo"].(map[string]any)["savepointHistory"] = history
	obj.Object["status"].(map[string]any)["reconciliationStatus"].(map[string]any)["lastReconciledSpec"] = strings.Repeat("x", 12<<10)

	reported := func(in *resourceinterpreter.Interpreter) map[string]any {
		raw := in.ReflectStatus(obj)
		if raw == nil {
			return nil
		}
		var m map[string]any
		if err := json.Unmarshal(raw.Raw, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	if st := reported(in); st["jobStatus"] == nil {
		t.Errorf("with the customization the job's status is reported; got %v", st)
	} else if js := st["jobStatus"].(map[string]any); js["jobId"] != "6b1e0d8b3f1c4d5e9a7b2c3d4e5f6a7b" || js["savepointInfo"] == nil {
		t.Errorf("reported jobStatus = %v", js)
	}
	if st := reported(resourceinterpreter.New()); st["jobStatus"] != nil {
		t.Errorf("without it the generic reflection drops the largest field, jobStatus; got %v (if this changed, update docs/interpreter.md)", st["jobStatus"])
	}
}

func equalResources(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range b {
		if q, ok := a[k]; !ok || !q.Equal(v) {
			return false
		}
	}
	return true
}
