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

package apis_test

// Stateful failover (failover.{cluster,application}.statePreservation):
// the CRD refuses a jsonPath without braces and an aliasLabelName that is
// not a label key at kubectl apply. A path that passes the CRD but not
// kubectl's JSONPath parser is accepted here and reported by the hub on
// the binding and template when a failover reads it (pkg/statepreservation).
func init() {
	acceptedCases = append(acceptedCases, statePreservationAccepted...)
	refusedCases = append(refusedCases, statePreservationRefused...)
}

var statePreservationAccepted = []validationCase{
	{name: "PropagationPolicy with cluster and application statePreservation", yaml: `
apiVersion: policy.flotilla.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: flink-stateful
  namespace: default
spec:
  resourceSelectors:
  - apiVersion: flink.example.io/v1beta1
    kind: FlinkDeployment
  failover:
    cluster:
      purgeMode: Directly
      statePreservation:
        rules:
        - aliasLabelName: flink.example.io/checkpoint-path
          jsonPath: "{.jobStatus.checkpointPath}"
        - aliasLabelName: job-state
          jsonPath: '{.conditions[?(@.type=="Ready")].status}'
    application:
      decisionConditions:
        tolerationSeconds: 60
      purgeMode: Gracefully
      statePreservation:
        rules:
        - aliasLabelName: flink.example.io/checkpoint-path
          jsonPath: "{.jobStatus.checkpointPath}"
`},
	{name: "statePreservation jsonPath the CRD cannot parse is left to the hub", yaml: `
apiVersion: policy.flotilla.io/v1alpha1
kind: ClusterPropagationPolicy
metadata:
  name: flink-unparsable-path
spec:
  resourceSelectors:
  - apiVersion: flink.example.io/v1beta1
    kind: FlinkDeployment
  failover:
    cluster:
      statePreservation:
        rules:
        - aliasLabelName: checkpoint
          jsonPath: "{.jobStatus.{}"
`},
}

var statePreservationRefused = []validationCase{
	{name: "statePreservation jsonPath without braces", want: []string{"spec.failover.cluster.statePreservation.rules[0].jsonPath", "JSONPath template in braces"}, yaml: `
apiVersion: policy.flotilla.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: sp-no-braces
  namespace: default
spec:
  resourceSelectors:
  - apiVersion: flink.example.io/v1beta1
    kind: FlinkDeployment
  failover:
    cluster:
      statePreservation:
        rules:
        - aliasLabelName: checkpoint
          jsonPath: .jobStatus.checkpointPath
`},
	{name: "statePreservation aliasLabelName not a label key", want: []string{"spec.failover.application.statePreservation.rules[0].aliasLabelName", "should match"}, yaml: `
apiVersion: policy.flotilla.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: sp-bad-label
  namespace: default
spec:
  resourceSelectors:
  - apiVersion: flink.example.io/v1beta1
    kind: FlinkDeployment
  failover:
    application:
      statePreservation:
        rules:
        - aliasLabelName: "checkpoint path!"
          jsonPath: "{.jobStatus.checkpointPath}"
`},
	{name: "statePreservation without rules", want: []string{"spec.failover.cluster.statePreservation.rules"}, yaml: `
apiVersion: policy.flotilla.io/v1alpha1
kind: ClusterPropagationPolicy
metadata:
  name: sp-no-rules
spec:
  resourceSelectors:
  - apiVersion: flink.example.io/v1beta1
    kind: FlinkDeployment
  failover:
    cluster:
      statePreservation:
        rules: []
`},
	{name: "statePreservation with a duplicate label", want: []string{"spec.failover.cluster.statePreservation.rules[1]", "Duplicate value"}, yaml: `
apiVersion: policy.flotilla.io/v1alpha1
kind: ClusterPropagationPolicy
metadata:
  name: sp-duplicate-label
spec:
  resourceSelectors:
  - apiVersion: flink.example.io/v1beta1
    kind: FlinkDeployment
  failover:
    cluster:
      statePreservation:
        rules:
        - aliasLabelName: checkpoint
          jsonPath: "{.a}"
        - aliasLabelName: checkpoint
          jsonPath: "{.b}"
`},
}
