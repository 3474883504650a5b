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

// clusterAffinities[].overflowAffinities (Karmada v1.18): Karmada's
// example ports as it is; its webhook's rule (overflow only with Divided
// replicas spread by room) is the CRD's, refused at kubectl apply.
func init() {
	acceptedCases = append(acceptedCases, overflowAccepted...)
	refusedCases = append(refusedCases, overflowRefused...)
}

func overflowPolicy(name, replicaScheduling string) string {
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
    name: nginx
  placement:
    clusterAffinities:
    - affinityName: on-prem
      clusterNames: [member1]
      overflowAffinities:
      - affinityName: public-cloud
        clusterNames: [member2, member3]
` + replicaScheduling
}

var overflowAccepted = []validationCase{
	{name: "overflowAffinities with dynamic weight (Karmada's example)", yaml: overflowPolicy("overflow-dynamic", `
    replicaScheduling:
      replicaDivisionPreference: Weighted
      replicaSchedulingType: Divided
      weightPreference:
        dynamicWeight: AvailableReplicas
`)},
	{name: "overflowAffinities with Aggregated and the default Divided", yaml: overflowPolicy("overflow-aggregated", `
    replicaScheduling:
      replicaDivisionPreference: Aggregated
`)},
}

var overflowRefused = []validationCase{
	{name: "overflowAffinities without replicaScheduling", want: []string{"spec.placement.clusterAffinities", "overflowAffinities can only be used together with dynamic weight or aggregated scheduling"},
		yaml: overflowPolicy("overflow-none", "")},
	{name: "overflowAffinities with Duplicated", want: []string{"spec.placement.clusterAffinities", "overflowAffinities can only be used"}, yaml: overflowPolicy("overflow-duplicated", `
    replicaScheduling:
      replicaSchedulingType: Duplicated
`)},
	{name: "overflowAffinities with static weights", want: []string{"spec.placement.clusterAffinities", "overflowAffinities can only be used"}, yaml: overflowPolicy("overflow-static", `
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
      weightPreference:
        staticWeightList:
        - targetCluster:
            clusterNames: [member1]
          weight: 1
`)},
	{name: "overflow group without affinityName", want: []string{"affinityName"}, yaml: `
apiVersion: policy.flotilla.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: overflow-unnamed
  namespace: default
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
  placement:
    clusterAffinities:
    - affinityName: on-prem
      clusterNames: [member1]
      overflowAffinities:
      - clusterNames: [member2]
    replicaScheduling:
      replicaDivisionPreference: Aggregated
`},
}
