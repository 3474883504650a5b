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

import "fmt"

// acceptedCases are valid objects of every kind, written as a user (or a
// Karmada user, with karmada.io changed to flotilla.io) would. They are
// created in order; later subtests read some of them back.
var acceptedCases = []validationCase{
	{name: "Cluster with hub taints", yaml: `
apiVersion: cluster.flotilla.io/v1alpha1
kind: Cluster
metadata:
  name: member1
spec:
  id: 0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0
  syncMode: Pull
  apiEndpoint: https://127.0.0.1:32001
  provider: kwok
  region: eu-west
  zones: [eu-west-1a, eu-west-1b]
  taints:
  - key: cluster.flotilla.io/unreachable
    effect: NoSchedule
    timeAdded: "2025-06-01T10:00:00Z"
  - key: cluster.flotilla.io/unreachable
    effect: NoExecute
    timeAdded: "2025-06-01T10:05:00Z"
`},
	{name: "Cluster with defaults", yaml: `
apiVersion: cluster.flotilla.io/v1alpha1
kind: Cluster
metadata:
  name: member2
spec: {}
`},
	{name: "ClusterTaintPolicy", yaml: `
apiVersion: cluster.flotilla.io/v1alpha1
kind: ClusterTaintPolicy
metadata:
  name: network-failure
spec:
  targetClusters:
    clusterNames: [member1, member2]
  addOnConditions:
  - conditionType: NetworkReady
    operator: In
    statusValues: ["False", "Unknown"]
  removeOnConditions:
  - conditionType: NetworkReady
    operator: In
    statusValues: ["True"]
  taints:
  - key: network-unreachable
    effect: NoSchedule
  - key: network-unreachable
    effect: NoExecute
`},
	{name: "ResourceTemplate in its own namespace", yaml: `
apiVersion: work.flotilla.io/v1alpha1
kind: ResourceTemplate
metadata:
  name: nginx
  namespace: default
spec:
  manifest:
    apiVersion: apps/v1
    kind: Deployment
    metadata:
      name: nginx
      namespace: default
      labels:
        app: nginx
    spec:
      replicas: 3
      selector:
        matchLabels:
          app: nginx
      template:
        metadata:
          labels:
            app: nginx
        spec:
          containers:
          - image: nginx
            name: nginx
`},
	{name: "ResourceTemplate without a manifest namespace", yaml: `
apiVersion: work.flotilla.io/v1alpha1
kind: ResourceTemplate
metadata:
  name: web-config
  namespace: other
spec:
  manifest:
    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: web-config
    data:
      greeting: hello
`},
	{name: "ClusterResourceTemplate", yaml: `
apiVersion: work.flotilla.io/v1alpha1
kind: ClusterResourceTemplate
metadata:
  name: shop-namespace
spec:
  manifest:
    apiVersion: v1
    kind: Namespace
    metadata:
      name: shop
`},
	// Seed 000 / Karmada failover docs: Divided 1:2, with the application
	// failover proposal's spellings Graciously and Immediately.
	{name: "PropagationPolicy weighted with Karmada purge mode aliases", yaml: `
apiVersion: policy.flotilla.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: nginx-propagation
  namespace: default
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
    name: nginx
  placement:
    clusterAffinity:
      clusterNames:
      - member1
      - member2
    replicaScheduling:
      replicaDivisionPreference: Weighted
      replicaSchedulingType: Divided
      weightPreference:
        staticWeightList:
        - targetCluster:
            clusterNames:
            - member1
          weight: 1
        - targetCluster:
            clusterNames:
            - member2
          weight: 2
  failover:
    application:
      decisionConditions:
        tolerationSeconds: 120
      purgeMode: Graciously
      gracePeriodSeconds: 600
    cluster:
      purgeMode: Immediately
`},
	// Seed 001: Duplicated over four of five clusters, exactly two groups.
	{name: "PropagationPolicy duplicated with spread constraints", yaml: `
apiVersion: policy.flotilla.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: nginx-duplicated
  namespace: default
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
    name: nginx
  placement:
    clusterAffinity:
      clusterNames:
      - member1
      - member2
      - member3
      - member5
    spreadConstraints:
    - maxGroups: 2
      minGroups: 2
    replicaScheduling:
      replicaSchedulingType: Duplicated
`},
	{name: "PropagationPolicy with every placement and failover field", yaml: `
apiVersion: policy.flotilla.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: everything
  namespace: default
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
    labelSelector:
      matchLabels:
        tier: web
  - apiVersion: v1
    kind: ConfigMap
    namespace: default
    name: web-config
  priority: 10
  preemption: Always
  conflictResolution: Overwrite
  preserveResourcesOnDeletion: true
  suspension:
    dispatchingOnClusters:
      clusterNames: [member3]
  placement:
    clusterAffinity:
      labelSelector:
        matchLabels:
          env: prod
      fieldSelector:
        matchExpressions:
        - key: region
          operator: In
          values: [eu-west]
        - key: provider
          operator: NotIn
          values: [onprem]
      exclude: [member4]
    clusterTolerations:
    - key: cluster.flotilla.io/not-ready
      operator: Exists
      effect: NoExecute
      tolerationSeconds: 300
    - key: cluster.flotilla.io/unreachable
      operator: Exists
      effect: NoExecute
      tolerationSeconds: 300
    spreadConstraints:
    - spreadByField: cluster
      maxGroups: 3
      minGroups: 1
    - spreadByField: region
      minGroups: 2
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
      weightPreference:
        dynamicWeight: AvailableReplicas
  failover:
    application:
      decisionConditions:
        tolerationSeconds: 0
      purgeMode: Never
    cluster:
      purgeMode: Directly
`},
	{name: "ClusterPropagationPolicy with cluster affinities", yaml: `
apiVersion: policy.flotilla.io/v1alpha1
kind: ClusterPropagationPolicy
metadata:
  name: namespaces
spec:
  resourceSelectors:
  - apiVersion: v1
    kind: Namespace
  placement:
    clusterAffinities:
    - affinityName: primary
      clusterNames: [member1]
    - affinityName: backup
      labelSelector:
        matchLabels:
          role: backup
    spreadConstraints:
    - spreadByLabel: topology.example.com/site
      maxGroups: 1
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Aggregated
  failover:
    application:
      purgeMode: Directly
`},
	{name: "OverridePolicy with every overrider", yaml: `
apiVersion: policy.flotilla.io/v1alpha1
kind: OverridePolicy
metadata:
  name: nginx-override
  namespace: default
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
    name: nginx
  overrideRules:
  - targetCluster:
      clusterNames:
      - member2
    overriders:
      plaintext:
      - path: /spec/replicas
        operator: replace
        value: 2
      - path: /metadata/annotations/owner
        operator: add
        value: {"team": "web"}
      - path: /spec/paused
        operator: remove
      imageOverrider:
      - component: Registry
        operator: replace
        value: registry.example.com
      - predicate:
          path: /spec/template/spec/containers/0/image
        component: Tag
        operator: replace
        value: "1.27"
      commandOverrider:
      - containerName: nginx
        operator: add
        value: ["--debug"]
      argsOverrider:
      - containerName: nginx
        operator: remove
        value: ["--verbose"]
      labelsOverrider:
      - operator: add
        value:
          cluster: member2
      annotationsOverrider:
      - operator: remove
        value:
          deprecated: ""
`},
	{name: "ClusterOverridePolicy", yaml: `
apiVersion: policy.flotilla.io/v1alpha1
kind: ClusterOverridePolicy
metadata:
  name: mirror
spec:
  overrideRules:
  - overriders:
      imageOverrider:
      - component: Registry
        operator: replace
        value: mirror.example.com
`},
	{name: "ResourceBinding as the hub writes it", yaml: `
apiVersion: work.flotilla.io/v1alpha1
kind: ResourceBinding
metadata:
  name: nginx-deployment
  namespace: default
spec:
  resource:
    apiVersion: apps/v1
    kind: Deployment
    namespace: default
    name: nginx
    uid: 80672628-e8c9-462b-933b-037b51d79e59
    resourceVersion: "4711"
  replicas: 3
  replicaRequirements:
    resourceRequest:
      cpu: 100m
      memory: 64Mi
  placement:
    clusterAffinity:
      clusterNames: [member1, member2]
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
      weightPreference:
        staticWeightList:
        - targetCluster:
            clusterNames: [member1]
          weight: 1
        - targetCluster:
            clusterNames: [member2]
          weight: 2
  failover:
    cluster:
      purgeMode: Gracefully
  conflictResolution: Abort
  preserveResourcesOnDeletion: false
  clusters:
  - name: member2
    replicas: 3
  gracefulEvictionTasks:
  - fromCluster: member1
    purgeMode: Gracefully
    replicas: 1
    reason: TaintUntolerated
    message: cluster member1 is unreachable
    producer: TaintManager
    gracePeriodSeconds: 600
    clustersBeforeFailover: [member1, member2]
    creationTimestamp: "2025-06-01T10:05:00Z"
  evictionHistory:
  - clusterName: member3
    reason: ApplicationFailure
    evictedAt: "2025-06-01T09:00:00Z"
  rescheduleTriggeredAt: "2025-06-01T10:06:00Z"
`},
	{name: "ClusterResourceBinding", yaml: `
apiVersion: work.flotilla.io/v1alpha1
kind: ClusterResourceBinding
metadata:
  name: shop-namespace
spec:
  resource:
    apiVersion: v1
    kind: Namespace
    name: shop
  clusters:
  - name: member1
  - name: member2
`},
	{name: "Work", yaml: `
apiVersion: work.flotilla.io/v1alpha1
kind: Work
metadata:
  name: nginx
  namespace: flotilla-es-member1
spec:
  workload:
    manifests:
    - apiVersion: apps/v1
      kind: Deployment
      metadata:
        name: nginx
        namespace: default
      spec:
        replicas: 1
        selector:
          matchLabels:
            app: nginx
        template:
          metadata:
            labels:
              app: nginx
          spec:
            containers:
            - image: nginx
              name: nginx
    - apiVersion: v1
      kind: Service
      metadata:
        name: nginx
        namespace: default
      spec:
        selector:
          app: nginx
        ports:
        - port: 80
`},
	{name: "Work with strategies", yaml: `
apiVersion: work.flotilla.io/v1alpha1
kind: Work
metadata:
  name: adopt
  namespace: flotilla-es-member1
spec:
  applyStrategy: CreateOnly
  conflictResolution: Overwrite
  suspendDispatching: false
  preserveResourcesOnDeletion: true
  workload:
    manifests:
    - apiVersion: v1
      kind: ConfigMap
      metadata:
        name: settings
        namespace: default
`},
	// Seed 004.
	{name: "Remedy on a condition", yaml: `
apiVersion: remedy.flotilla.io/v1alpha1
kind: Remedy
metadata:
  name: dns-failure
spec:
  decisionMatches:
  - clusterConditionMatch:
      conditionType: ServiceDomainNameResolutionReady
      operator: Equal
      conditionStatus: "False"
  clusterAffinity:
    clusterNames:
    - member1
    - member2
  actions:
  - TrafficControl
`},
	{name: "Remedy without decision matches", yaml: `
apiVersion: remedy.flotilla.io/v1alpha1
kind: Remedy
metadata:
  name: upgrade-member1
spec:
  clusterAffinity:
    clusterNames:
    - member1
  actions:
  - TrafficControl
`},
	{name: "MultiClusterIngress", yaml: `
apiVersion: networking.flotilla.io/v1alpha1
kind: MultiClusterIngress
metadata:
  name: demo
  namespace: default
spec:
  rules:
  - host: demo.example.com
    http:
      paths:
      - path: /
        pathType: Prefix
        backend:
          service:
            name: web
            port:
              number: 80
`},
}

