package apis_test

// schedulePriority (issue 39, Karmada's shape): only KubePriorityClass,
// and a name that can name a PriorityClass, on both policy kinds; the
// binding's resolved priority is bounded to 1e9.
func init() {
	acceptedCases = append(acceptedCases, schedulePriorityAccepted...)
	refusedCases = append(refusedCases, schedulePriorityRefused...)
}

var schedulePriorityAccepted = []validationCase{
	{name: "PropagationPolicy with schedulePriority (Karmada's user guide)", yaml: `
apiVersion: policy.flotilla.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: critical-app-policy
  namespace: default
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
    name: critical-nginx
  schedulePriority:
    priorityClassSource: KubePriorityClass
    priorityClassName: high-priority-example
  placement:
    clusterAffinity:
      clusterNames: [member1, member2]
`},
	{name: "ClusterPropagationPolicy with schedulePriority", yaml: `
apiVersion: policy.flotilla.io/v1alpha1
kind: ClusterPropagationPolicy
metadata:
  name: critical-cluster-policy
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
  schedulePriority:
    priorityClassSource: KubePriorityClass
    priorityClassName: system-cluster-critical
`},
}

var schedulePriorityRefused = []validationCase{
	{name: "schedulePriority PodPriorityClass", want: []string{"spec.schedulePriority", "priorityClassSource must be KubePriorityClass"}, yaml: `
apiVersion: policy.flotilla.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: pod-priority
  namespace: default
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
  schedulePriority:
    priorityClassSource: PodPriorityClass
    priorityClassName: high
`},
	{name: "schedulePriority name not a PriorityClass name", want: []string{"spec.schedulePriority.priorityClassName", "must be the name of a PriorityClass"}, yaml: `
apiVersion: policy.flotilla.io/v1alpha1
kind: ClusterPropagationPolicy
metadata:
  name: bad-class-name
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
  schedulePriority:
    priorityClassSource: KubePriorityClass
    priorityClassName: High_Priority
`},
	{name: "schedulePriority without priorityClassName", want: []string{"spec.schedulePriority.priorityClassName", "at least 1 chars long"}, yaml: `
apiVersion: policy.flotilla.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: no-class-name
  namespace: default
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
  schedulePriority:
    priorityClassSource: KubePriorityClass
`},
	{name: "binding schedulePriority above 1e9", want: []string{"spec.schedulePriority.priority", "1000000000"}, yaml: `
apiVersion: work.flotilla.io/v1alpha1
kind: ResourceBinding
metadata:
  name: too-high
  namespace: default
spec:
  resource:
    apiVersion: apps/v1
    kind: Deployment
    name: nginx
  schedulePriority:
    priority: 2000000000
`},
}
