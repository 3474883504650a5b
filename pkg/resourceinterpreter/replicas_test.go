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
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

func mustObj(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(y), &m); err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

func TestGetReplicas(t *testing.T) {
	for _, c := range []struct {
		name     string
		obj      string
		replicas int32
		requests string // JSON of ResourceRequest, "" for nil
		wantErr  bool
	}{
		{name: "deployment", obj: `{apiVersion: apps/v1, kind: Deployment, spec: {replicas: 3, template: {spec: {containers: [
			{name: a, resources: {requests: {cpu: 100m, memory: 64Mi}}}, {name: b, resources: {requests: {cpu: 150m}}}]}}}}`,
			replicas: 3, requests: `{"cpu":"250m","memory":"64Mi"}`},
		{name: "replicas default to 1", obj: `{apiVersion: apps/v1, kind: StatefulSet, spec: {template: {spec: {containers: [{name: a}]}}}}`, replicas: 1},
		{name: "init container larger than the sum", obj: `{apiVersion: apps/v1, kind: ReplicaSet, spec: {replicas: 2, template: {spec: {
			initContainers: [{name: i, resources: {requests: {cpu: "1"}}}], containers: [{name: a, resources: {requests: {cpu: 100m}}}]}}}}`,
			replicas: 2, requests: `{"cpu":"1"}`},
		{name: "job parallelism", obj: `{apiVersion: batch/v1, kind: Job, spec: {parallelism: 4, template: {spec: {containers: [{name: a}]}}}}`, replicas: 4},
		{name: "zero replicas", obj: `{apiVersion: apps/v1, kind: Deployment, spec: {replicas: 0}}`, replicas: 0},
		{name: "configmap has none", obj: `{apiVersion: v1, kind: ConfigMap, data: {a: b}}`, replicas: 0},
		{name: "a deployment of another group is not apps", obj: `{apiVersion: example.com/v1, kind: Deployment, spec: {replicas: 3}}`, replicas: 0},
		{name: "garbage replicas", obj: `{apiVersion: apps/v1, kind: Deployment, spec: {replicas: lots}}`, wantErr: true},
		{name: "negative replicas", obj: `{apiVersion: apps/v1, kind: Deployment, spec: {replicas: -1}}`, wantErr: true},
		{name: "garbage pod spec", obj: `{apiVersion: apps/v1, kind: Deployment, spec: {replicas: 1, template: {spec: {containers: "no"}}}}`, wantErr: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			n, req, err := GetReplicas(mustObj(t, c.obj))
			if (err != nil) != c.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, c.wantErr)
			}
			if c.wantErr {
				return
			}
			if n != c.replicas {
				t.Errorf("replicas = %d, want %d", n, c.replicas)
			}
			got := ""
			if req != nil {
				b, _ := json.Marshal(req.ResourceRequest)
				got = string(b)
			}
			if got != c.requests {
				t.Errorf("requests = %s, want %s", got, c.requests)
			}
		})
	}
}

func TestReviseReplica(t *testing.T) {
	d := mustObj(t, `{apiVersion: apps/v1, kind: Deployment, spec: {replicas: 3}}`)
	if err := ReviseReplica(d, 1); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := unstructured.NestedInt64(d.Object, "spec", "replicas"); n != 1 {
		t.Errorf("replicas = %d, want 1", n)
	}
	j := mustObj(t, `{apiVersion: batch/v1, kind: Job, spec: {}}`)
	if err := ReviseReplica(j, 2); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := unstructured.NestedInt64(j.Object, "spec", "parallelism"); n != 2 {
		t.Errorf("parallelism = %d, want 2", n)
	}
	cm := mustObj(t, `{apiVersion: v1, kind: ConfigMap}`)
	if err := ReviseReplica(cm, 2); err != nil || len(cm.Object) != 2 {
		t.Errorf("a ConfigMap changed: %v %v", cm.Object, err)
	}
}

func TestAggregateStatus(t *testing.T) {
	raw := func(s string) *runtime.RawExtension { return &runtime.RawExtension{Raw: []byte(s)} }
	for _, c := range []struct {
		name     string
		kind     string
		statuses []*runtime.RawExtension
		want     string
	}{
		{name: "the seed's 3/3", kind: "Deployment", statuses: []*runtime.RawExtension{
			raw(`{"replicas":1,"readyReplicas":1,"availableReplicas":1,"updatedReplicas":1,"observedGeneration":2,"generation":2}`),
			raw(`{"replicas":2,"readyReplicas":2,"availableReplicas":2,"updatedReplicas":2,"observedGeneration":1,"generation":1}`)},
			want: `{"availableReplicas":3,"readyReplicas":3,"replicas":3,"updatedReplicas":3}`},
		{name: "missing and garbage statuses are skipped", kind: "Deployment", statuses: []*runtime.RawExtension{
			nil, raw(``), raw(`not json`), raw(`{"replicas":2,"readyReplicas":"x"}`)},
			want: `{"replicas":2}`},
		{name: "job", kind: "Job", statuses: []*runtime.RawExtension{raw(`{"active":1}`), raw(`{"succeeded":2,"active":1}`)},
			want: `{"active":2,"succeeded":2}`},
		{name: "service load balancers", kind: "Service", statuses: []*runtime.RawExtension{
			raw(`{"loadBalancer":{"ingress":[{"ip":"10.0.0.1"}]}}`), raw(`{"loadBalancer":{}}`), raw(`{"loadBalancer":{"ingress":[{"ip":"10.0.0.2"}]}}`)},
			want: `{"loadBalancer":{"ingress":[{"ip":"10.0.0.1"},{"ip":"10.0.0.2"}]}}`},
		{name: "other kinds", kind: "ConfigMap", statuses: []*runtime.RawExtension{raw(`{"a":1}`)}},
		{name: "nothing reported", kind: "Deployment"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := AggregateStatus(c.kind, c.statuses)
			if err != nil {
				t.Fatal(err)
			}
			s := ""
			if got != nil {
				s = string(got.Raw)
			}
			if s != c.want {
				t.Errorf("got %s, want %s", s, c.want)
			}
		})
	}
}
