package conformance

import (
	"testing"

	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
)

// Karmada: test/e2e/suites/base/spread_by_region_test.go,
// SerialDescribe("spread-by-region testing"), Context("Deployment
// propagation testing"), It("multiple region deployment testing"): two
// members in regions "2" and "1", a third in none; Duplicated with
// spreadByField cluster 1..1 and region 2..2 runs on the two region
// members (a group constraint's minGroups wins over the cluster
// constraint's maxGroups), and region 1..1 then leaves one cluster.
// Karmada's policy has no clusterAffinity (every member of its fleet);
// here it names the case's three members, as the fleet is shared.
func TestKarmada_SpreadByRegion_MultipleRegions(t *testing.T) {
	c := newCase(t)
	members := c.clusters("sim", clusterSpec{region: "2"}, clusterSpec{region: "1"}, clusterSpec{})
	spread := func(regions int32) []policyv1alpha1.SpreadConstraint {
		return []policyv1alpha1.SpreadConstraint{
			{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MaxGroups: 1, MinGroups: 1},
			{SpreadByField: policyv1alpha1.SpreadByFieldRegion, MaxGroups: regions, MinGroups: regions}}
	}
	c.policy("nginx", policyv1alpha1.PropagationSpec{ResourceSelectors: selector("apps/v1", "Deployment", "nginx"),
		Placement: policyv1alpha1.Placement{ClusterAffinity: onClusters(members...), SpreadConstraints: spread(2),
			ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDuplicated}}})
	binding := c.template(deployment("nginx", 3))
	c.waitPlacedOn(binding, members[:2]...)
	c.waitPresent(binding, members[:2], nil)

	c.updatePolicy("nginx", func(s *policyv1alpha1.PropagationSpec) { s.Placement.SpreadConstraints = spread(1) })
	c.eventually("scheduled to one region", func() (bool, error) {
		rb := c.binding(binding)
		return rb != nil && len(rb.Spec.Clusters) == 1, nil
	})
}
