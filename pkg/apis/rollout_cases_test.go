package apis_test

// rolloutStrategy (issue 38 item 1) is checked at kubectl apply: the type
// and its configuration go together, group names are DNS labels and not
// "remaining", concurrency is a positive number or percentage, failures a
// number or percentage, lists and strings are bounded.
func init() {
	acceptedCases = append(acceptedCases, rolloutAccepted...)
	refusedCases = append(refusedCases, rolloutRefused...)
}

func rolloutPolicy(name, strategy string) string {
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
    name: web
  rolloutStrategy:
` + strategy
}

var rolloutAccepted = []validationCase{
	{name: "rollout All", yaml: rolloutPolicy("rollout-all", `    type: All
`)},
	{name: "rollout Progressive", yaml: rolloutPolicy("rollout-progressive", `    type: Progressive
    progressive:
      maxConcurrency: 25%
      minSuccessTime: 1m
      progressDeadline: 10m
      maxFailures: 1
      sortingLabelKey: topology.kubernetes.io/region
    rollback:
      type: Progressive
`)},
	{name: "rollout ProgressivePerGroup", yaml: rolloutPolicy("rollout-groups", `    type: ProgressivePerGroup
    progressivePerGroup:
      minSuccessTime: 30s
      progressDeadline: 5m
      maxFailures: 10%
      decisionGroups:
      - groupName: canary
        groupClusterSelector:
          labelSelector:
            matchLabels:
              ring: canary
        approval: Required
        analysis:
          prometheus:
            query: sum(rate(http_requests_total{code=~"5..",cluster=~"{{clusters}}"}[2m])) / sum(rate(http_requests_total{cluster=~"{{clusters}}"}[2m]))
          successCondition: result < 0.01
          failureCondition: result >= 0.05
          interval: 30s
          count: 3
      - groupName: early
        groupClusterSelector:
          labelSelector:
            matchExpressions:
            - {key: ring, operator: In, values: [early]}
        maxConcurrency: 2
    rollback: {}
    revisionHistoryLimit: 5
`)},
}

var rolloutRefused = []validationCase{
	{name: "rollout Progressive without progressive", want: []string{"spec.rolloutStrategy.progressive", "type Progressive needs progressive"},
		yaml: rolloutPolicy("rollout-bad-1", `    type: Progressive
`)},
	{name: "rollout progressivePerGroup for type All", want: []string{"progressivePerGroup is only for type ProgressivePerGroup"},
		yaml: rolloutPolicy("rollout-bad-2", `    progressivePerGroup:
      decisionGroups:
      - groupName: canary
        groupClusterSelector:
          labelSelector: {}
`)},
	{name: "rollout group named remaining", want: []string{"the group name remaining is the clusters no group selects"},
		yaml: rolloutPolicy("rollout-bad-3", `    type: ProgressivePerGroup
    progressivePerGroup:
      decisionGroups:
      - groupName: remaining
        groupClusterSelector:
          labelSelector: {}
`)},
	{name: "rollout group name not a DNS label", want: []string{"spec.rolloutStrategy.progressivePerGroup.decisionGroups[0].groupName"},
		yaml: rolloutPolicy("rollout-bad-4", `    type: ProgressivePerGroup
    progressivePerGroup:
      decisionGroups:
      - groupName: Canary/1
        groupClusterSelector:
          labelSelector: {}
`)},
	{name: "rollout maxConcurrency 0", want: []string{"spec.rolloutStrategy.progressive.maxConcurrency", "maxConcurrency must be a number from 1"},
		yaml: rolloutPolicy("rollout-bad-5", `    type: Progressive
    progressive:
      maxConcurrency: 0
`)},
	{name: "rollout maxFailures over 100%", want: []string{"spec.rolloutStrategy.progressive.maxFailures", "maxFailures must be a number from 0"},
		yaml: rolloutPolicy("rollout-bad-6", `    type: Progressive
    progressive:
      maxFailures: 150%
`)},
	{name: "rollout two groups of one name", want: []string{"spec.rolloutStrategy.progressivePerGroup.decisionGroups[1]", "Duplicate value"},
		yaml: rolloutPolicy("rollout-bad-7", `    type: ProgressivePerGroup
    progressivePerGroup:
      decisionGroups:
      - groupName: canary
        groupClusterSelector:
          labelSelector: {}
      - groupName: canary
        groupClusterSelector:
          labelSelector: {}
`)},
	{name: "rollout unknown type", want: []string{"spec.rolloutStrategy.type", "Unsupported value"},
		yaml: rolloutPolicy("rollout-bad-8", `    type: Canary
`)},
	{name: "rollout revisionHistoryLimit 0", want: []string{"spec.rolloutStrategy.revisionHistoryLimit"},
		yaml: rolloutPolicy("rollout-bad-9", `    revisionHistoryLimit: 0
`)},
	{name: "rollout analysis without successCondition", want: []string{"successCondition"},
		yaml: rolloutPolicy("rollout-bad-10", `    type: ProgressivePerGroup
    progressivePerGroup:
      decisionGroups:
      - groupName: canary
        groupClusterSelector:
          labelSelector: {}
        analysis:
          prometheus:
            query: up
`)},
}
