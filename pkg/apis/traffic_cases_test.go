package apis_test

import (
	"fmt"
	"strings"
)

// MultiClusterIngress spec.strategy (issue 32 item 2) is checked at
// kubectl apply: weights 0–1000 and for roundRobin only, primaryGeoTag and
// failoverOrder for failover only and not together, failover with one of
// them, a TTL of 1–3600 s; and every list and string a tenant writes there
// is bounded (the hub matches the groups against every backend cluster).
func init() {
	acceptedCases = append(acceptedCases, trafficAccepted...)
	refusedCases = append(refusedCases, trafficRefused...)
}

func trafficIngress(name, strategy string) string {
	return `
apiVersion: networking.flotilla.io/v1alpha1
kind: MultiClusterIngress
metadata:
  name: ` + name + `
  namespace: default
spec:
  rules:
  - host: ` + name + `.example.com
    http:
      paths:
      - path: /
        pathType: Prefix
        backend:
          service:
            name: web
            port:
              number: 80
  strategy:
` + strategy
}

// yamlList is n list items of indent spaces, each "- " + item(i).
func yamlList(indent, n int, item func(int) string) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%s- %s\n", strings.Repeat(" ", indent), item(i))
	}
	return b.String()
}

var trafficAccepted = []validationCase{
	{name: "strategy roundRobin with weights 0 and 1000 and a TTL of 1", yaml: trafficIngress("rr-weights", `
    type: roundRobin
    weight:
      member1: 1000
      member2: 0
    dnsTtlSeconds: 1
`)},
	{name: "strategy roundRobin alone, TTL 3600", yaml: trafficIngress("rr-plain", `
    type: roundRobin
    dnsTtlSeconds: 3600
`)},
	{name: "strategy failover with primaryGeoTag", yaml: trafficIngress("fo-geo", `
    type: failover
    primaryGeoTag: eu-west-1
`)},
	{name: "strategy failover with a failoverOrder of every selector kind", yaml: trafficIngress("fo-order", `
    type: failover
    failoverOrder:
    - affinityName: primary
      clusterNames: [member1, member2]
      exclude: [member3]
    - affinityName: gold
      labelSelector:
        matchLabels:
          tier: gold
        matchExpressions:
        - key: example.com/zone-class
          operator: In
          values: [a, b]
        - key: spare
          operator: DoesNotExist
    - affinityName: us
      fieldSelector:
        matchExpressions:
        - key: region
          operator: In
          values: [us-east-1]
`)},
	{name: "strategy failover with failoverOrder at its bounds (8 groups, 64 names)", yaml: trafficIngress("fo-bounds", `
    type: failover
    failoverOrder:
`+yamlList(4, 8, func(g int) string {
		return fmt.Sprintf("affinityName: g%d\n      clusterNames: [%s]", g, strings.TrimSuffix(strings.Repeat("m,", 64), ","))
	}))},
}

