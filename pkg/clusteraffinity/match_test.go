package clusteraffinity

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
)

func TestMatches(t *testing.T) {
	c := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "m1", Labels: map[string]string{"env": "prod"}},
		Spec: clusterv1alpha1.ClusterSpec{Provider: "aws", Region: "eu", Zones: []string{"eu-1", "eu-2"}}}
	field := func(key string, op corev1.NodeSelectorOperator, values ...string) *policyv1alpha1.FieldSelector {
		return &policyv1alpha1.FieldSelector{MatchExpressions: []policyv1alpha1.FieldSelectorRequirement{{Key: key, Operator: op, Values: values}}}
	}
	cases := []struct {
		name string
		a    *policyv1alpha1.ClusterAffinity
		want bool
	}{
		{"nil matches all", nil, true},
		{"by name", &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"m1"}}, true},
		{"other name", &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"m2"}}, false},
		{"exclude wins", &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"m1"}, ExcludeClusters: []string{"m1"}}, false},
		{"label", &policyv1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}}, true},
		{"label mismatch", &policyv1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}}}, false},
		{"region In", &policyv1alpha1.ClusterAffinity{FieldSelector: field("region", corev1.NodeSelectorOpIn, "eu")}, true},
		{"zone In any", &policyv1alpha1.ClusterAffinity{FieldSelector: field("zone", corev1.NodeSelectorOpIn, "eu-2")}, true},
		{"provider NotIn", &policyv1alpha1.ClusterAffinity{FieldSelector: field("provider", corev1.NodeSelectorOpNotIn, "aws")}, false},
	}
	for _, tc := range cases {
		if got := Matches(tc.a, c); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
