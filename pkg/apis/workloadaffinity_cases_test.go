package apis_test

import (
	"strconv"
	"strings"
)

// workloadAffinity (issue 39, Karmada v1.17's shape): a label key per
// term, not the same key for both, on both policy kinds; the binding's
// group strings are bounded.
func init() {
	acceptedCases = append(acceptedCases, workloadAffinityAccepted...)
	refusedCases = append(refusedCases, workloadAffinityRefused...)
}

var workloadAffinityPolicies int

func workloadAffinityPolicy(kind, workloadAffinity string) string {
	workloadAffinityPolicies++
	ns := "\n  namespace: default"
	if kind == "ClusterPropagationPolicy" {
		ns = ""
	}
	return `
apiVersion: policy.flotilla.io/v1alpha1
kind: ` + kind + `
metadata:
  name: wa-` + strconv.Itoa(workloadAffinityPolicies) + ns + `
spec:
  resourceSelectors:
  - apiVersion: apps/v1
    kind: Deployment
  placement:
    workloadAffinity:` + workloadAffinity
}

var workloadAffinityAccepted = []validationCase{
	{name: "PropagationPolicy with workloadAffinity (Karmada's user guide, combined)", yaml: workloadAffinityPolicy("PropagationPolicy", `
      affinity:
        groupByLabelKey: app.stack
      antiAffinity:
        groupByLabelKey: app.instance`)},
	{name: "ClusterPropagationPolicy with a prefixed antiAffinity key", yaml: workloadAffinityPolicy("ClusterPropagationPolicy", `
      antiAffinity:
        groupByLabelKey: karmada.io/group`)},
	{name: "workloadAffinity key of 253+1+63 characters", yaml: workloadAffinityPolicy("PropagationPolicy", `
      affinity:
        groupByLabelKey: `+strings.Repeat("a", 63)+"."+strings.Repeat("b", 63)+"."+strings.Repeat("c", 63)+"."+strings.Repeat("d", 61)+"/"+strings.Repeat("n", 63))},
	{name: "ResourceBinding with workloadAffinityGroups", yaml: `
apiVersion: work.flotilla.io/v1alpha1
kind: ResourceBinding
metadata:
  name: wa-deployment
  namespace: default
spec:
  resource:
    apiVersion: apps/v1
    kind: Deployment
    name: wa
  workloadAffinityGroups:
    affinityGroup: app.stack=shop
    antiAffinityGroup: app.instance=1
`},
}

var workloadAffinityRefused = []validationCase{
	{name: "workloadAffinity same key for affinity and antiAffinity", want: []string{"spec.placement.workloadAffinity", "must not use the same groupByLabelKey"},
		yaml: workloadAffinityPolicy("PropagationPolicy", `
      affinity:
        groupByLabelKey: app.group
      antiAffinity:
        groupByLabelKey: app.group`)},
	{name: "workloadAffinity key not a label key", want: []string{"spec.placement.workloadAffinity.antiAffinity.groupByLabelKey", "groupByLabelKey must be a label key"},
		yaml: workloadAffinityPolicy("ClusterPropagationPolicy", `
      antiAffinity:
        groupByLabelKey: "app group"`)},
	{name: "workloadAffinity key name part over 63", want: []string{"spec.placement.workloadAffinity.affinity.groupByLabelKey", "groupByLabelKey must be a label key"},
		yaml: workloadAffinityPolicy("PropagationPolicy", `
      affinity:
        groupByLabelKey: example.com/`+strings.Repeat("n", 64))},
	{name: "workloadAffinity key prefix over 253", want: []string{"spec.placement.workloadAffinity.affinity.groupByLabelKey", "groupByLabelKey must be a label key"},
		yaml: workloadAffinityPolicy("PropagationPolicy", `
      affinity:
        groupByLabelKey: `+strings.Repeat("a", 63)+"."+strings.Repeat("b", 63)+"."+strings.Repeat("c", 63)+"."+strings.Repeat("d", 62)+"/n")},
	{name: "workloadAffinity empty key", want: []string{"spec.placement.workloadAffinity.affinity.groupByLabelKey"},
		yaml: workloadAffinityPolicy("PropagationPolicy", `
      affinity:
        groupByLabelKey: ""`)},
	{name: "binding workloadAffinityGroups over 381 characters", want: []string{"spec.workloadAffinityGroups.antiAffinityGroup", "381"}, yaml: `
apiVersion: work.flotilla.io/v1alpha1
kind: ResourceBinding
metadata:
  name: wa-long
  namespace: default
spec:
  resource:
    apiVersion: apps/v1
    kind: Deployment
    name: wa
  workloadAffinityGroups:
    antiAffinityGroup: ` + strings.Repeat("k", 300) + "=" + strings.Repeat("v", 81) + `
`},
}