var trafficRefused = []validationCase{
	{name: "strategy: a negative weight", want: []string{"spec.strategy.weight", "each weight is between 0 and 1000"},
		yaml: trafficIngress("neg-weight", `
    type: roundRobin
    weight:
      member1: -1
`)},
	{name: "strategy: a weight above 1000", want: []string{"spec.strategy.weight", "each weight is between 0 and 1000"},
		yaml: trafficIngress("big-weight", `
    type: roundRobin
    weight:
      member1: 1001
`)},
	{name: "strategy: weight with failover", want: []string{"spec.strategy.weight", "weight applies to type roundRobin only"},
		yaml: trafficIngress("weight-failover", `
    type: failover
    primaryGeoTag: eu
    weight:
      member1: 10
`)},
	{name: "strategy: primaryGeoTag with roundRobin", want: []string{"spec.strategy.primaryGeoTag", "primaryGeoTag applies to type failover only"},
		yaml: trafficIngress("geo-rr", `
    type: roundRobin
    primaryGeoTag: eu
`)},
	{name: "strategy: failoverOrder with roundRobin", want: []string{"spec.strategy.failoverOrder", "failoverOrder applies to type failover only"},
		yaml: trafficIngress("order-rr", `
    type: roundRobin
    failoverOrder:
    - affinityName: a
      clusterNames: [member1]
`)},
	{name: "strategy: primaryGeoTag and failoverOrder together", want: []string{"spec.strategy.failoverOrder", "set primaryGeoTag or failoverOrder, not both"},
		yaml: trafficIngress("geo-and-order", `
    type: failover
    primaryGeoTag: eu
    failoverOrder:
    - affinityName: a
      clusterNames: [member1]
`)},
	{name: "strategy: failover with neither primaryGeoTag nor failoverOrder", want: []string{"spec.strategy.type", "type failover needs primaryGeoTag or failoverOrder"},
		yaml: trafficIngress("failover-bare", `
    type: failover
`)},
	{name: "strategy: TTL 3601", want: []string{"spec.strategy.dnsTtlSeconds", "should be less than or equal to 3600"},
		yaml: trafficIngress("ttl-big", `
    type: roundRobin
    dnsTtlSeconds: 3601
`)},
	{name: "strategy: an unknown type", want: []string{"spec.strategy.type", "Unsupported value"},
		yaml: trafficIngress("type-geoip", `
    type: geoip
`)},
	// A TTL of 0 and an empty primaryGeoTag, which a typed client drops:
	// TestZeroValuesRefusedAsKubectlSendsThem.
	{name: "strategy: a weight key longer than a cluster name", want: []string{"spec.strategy.weight", "a cluster name has at most 253 characters"},
		yaml: trafficIngress("weight-key", `
    type: roundRobin
    weight:
      `+strings.Repeat("m", 254)+`: 1
`)},
	{name: "strategy: more than 256 weights", want: []string{"spec.strategy.weight", "must have at most 256 items"},
		yaml: trafficIngress("weight-many", `
    type: roundRobin
    weight:
`+strings.Repeat(" ", 6)+strings.TrimSuffix(strings.Join(func() []string {
			var kv []string
			for i := range 257 {
				kv = append(kv, fmt.Sprintf("m%d: 1", i))
			}
			return kv
		}(), "\n      "), "\n")+"\n")},
	// Bounds on what a tenant makes the hub match against every cluster.
	{name: "strategy: 9 failover groups", want: []string{"spec.strategy.failoverOrder", "must have at most 8 items"},
		yaml: trafficIngress("order-nine", `
    type: failover
    failoverOrder:
`+yamlList(4, 9, func(g int) string { return fmt.Sprintf("affinityName: g%d", g) }))},
	{name: "strategy: a failover group of 65 cluster names", want: []string{"spec.strategy.failoverOrder[0].clusterNames", "must have at most 64 items"},
		yaml: trafficIngress("order-names", `
    type: failover
    failoverOrder:
    - affinityName: a
      clusterNames: [`+strings.TrimSuffix(strings.Repeat("m,", 65), ",")+`]
`)},
	{name: "strategy: a failover group excluding 65 clusters", want: []string{"spec.strategy.failoverOrder[0].exclude", "must have at most 64 items"},
		yaml: trafficIngress("order-exclude", `
    type: failover
    failoverOrder:
    - affinityName: a
      exclude: [`+strings.TrimSuffix(strings.Repeat("m,", 65), ",")+`]
`)},
	{name: "strategy: a failover cluster name of 254 characters", want: []string{"spec.strategy.failoverOrder[0].clusterNames[0]", "may not be more than 253 bytes"},
		yaml: trafficIngress("order-long-name", `
    type: failover
    failoverOrder:
    - affinityName: a
      clusterNames: [`+strings.Repeat("m", 254)+`]
`)},
	{name: "strategy: 17 label expressions", want: []string{"spec.strategy.failoverOrder[0].labelSelector.matchExpressions", "must have at most 16 items"},
		yaml: trafficIngress("order-exprs", `
    type: failover
    failoverOrder:
    - affinityName: a
      labelSelector:
        matchExpressions:
`+yamlList(8, 17, func(i int) string { return fmt.Sprintf("{key: k%d, operator: Exists}", i) }))},
	{name: "strategy: 65 label values", want: []string{"spec.strategy.failoverOrder[0].labelSelector.matchExpressions[0].values", "must have at most 64 items"},
		yaml: trafficIngress("order-values", `
    type: failover
    failoverOrder:
    - affinityName: a
      labelSelector:
        matchExpressions:
        - key: tier
          operator: In
          values: [`+strings.TrimSuffix(strings.Repeat("v,", 65), ",")+`]
`)},
	{name: "strategy: a label value of 64 characters", want: []string{"spec.strategy.failoverOrder[0].labelSelector.matchExpressions[0].values[0]", "may not be more than 63 bytes"},
		yaml: trafficIngress("order-long-value", `
    type: failover
    failoverOrder:
    - affinityName: a
      labelSelector:
        matchExpressions:
        - key: tier
          operator: In
          values: [`+strings.Repeat("v", 64)+`]
`)},
	{name: "strategy: a label operator that is not one", want: []string{"spec.strategy.failoverOrder[0].labelSelector.matchExpressions[0].operator", "Unsupported value"},
		yaml: trafficIngress("order-operator", `
    type: failover
    failoverOrder:
    - affinityName: a
      labelSelector:
        matchExpressions:
        - key: tier
          operator: Like
`)},
	{name: "strategy: In without values", want: []string{"spec.strategy.failoverOrder[0].labelSelector.matchExpressions[0].values", "In and NotIn need values"},
		yaml: trafficIngress("order-in-empty", `
    type: failover
    failoverOrder:
    - affinityName: a
      labelSelector:
        matchExpressions:
        - key: tier
          operator: In
`)},
	{name: "strategy: 17 matchLabels", want: []string{"spec.strategy.failoverOrder[0].labelSelector.matchLabels", "must have at most 16 items"},
		yaml: trafficIngress("order-match-labels", `
    type: failover
    failoverOrder:
    - affinityName: a
      labelSelector:
        matchLabels:
`+strings.Repeat(" ", 10)+strings.TrimSuffix(strings.Join(func() []string {
			var kv []string
			for i := range 17 {
				kv = append(kv, fmt.Sprintf("k%d: v", i))
			}
			return kv
		}(), "\n"+strings.Repeat(" ", 10)), "\n")+"\n")},
	{name: "strategy: a matchLabels value of 64 characters", want: []string{"spec.strategy.failoverOrder[0].labelSelector.matchLabels", "a label key has at most 317 characters and a value at most 63"},
		yaml: trafficIngress("order-label-value", `
    type: failover
    failoverOrder:
    - affinityName: a
      labelSelector:
        matchLabels:
          tier: `+strings.Repeat("v", 64)+`
`)},
	{name: "strategy: 9 field expressions", want: []string{"spec.strategy.failoverOrder[0].fieldSelector.matchExpressions", "must have at most 8 items"},
		yaml: trafficIngress("order-fields", `
    type: failover
    failoverOrder:
    - affinityName: a
      fieldSelector:
        matchExpressions:
`+yamlList(8, 9, func(int) string { return "{key: region, operator: In, values: [eu]}" }))},
	{name: "strategy: a field value of 254 characters", want: []string{"spec.strategy.failoverOrder[0].fieldSelector.matchExpressions[0].values[0]", "may not be more than 253 bytes"},
		yaml: trafficIngress("order-field-value", `
    type: failover
    failoverOrder:
    - affinityName: a
      fieldSelector:
        matchExpressions:
        - key: region
          operator: In
          values: [`+strings.Repeat("r", 254)+`]
`)},
	{name: "strategy: a primaryGeoTag of 254 characters", want: []string{"spec.strategy.primaryGeoTag", "may not be more than 253 bytes"},
		yaml: trafficIngress("geo-long", `
    type: failover
    primaryGeoTag: `+strings.Repeat("r", 254)+`
`)},
}
