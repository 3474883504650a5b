// Package clusteraffinity decides whether a Cluster matches a ClusterAffinity
// (Karmada semantics): every set part must hold — clusterNames, labelSelector
// and fieldSelector on provider/region/zone — and exclude always wins. A nil
// affinity matches every cluster.
package clusteraffinity

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/policy/v1alpha1"
)

// Matches reports whether cluster is selected by affinity.
func Matches(affinity *policyv1alpha1.ClusterAffinity, cluster *clusterv1alpha1.Cluster) bool {
	if affinity == nil {
		return true
	}
	if slices.Contains(affinity.ExcludeClusters, cluster.Name) {
		return false
	}
	if len(affinity.ClusterNames) > 0 && !slices.Contains(affinity.ClusterNames, cluster.Name) {
		return false
	}
	if affinity.LabelSelector != nil {
		selector, err := metav1.LabelSelectorAsSelector(affinity.LabelSelector)
		if err != nil || !selector.Matches(labels.Set(cluster.Labels)) {
			return false
		}
	}
	if affinity.FieldSelector != nil {
		for _, req := range affinity.FieldSelector.MatchExpressions {
			if !fieldMatches(req, cluster) {
				return false
			}
		}
	}
	return true
}

func fieldMatches(req policyv1alpha1.FieldSelectorRequirement, cluster *clusterv1alpha1.Cluster) bool {
	var values []string
	switch req.Key {
	case "provider":
		values = []string{cluster.Spec.Provider}
	case "region":
		values = []string{cluster.Spec.Region}
	case "zone":
		values = append(values, cluster.Spec.Zones...)
		//lint:ignore SA1019 the deprecated single zone is still matched, as in Karmada
		if cluster.Spec.Zone != "" {
			values = append(values, cluster.Spec.Zone) //lint:ignore SA1019 see above
		}
	default:
		return false
	}
	any := false
	for _, v := range values {
		if v != "" && slices.Contains(req.Values, v) {
			any = true
		}
	}
	switch req.Operator {
	case corev1.NodeSelectorOpIn:
		return any
	case corev1.NodeSelectorOpNotIn:
		return !any
	default:
		return false
	}
}
