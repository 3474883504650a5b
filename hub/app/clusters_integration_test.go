package app_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1alpha1 "github.com/flotilla-io/flotilla/pkg/apis/cluster/v1alpha1"
	flotillaclient "github.com/flotilla-io/flotilla/pkg/generated/clientset/versioned"
)

// createReadyClusters registers clusters the way a reporting agent leaves
// them: Ready=True and a resource summary with room for pods (110 pods,
// 100 CPUs, 400Gi memory), so neither the not-ready taint nor capacity-based
// division treats them as unknown. Without a Lease renewal they still turn
// Unknown after the startup grace; tests longer than that renew or tune it.
func createReadyClusters(t *testing.T, ctx context.Context, fc flotillaclient.Interface, names ...string) {
	t.Helper()
	for _, name := range names {
		c := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}}
		created, err := fc.ClusterV1alpha1().Clusters().Create(ctx, c, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		setClusterReady(t, ctx, fc, created, metav1.ConditionTrue)
	}
}

// setClusterReady writes the cluster's Ready condition and a roomy resource
// summary, as its agent would, retrying on conflicts.
func setClusterReady(t *testing.T, ctx context.Context, fc flotillaclient.Interface, c *clusterv1alpha1.Cluster, status metav1.ConditionStatus) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{Type: clusterv1alpha1.ClusterConditionReady,
			Status: status, Reason: "ClusterReady", Message: "set by the test"})
		if c.Status.ResourceSummary == nil {
			c.Status.ResourceSummary = &clusterv1alpha1.ResourceSummary{Allocatable: corev1.ResourceList{
				corev1.ResourcePods:   resource.MustParse("110"),
				corev1.ResourceCPU:    resource.MustParse("100"),
				corev1.ResourceMemory: resource.MustParse("400Gi"),
			}}
		}
		_, err := fc.ClusterV1alpha1().Clusters().UpdateStatus(ctx, c, metav1.UpdateOptions{})
		if err == nil {
			return
		}
		if attempt > 20 {
			t.Fatalf("setting cluster %s Ready=%s: %v", c.Name, status, err)
		}
		if c, err = fc.ClusterV1alpha1().Clusters().Get(ctx, c.Name, metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}
