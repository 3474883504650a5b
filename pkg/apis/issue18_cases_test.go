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

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla-io/flotilla/pkg/testenv"
)

// Issue 18's knobs (failback, preConditions, blockPredecessorSeconds,
// applyStrategy, dependencies, WorkloadRebalancer): bad values are refused
// at kubectl apply with the field named, and every example applies as
// written.
func init() {
	acceptedCases = append(acceptedCases, issue18Accepted...)
	refusedCases = append(refusedCases, issue18Refused...)
	// These examples have names of their own.
	for _, name := range []string{"application-failover-knobs.yaml", "apply-strategy.yaml", "stateful-failover.yaml", "rollout.yaml"} {
		acceptedCases = append(acceptedCases, exampleCases(name, "")...)
	}
	// These reuse the seed's names (nginx): they go to their own namespace
	// so they do not collide with the cases above.
	for _, name := range []string{"failback.yaml", "workload-rebalancer.yaml", "dependencies.yaml"} {
		acceptedCases = append(acceptedCases, exampleCases(name, "other")...)
	}
}

// exampleCases are the documents of examples/name, moved from namespace
// default to ns when ns is set.
func exampleCases(name, ns string) []validationCase {
	example, err := os.ReadFile(filepath.Join("../../examples", name))
	if err != nil {
		panic(err)
	}
	text := string(example)
	if ns != "" {
		text = strings.ReplaceAll(text, "namespace: default", "namespace: "+ns)
	}
	var cases []validationCase
	for i, doc := range strings.Split(text, "\n---\n") {
		if strings.TrimSpace(doc) != "" {
			cases = append(cases, validationCase{name: fmt.Sprintf("examples/%s document %d", name, i+1), yaml: doc})
		}
	}
	return cases
}

// issue18Policy is a PropagationPolicy whose spec ends with extra (indented
// two spaces, under spec).
func issue18Policy(name, extra string) string {
	return `
apiVersion: policy.flotilla.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: ` + name + `
  namespace: default
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
` + extra
}

var issue18Accepted = []validationCase{
	{name: "PropagationPolicy with every issue-18 field", yaml: issue18Policy("issue18-everything", `  propagateDeps: true
  dependentOverrides: [nginx-override]
  applyStrategy: CreateOnly
  conflictResolution: Overwrite
  failover:
    application:
      preConditions:
        delaySeconds: 0
        healthyState: Healthy
      decisionConditions:
        tolerationSeconds: 30
      blockPredecessorSeconds: 0
      purgeMode: Never
    failback:
      stabilizationWindowSeconds: 1
      maxConcurrent: 1
`)},
	{name: "failback with its defaults", yaml: issue18Policy("issue18-failback-defaults", `  failover:
    failback: {}
`)},
	{name: "ResourceTemplate with explicit dependencies", yaml: `
apiVersion: work.flotilla.io/v1alpha1
kind: ResourceTemplate
metadata:
  name: issue18-web
  namespace: default
spec:
  dependencies:
  - apiVersion: v1
    kind: ConfigMap
    name: web-config
  manifest:
    apiVersion: apps/v1
    kind: Deployment
    metadata:
      name: issue18-web
    spec:
      selector:
        matchLabels: {app: web}
      template:
        metadata:
          labels: {app: web}
        spec:
          containers:
          - name: web
            image: nginx
`},
	{name: "WorkloadRebalancer", yaml: `
apiVersion: apps.flotilla.io/v1alpha1
kind: WorkloadRebalancer
metadata:
  name: issue18-rebalance
spec:
  ttlSecondsAfterFinished: 0
  workloads:
  - apiVersion: apps/v1
    kind: Deployment
    namespace: default
    name: nginx
  - apiVersion: v1
    kind: Namespace
    name: shop
`},
}