// rtOtherNamespace is a ResourceTemplate whose manifest names a namespace
// other than the template's; it also probes that the admission policy is
// enforced.
const rtOtherNamespace = `
apiVersion: work.flotilla.io/v1alpha1
kind: ResourceTemplate
metadata:
  name: elsewhere
  namespace: default
spec:
  manifest:
    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: elsewhere
      namespace: other
`

// refusedCases are invalid objects; each names the field the error message
// must mention.
var refusedCases = []validationCase{
	{name: "unknown preemption", want: []string{"spec.preemption", `Unsupported value: "Sometimes"`}, yaml: `
apiVersion: policy.flotilla.io/v1alpha1
kind: ClusterPropagationPolicy
metadata:
  name: bad-preemption
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
  preemption: Sometimes
`},
	{name: "Karmada's Push sync mode", want: []string{"spec.syncMode", `Unsupported value: "Push"`}, yaml: `
apiVersion: cluster.flotilla.io/v1alpha1
kind: Cluster
metadata:
  name: pushed
spec:
  syncMode: Push
`},
	{name: "unknown application purgeMode", want: []string{"spec.failover.application.purgeMode", `Unsupported value: "Sometimes"`}, yaml: `
apiVersion: policy.flotilla.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: bad-purge-mode
  namespace: default
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
  failover:
    application:
      purgeMode: Sometimes
`},
	{name: "unknown cluster purgeMode", want: []string{"spec.failover.cluster.purgeMode", `Unsupported value: "Later"`}, yaml: `
apiVersion: policy.flotilla.io/v1alpha1
kind: ClusterPropagationPolicy
metadata:
  name: bad-cluster-purge-mode
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
  failover:
    cluster:
      purgeMode: Later
`},
	{name: "gracePeriodSeconds with purgeMode Directly", want: []string{"spec.failover.application.gracePeriodSeconds", "only be set when purgeMode is Gracefully"}, yaml: `
apiVersion: policy.flotilla.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: grace-directly
  namespace: default
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
  failover:
    application:
      purgeMode: Directly
      gracePeriodSeconds: 60
`},
	{name: "gracePeriodSeconds with purgeMode Never", want: []string{"spec.failover.application.gracePeriodSeconds", "only be set when purgeMode is Gracefully"}, yaml: `
apiVersion: policy.flotilla.io/v1alpha1
kind: ClusterPropagationPolicy
metadata:
  name: grace-never
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
  failover:
    application:
      purgeMode: Never
      gracePeriodSeconds: 60
`},
	{name: "negative tolerationSeconds", want: []string{"spec.failover.application.decisionConditions.tolerationSeconds", "greater than or equal to 0"}, yaml: `
apiVersion: policy.flotilla.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: negative-toleration
  namespace: default
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
  failover:
    application:
      decisionConditions:
        tolerationSeconds: -1
`},
	{name: "negative cluster toleration", want: []string{"spec.placement.clusterTolerations", "tolerationSeconds must not be negative"}, yaml: `
apiVersion: policy.flotilla.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: negative-cluster-toleration
  namespace: default
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
  placement:
    clusterTolerations:
    - key: cluster.flotilla.io/unreachable
      operator: Exists
      effect: NoExecute
      tolerationSeconds: -5
`},
	{name: "static weight below 1", want: []string{"spec.placement.replicaScheduling.weightPreference.staticWeightList[1].weight", "greater than or equal to 1"}, yaml: `
apiVersion: policy.flotilla.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: zero-weight
  namespace: default
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
  placement:
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
      weightPreference:
        staticWeightList:
        - targetCluster:
            clusterNames: [member1]
          weight: 1
        - targetCluster:
            clusterNames: [member2]
          weight: 0
`},
	{name: "dynamicWeight with staticWeightList", want: []string{"spec.placement.replicaScheduling.weightPreference.dynamicWeight", "dynamicWeight and staticWeightList are mutually exclusive"}, yaml: `
apiVersion: policy.flotilla.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: both-weights
  namespace: default
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
  placement:
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
      weightPreference:
        dynamicWeight: AvailableReplicas
        staticWeightList:
        - targetCluster:
            clusterNames: [member1]
          weight: 1
`},
	{name: "minGroups greater than maxGroups", want: []string{"spec.placement.spreadConstraints[0].minGroups", "minGroups must not be greater than maxGroups"}, yaml: `
apiVersion: policy.flotilla.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: bad-spread
  namespace: default
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
  placement:
    spreadConstraints:
    - spreadByField: region
      minGroups: 3
      maxGroups: 2
    - spreadByField: cluster
`},
	{name: "spreadByField with spreadByLabel", want: []string{"spec.placement.spreadConstraints[0].spreadByLabel", "mutually exclusive"}, yaml: `
apiVersion: policy.flotilla.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: spread-both
  namespace: default
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
  placement:
    spreadConstraints:
    - spreadByField: region
      spreadByLabel: site
`},
	{name: "clusterAffinity with clusterAffinities", want: []string{"spec.placement.clusterAffinities", "mutually exclusive"}, yaml: `
apiVersion: policy.flotilla.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: both-affinities
  namespace: default
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
  placement:
    clusterAffinity:
      clusterNames: [member1]
    clusterAffinities:
    - affinityName: primary
      clusterNames: [member2]
`},
	{name: "field selector on an unknown field", want: []string{"spec.placement.clusterAffinity.fieldSelector.matchExpressions[0].key", `Unsupported value: "color"`}, yaml: `
apiVersion: policy.flotilla.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: bad-field-selector
  namespace: default
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
  placement:
    clusterAffinity:
      fieldSelector:
        matchExpressions:
        - key: color
          operator: In
          values: [blue]
`},
	{name: "Remedy operator other than Equal/NotEqual", want: []string{"spec.decisionMatches[0].clusterConditionMatch.operator", `Unsupported value: "In"`}, yaml: `
apiVersion: remedy.flotilla.io/v1alpha1
kind: Remedy
metadata:
  name: bad-operator
spec:
  decisionMatches:
  - clusterConditionMatch:
      conditionType: ServiceDomainNameResolutionReady
      operator: In
      conditionStatus: "False"
  actions:
  - TrafficControl
`},
	{name: "ResourceTemplate manifest without apiVersion", want: []string{"spec.manifest.apiVersion", "Required value"}, yaml: `
apiVersion: work.flotilla.io/v1alpha1
kind: ResourceTemplate
metadata:
  name: no-apiversion
  namespace: default
spec:
  manifest:
    kind: ConfigMap
    metadata:
      name: no-apiversion
`},
	{name: "ResourceTemplate manifest without kind", want: []string{"spec.manifest.kind", "Required value"}, yaml: `
apiVersion: work.flotilla.io/v1alpha1
kind: ResourceTemplate
metadata:
  name: no-kind
  namespace: default
spec:
  manifest:
    apiVersion: v1
    metadata:
      name: no-kind
`},
	{name: "ResourceTemplate manifest without metadata.name", want: []string{"spec.manifest", "manifest.metadata.name is required"}, yaml: `
apiVersion: work.flotilla.io/v1alpha1
kind: ResourceTemplate
metadata:
  name: no-name
  namespace: default
spec:
  manifest:
    apiVersion: v1
    kind: ConfigMap
    metadata:
      labels:
        app: web
`},
	{name: "ResourceTemplate manifest without metadata", want: []string{"spec.manifest", "manifest.metadata.name is required"}, yaml: `
apiVersion: work.flotilla.io/v1alpha1
kind: ResourceTemplate
metadata:
  name: no-metadata
  namespace: default
spec:
  manifest:
    apiVersion: v1
    kind: ConfigMap
`},
	{name: "ResourceTemplate manifest in another namespace", want: []string{"spec.manifest.metadata.namespace", `"other"`, `own namespace "default"`}, yaml: rtOtherNamespace},
	{name: "ClusterResourceTemplate manifest with a namespace", want: []string{"spec.manifest.metadata.namespace", `"default"`, "cluster-scoped"}, yaml: `
apiVersion: work.flotilla.io/v1alpha1
kind: ClusterResourceTemplate
metadata:
  name: namespaced-object
spec:
  manifest:
    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: namespaced-object
      namespace: default
`},
	{name: "ClusterResourceTemplate manifest without metadata.name", want: []string{"spec.manifest", "manifest.metadata.name is required"}, yaml: `
apiVersion: work.flotilla.io/v1alpha1
kind: ClusterResourceTemplate
metadata:
  name: unnamed
spec:
  manifest:
    apiVersion: v1
    kind: Namespace
`},
	{name: "Work with an empty manifest list", want: []string{"spec.workload.manifests", "should have at least 1 items"}, yaml: `
apiVersion: work.flotilla.io/v1alpha1
kind: Work
metadata:
  name: empty
  namespace: flotilla-es-member1
spec:
  workload:
    manifests: []
`},
	{name: "Work without a workload", want: []string{"spec.workload", "Required value"}, yaml: `
apiVersion: work.flotilla.io/v1alpha1
kind: Work
metadata:
  name: no-workload
  namespace: flotilla-es-member1
spec: {}
`},
	{name: "Cluster taint without a key", want: []string{"spec.taints", "every taint needs a key"}, yaml: `
apiVersion: cluster.flotilla.io/v1alpha1
kind: Cluster
metadata:
  name: keyless-taint
spec:
  taints:
  - key: ""
    effect: NoSchedule
`},
	{name: "Cluster taint with an unknown effect", want: []string{"spec.taints", "effect must be NoSchedule, PreferNoSchedule or NoExecute"}, yaml: `
apiVersion: cluster.flotilla.io/v1alpha1
kind: Cluster
metadata:
  name: bad-effect
spec:
  taints:
  - key: maintenance
    effect: Evict
`},
	{name: "ClusterTaintPolicy without conditions", want: []string{"spec", "at least one of addOnConditions and removeOnConditions"}, yaml: `
apiVersion: cluster.flotilla.io/v1alpha1
kind: ClusterTaintPolicy
metadata:
  name: no-conditions
spec:
  taints:
  - key: maintenance
    effect: NoSchedule
`},
}

