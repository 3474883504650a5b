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
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
	"github.com/flotilla-io/flotilla/pkg/statepreservation"
)

// flinkSpec is the stateful-failover example's WordCount job (metadata.generation 2).
const flinkSpec = `apiVersion: flink.apache.org/v1beta1
kind: FlinkDeployment
metadata:
  name: wordcount
  namespace: analytics
  generation: 2
spec:
  image: flink:1.20
  flinkVersion: v1_20
  serviceAccount: flink
  flinkConfiguration:
    taskmanager.numberOfTaskSlots: "2"
    state.checkpoints.dir: s3://flink/checkpoints/wordcount
    state.savepoints.dir: s3://flink/savepoints/wordcount
  jobManager:
    resource: {memory: 2048m, cpu: 1}
  taskManager:
    resource: {memory: 2048m, cpu: 1}
  job:
    jarURI: local:///opt/flink/examples/streaming/WordCount.jar
    parallelism: 2
    upgradeMode: last-state
`

// flinkStatus is a status as the operator writes it, with the job in
// state and the deployment in lifecycle.
func flinkStatus(state, lifecycle string) string {
	return `
status:
  lifecycleState: ` + lifecycle + `
  jobManagerDeploymentStatus: READY
  observedGeneration: 2
  clusterInfo: {flink-version: 1.20.1, total-cpu: "2.0", total-memory: "4294967296"}
  reconciliationStatus:
    state: DEPLOYED
    reconciliationTimestamp: 1795766300000
    lastReconciledSpec: '{"spec":{"job":{"jarURI":"local:///opt/flink/examples/streaming/WordCount.jar","parallelism":2,"upgradeMode":"last-state","state":"running"}},"resource_metadata":{"apiVersion":"flink.apache.org/v1beta1"}}'
    lastStableSpec: '{"spec":{"job":{"parallelism":2}}}'
  taskManager: {labelSelector: "component=taskmanager,app=wordcount", replicas: 1}
  jobStatus:
    jobId: 6b1e0d8b3f1c4d5e9a7b2c3d4e5f6a7b
    jobName: wordcount
    state: ` + state + `
    startTime: "1795766300000"
    updateTime: "1795766400500"
    upgradeSavepointPath: s3://flink/savepoints/wordcount/savepoint-6b1e0d-1a2b3c4d5e6f
    checkpointInfo:
      lastCheckpoint: {timeStamp: 1795766400123, triggerType: PERIODIC, formatType: FULL, triggerNonce: 0}
      lastPeriodicCheckpointTimestamp: 1795766400123
    savepointInfo:
      lastSavepoint: {location: s3://flink/savepoints/wordcount/savepoint-6b1e0d-4f2a9c1e7b3d, timeStamp: 1795766340000, triggerType: MANUAL, formatType: CANONICAL}
      lastPeriodicSavepointTimestamp: 0
      savepointHistory:
      - {location: s3://flink/savepoints/wordcount/savepoint-6b1e0d-0c1d2e3f4a5b, timeStamp: 1795762740000, triggerType: PERIODIC, formatType: CANONICAL}
      - {location: s3://flink/savepoints/wordcount/savepoint-6b1e0d-4f2a9c1e7b3d, timeStamp: 1795766340000, triggerType: MANUAL, formatType: CANONICAL}
`
}