var issue18Refused = []validationCase{
	{name: "preConditions healthyState other than Healthy", want: []string{"spec.failover.application.preConditions.healthyState", `Unsupported value: "Unhealthy"`},
		yaml: issue18Policy("issue18-healthy-state", `  failover:
    application:
      preConditions:
        healthyState: Unhealthy
`)},
	{name: "negative preConditions delaySeconds", want: []string{"spec.failover.application.preConditions.delaySeconds", "should be greater than or equal to 0"},
		yaml: issue18Policy("issue18-delay", `  failover:
    application:
      preConditions:
        delaySeconds: -1
`)},
	{name: "negative blockPredecessorSeconds", want: []string{"spec.failover.application.blockPredecessorSeconds", "should be greater than or equal to 0"},
		yaml: issue18Policy("issue18-block", `  failover:
    application:
      blockPredecessorSeconds: -5
`)},
	{name: "unknown applyStrategy", want: []string{"spec.applyStrategy", `Unsupported value: "Replace"`},
		yaml: issue18Policy("issue18-apply", `  applyStrategy: Replace
`)},
	{name: "empty dependentOverrides name", want: []string{"spec.dependentOverrides[0]", "should be at least 1 chars long"},
		yaml: issue18Policy("issue18-dep-overrides", `  dependentOverrides: [""]
`)},
	{name: "template dependency with an empty name", want: []string{"spec.dependencies[0].name", "should be at least 1 chars long"}, yaml: `
apiVersion: work.flotilla.io/v1alpha1
kind: ResourceTemplate
metadata:
  name: issue18-bad-dependency
  namespace: default
spec:
  dependencies:
  - apiVersion: v1
    kind: ConfigMap
    name: ""
  manifest:
    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: issue18-bad-dependency
`},
	{name: "WorkloadRebalancer without workloads", want: []string{"spec.workloads", "should have at least 1 items"}, yaml: `
apiVersion: apps.flotilla.io/v1alpha1
kind: WorkloadRebalancer
metadata:
  name: issue18-empty
spec:
  workloads: []
`},
	{name: "WorkloadRebalancer with a negative TTL", want: []string{"spec.ttlSecondsAfterFinished", "should be greater than or equal to 0"}, yaml: `
apiVersion: apps.flotilla.io/v1alpha1
kind: WorkloadRebalancer
metadata:
  name: issue18-ttl
spec:
  ttlSecondsAfterFinished: -1
  workloads:
  - apiVersion: apps/v1
    kind: Deployment
    namespace: default
    name: nginx
`},
}

// TestZeroValuesRefusedAsKubectlSendsThem: a typed Go client drops a zero
// int32 or an empty string (omitempty) and the default applies, but
// kubectl sends the 0 or "" the user wrote: the apiserver must refuse it
// with the field named.
func TestZeroValuesRefusedAsKubectlSendsThem(t *testing.T) {
	env := testenv.Start(t)
	cs := versioned.NewForConfigOrDie(env.Config)
	policy := func(spec string) string {
		return `{"apiVersion":"policy.flotilla.io/v1alpha1","kind":"PropagationPolicy","metadata":{"name":"zero","namespace":"default"},` +
			`"spec":{"resourceSelectors":[{"apiVersion":"apps/v1","kind":"Deployment"}],` + spec + `}}`
	}
	ingress := func(strategy string) string {
		return `{"apiVersion":"networking.flotilla.io/v1alpha1","kind":"MultiClusterIngress","metadata":{"name":"zero","namespace":"default"},` +
			`"spec":{"rules":[{"host":"zero.example.com"}],"strategy":` + strategy + `}}`
	}
	for _, tc := range []struct {
		field, resource, body, want string
	}{
		{"spec.failover.failback.stabilizationWindowSeconds", "propagationpolicies", policy(`"failover":{"failback":{"stabilizationWindowSeconds":0}}`),
			"should be greater than or equal to 1"},
		{"spec.failover.failback.maxConcurrent", "propagationpolicies", policy(`"failover":{"failback":{"maxConcurrent":0}}`),
			"should be greater than or equal to 1"},
		{"spec.strategy.dnsTtlSeconds", "multiclusteringresses", ingress(`{"type":"roundRobin","dnsTtlSeconds":0}`),
			"should be greater than or equal to 1"},
		{"spec.strategy.primaryGeoTag", "multiclusteringresses", ingress(`{"type":"failover","primaryGeoTag":""}`),
			"should be at least 1 chars long"},
	} {
		t.Run(tc.field, func(t *testing.T) {
			client := cs.PolicyV1alpha1().RESTClient()
			if tc.resource == "multiclusteringresses" {
				client = cs.NetworkingV1alpha1().RESTClient()
			}
			err := client.Post().Namespace("default").Resource(tc.resource).
				SetHeader("Content-Type", "application/json").Body([]byte(tc.body)).Do(t.Context()).Error()
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want an Invalid error, got %v", err)
			}
			for _, want := range []string{tc.field, tc.want} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error does not mention %q: %v", want, err)
				}
			}
		})
	}
}