// overrideIdentityCases: an override may not change what object it applies
// to. Every identity path is refused in a plaintext overrider and in an image
// predicate, in an OverridePolicy and in a ClusterOverridePolicy; paths next
// to the identity (labels, a field named like an identity field) are not.
func overrideIdentityCases() []validationCase {
	policy := func(kind, name, overriders string) string {
		ns := ""
		if kind == "OverridePolicy" {
			ns = "\n  namespace: default"
		}
		return `
apiVersion: policy.flotilla.io/v1alpha1
kind: ` + kind + `
metadata:
  name: ` + name + ns + `
spec:
  overrideRules:
  - overriders:
` + overriders
	}
	plaintext := func(op, path string) string {
		return "      plaintext:\n      - path: " + path + "\n        operator: " + op + "\n        value: x\n"
	}
	image := func(path string) string {
		return "      imageOverrider:\n      - predicate:\n          path: " + path + "\n        component: Tag\n        operator: replace\n        value: x\n"
	}
	var cases []validationCase
	for i, kind := range []string{"OverridePolicy", "ClusterOverridePolicy"} {
		for j, p := range []struct{ op, path string }{
			{"replace", "/apiVersion"}, {"replace", "/kind"}, {"add", "/kind/x"}, {"replace", "/metadata"}, {"remove", "/metadata/"},
			{"replace", "/metadata/name"}, {"replace", "/metadata/namespace"}, {"add", "/metadata/namespace"},
			{"remove", "/metadata/namespace"}, {"add", "/metadata/generateName"}, {"replace", "/metadata/name/x"},
		} {
			cases = append(cases, validationCase{
				name: fmt.Sprintf("%s plaintext %s %s", kind, p.op, p.path),
				want: []string{"spec.overrideRules[0].overriders.plaintext[0]", "may not change the object's identity"},
				yaml: policy(kind, fmt.Sprintf("identity-%d-%d", i, j), plaintext(p.op, p.path)),
			})
		}
		for j, path := range []string{"/apiVersion", "/kind", "/metadata/name", "/metadata/namespace", "/metadata/labels/app"} {
			cases = append(cases, validationCase{
				name: fmt.Sprintf("%s image predicate %s", kind, path),
				want: []string{"spec.overrideRules[0].overriders.imageOverrider[0].predicate", "an image overrider changes images only"},
				yaml: policy(kind, fmt.Sprintf("image-identity-%d-%d", i, j), image(path)),
			})
		}
		for j, p := range []struct{ op, path string }{
			{"add", "/metadata/labels/x"}, {"replace", "/spec/replicas"}, {"add", "/metadata/annotations/name"},
			{"add", "/spec/template/metadata/namespace"}, {"add", "/metadata/namespaces"}, {"add", "/kinds"},
		} {
			cases = append(cases, validationCase{
				name: fmt.Sprintf("%s plaintext %s %s accepted", kind, p.op, p.path),
				yaml: policy(kind, fmt.Sprintf("not-identity-%d-%d", i, j), plaintext(p.op, p.path)),
			})
		}
	}
	return cases
}
