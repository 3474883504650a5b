package apis_test

// Spread constraints are checked at kubectl apply as Karmada's
// ValidateSpreadConstraint checks them (issue 31 item 3): spreadByField and
// spreadByLabel apart, minGroups not above maxGroups, each field once, and
// a cluster constraint beside any region, zone or provider one.
func init() {
	acceptedCases = append(acceptedCases, spreadAccepted...)
	refusedCases = append(refusedCases, spreadRefused...)
}

func spreadPolicy(name, constraints string) string {
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
  placement:
    spreadConstraints:
` + constraints
}

var spreadAccepted = []validationCase{
	{name: "cluster maxGroups 1 with region minGroups 2 (Karmada's e2e spread_by_region_test)", yaml: spreadPolicy("two-regions", `
    - spreadByField: cluster
      minGroups: 1
      maxGroups: 1
    - spreadByField: region
      minGroups: 2
      maxGroups: 2
`)},
	{name: "every field with a cluster constraint given without a field", yaml: spreadPolicy("every-field", `
    - maxGroups: 4
    - spreadByField: provider
      minGroups: 1
    - spreadByField: region
      minGroups: 2
    - spreadByField: zone
      minGroups: 2
    - spreadByLabel: tier
      maxGroups: 1
`)},
	{name: "a label constraint alone", yaml: spreadPolicy("label-only", `
    - spreadByLabel: tier
      minGroups: 2
`)},
}

var spreadRefused = []validationCase{
	{name: "region without a cluster constraint", want: []string{"spec.placement.spreadConstraints", "needs a spreadByField cluster constraint too"},
		yaml: spreadPolicy("region-alone", `
    - spreadByField: region
      minGroups: 2
`)},
	{name: "the same field twice", want: []string{"spec.placement.spreadConstraints", "each spreadByField may appear only once"},
		yaml: spreadPolicy("region-twice", `
    - spreadByField: cluster
      maxGroups: 2
    - spreadByField: region
      minGroups: 2
    - spreadByField: region
      maxGroups: 3
`)},
	{name: "cluster twice, once implied", want: []string{"spec.placement.spreadConstraints", "each spreadByField may appear only once"},
		yaml: spreadPolicy("cluster-twice", `
    - spreadByField: cluster
      maxGroups: 2
    - minGroups: 1
`)},
	{name: "the same label twice", want: []string{"spec.placement.spreadConstraints", "each spreadByLabel may appear only once"},
		yaml: spreadPolicy("label-twice", `
    - spreadByLabel: tier
      minGroups: 1
    - spreadByLabel: tier
      maxGroups: 2
`)},
}