func TestFlinkDeploymentHealth(t *testing.T) {
	s := load(t, "FlinkDeployment")
	for _, tc := range []struct {
		name, status, want string
	}{
		{"running and stable", flinkStatus("RUNNING", "STABLE"), "Healthy"},
		{"the job failed (Flink's restart strategy gave up)", flinkStatus("FAILED", "STABLE"), "Unhealthy"},
		{"the deployment failed", flinkStatus("RECONCILING", "FAILED"), "Unhealthy"},
		{"the JobManager deployment is in error", strings.Replace(flinkStatus("RECONCILING", "DEPLOYED"),
			"jobManagerDeploymentStatus: READY", "jobManagerDeploymentStatus: ERROR\n  error: '{\"type\":\"org.apache.flink.kubernetes.operator.exception.DeploymentFailedException\",\"message\":\"ErrImagePull\"}'", 1), "Unhealthy"},
		{"running, not yet stable (just deployed)", flinkStatus("RUNNING", "DEPLOYED"), "Unknown"},
		{"reconciling", flinkStatus("RECONCILING", "DEPLOYED"), "Unknown"},
		{"restarting", flinkStatus("RESTARTING", "STABLE"), "Unknown"},
		{"upgrading", flinkStatus("RUNNING", "UPGRADING"), "Unknown"},
		{"suspended by its owner", flinkStatus("SUSPENDED", "SUSPENDED"), "Unknown"},
		{"a running status of the previous generation", strings.Replace(flinkStatus("RUNNING", "STABLE"),
			"observedGeneration: 2", "observedGeneration: 1", 1), "Unknown"},
		{"a failure reported for the previous generation still counts", strings.Replace(flinkStatus("FAILED", "STABLE"),
			"observedGeneration: 2", "observedGeneration: 1", 1), "Unhealthy"},
		{"a status with no job yet", `
status:
  lifecycleState: CREATED
  jobManagerDeploymentStatus: DEPLOYING
`, "Unknown"},
		{"no status: no operator has reported", ``, "Unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := s.health(t, s.object(t, flinkSpec+tc.status)); got != tc.want {
				t.Errorf("health = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestFlinkDeploymentNoReplicas: one job, Duplicated; its JobManager and
// TaskManager replicas are the operator's. Nothing is retained.
func TestFlinkDeploymentNoReplicas(t *testing.T) {
	s := load(t, "FlinkDeployment")
	if s.rules.Replicas != nil || s.rules.ReplicasPath != nil || s.rules.Retention != nil {
		t.Errorf("FlinkDeployment rules: replicas %v, revision %v, retention %v; want none", s.rules.Replicas, s.rules.ReplicasPath, s.rules.Retention)
	}
}

func TestFlinkDeploymentStatusReflection(t *testing.T) {
	s := load(t, "FlinkDeployment")
	got := s.reflect(t, s.object(t, flinkSpec+flinkStatus("RUNNING", "STABLE")))
	want := decodeYAML(t, `
lifecycleState: STABLE
jobManagerDeploymentStatus: READY
observedGeneration: 2
generation: 2
taskManager: {labelSelector: "component=taskmanager,app=wordcount", replicas: 1}
reconciliationStatus: {state: DEPLOYED}
jobStatus:
  jobId: 6b1e0d8b3f1c4d5e9a7b2c3d4e5f6a7b
  jobName: wordcount
  state: RUNNING
  startTime: "1795766300000"
  updateTime: "1795766400500"
  upgradeSavepointPath: s3://flink/savepoints/wordcount/savepoint-6b1e0d-1a2b3c4d5e6f
  checkpointInfo:
    lastCheckpoint: {timeStamp: 1795766400123, triggerType: PERIODIC, formatType: FULL, triggerNonce: 0}
    lastPeriodicCheckpointTimestamp: 1795766400123
  savepointInfo:
    lastSavepoint: {location: s3://flink/savepoints/wordcount/savepoint-6b1e0d-4f2a9c1e7b3d, timeStamp: 1795766340000, triggerType: MANUAL, formatType: CANONICAL}
    lastPeriodicSavepointTimestamp: 0
`)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("reflected status (-want +got):\n%s", diff)
	}

	// A long error is cut to 1 KiB.
	long := strings.Repeat("x", 5000)
	got = s.reflect(t, s.object(t, flinkSpec+"\nstatus:\n  lifecycleState: FAILED\n  error: "+long+"\n"))
	if e, _ := got["error"].(string); len(e) != 1024 || got["lifecycleState"] != "FAILED" {
		t.Errorf("reflected error of %d bytes, lifecycle %v; want 1024 and FAILED", len(e), got["lifecycleState"])
	}
	if got := s.reflect(t, s.object(t, flinkSpec)); len(got) != 0 {
		t.Errorf("no status reflects %v, want nothing", got)
	}
}

// TestFlinkDeploymentStatePreservation: the rules of the e2e spec's (and
// docs/interpreter.md's) policy read the job ID, the last checkpoint's
// time and the last savepoint from the reflected status, as the hub does
// when application failover evicts the copy.
func TestFlinkDeploymentStatePreservation(t *testing.T) {
	s := load(t, "FlinkDeployment")
	raw, err := json.Marshal(s.reflect(t, s.object(t, flinkSpec+flinkStatus("FAILED", "STABLE"))))
	if err != nil {
		t.Fatal(err)
	}
	rules := []policyv1alpha1.StatePreservationRule{
		{AliasLabelName: "flink.apache.org/job-id", JSONPath: "{.jobStatus.jobId}", ValuePattern: "[0-9a-f]{32}"},
		{AliasLabelName: "flink.apache.org/last-checkpoint-timestamp", JSONPath: "{.jobStatus.checkpointInfo.lastCheckpoint.timeStamp}"},
		{AliasLabelName: "flink.apache.org/last-savepoint", JSONPath: "{.jobStatus.savepointInfo.lastSavepoint.location}",
			ValuePattern: "s3://flink/savepoints/wordcount/savepoint-[0-9a-f-]+"},
	}
	got, err := statepreservation.Extract(rules, &runtime.RawExtension{Raw: raw})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"flink.apache.org/job-id":                    "6b1e0d8b3f1c4d5e9a7b2c3d4e5f6a7b",
		"flink.apache.org/last-checkpoint-timestamp": "1795766400123",
		"flink.apache.org/last-savepoint":            "s3://flink/savepoints/wordcount/savepoint-6b1e0d-4f2a9c1e7b3d",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("carried state (-want +got):\n%s", diff)
	}
	labels, annotations := statepreservation.Split(got)
	if len(labels) != 2 || annotations["flink.apache.org/last-savepoint"] == "" {
		t.Errorf("labels %v, annotations %v: the savepoint location is not a label value, so it travels as an annotation", labels, annotations)
	}
}

func TestFlinkDeploymentStatusAggregation(t *testing.T) {
	s := load(t, "FlinkDeployment")
	failed := s.reflect(t, s.object(t, flinkSpec+flinkStatus("FAILED", "STABLE")))
	running := s.reflect(t, s.object(t, flinkSpec+flinkStatus("RUNNING", "STABLE")))
	deploying := s.reflect(t, s.object(t, flinkSpec+"\nstatus:\n  lifecycleState: DEPLOYED\n  jobManagerDeploymentStatus: DEPLOYING\n"))
	for _, tc := range []struct {
		name     string
		statuses []any
		want     map[string]any
	}{
		{"one copy", []any{"member1", running}, running},
		{"during a failover: the copy whose job runs", []any{"member1", failed, "member2", running}, running},
		{"no job runs: the first cluster's", []any{"member1", failed, "member2", deploying}, failed},
		{"nothing reported", nil, map[string]any{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, s.aggregate(t, tc.statuses...)); diff != "" {
				t.Errorf("aggregated (-want +got):\n%s", diff)
			}
		})
	}
}
